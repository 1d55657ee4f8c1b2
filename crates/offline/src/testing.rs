//! What the commands' tests share: scratch directories, the repository's
//! files, and a command run on in-memory streams as the binary run in a
//! directory runs it.

use std::path::{Path, PathBuf};

pub(crate) use sartor_tests::scratch::{Scratch, scratch};

pub(crate) use sartor_tests::samples::{MUTATED_POD, POD, PROD_ONLY, PULL};

use crate::{Exit, Io};

/// The repository root.
pub(crate) fn repo_root() -> PathBuf {
    sartor_tests::workspace_root()
}

/// A file of the fixtures the CLI's tests, the cluster suite and these
/// tests share (`crates/cli/tests/fixtures`), as an absolute path.
pub(crate) fn fixture(name: &str) -> String {
    repo_root()
        .join("crates/cli/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// The namespace-less Pod and Deployment of `fixtures/namespace-less`, with
/// mutators limited to namespaced objects (also proven on a real API server:
/// the cluster suite's `scope::namespace_less_manifests_...`).
pub(crate) fn namespace_less(name: &str) -> String {
    fixture(&format!("namespace-less/{name}"))
}

/// What a command did: how it ended, and what it wrote to `out` and `err`.
#[derive(Debug, PartialEq)]
pub(crate) struct Ran {
    pub exit: Exit,
    pub out: String,
    pub err: String,
}

/// `A` (a command's flags) parsed from `args`, as the binary parses them
/// after the command's name.
pub(crate) fn parse<A: clap::Args>(args: &[&str]) -> A {
    #[derive(clap::Parser)]
    struct Command<A: clap::Args> {
        #[command(flatten)]
        args: A,
    }
    let args = std::iter::once("sartor").chain(args.iter().copied());
    <Command<A> as clap::Parser>::try_parse_from(args)
        .unwrap()
        .args
}

/// Makes each path of `paths` but `-` (standard input) a path in `dir`,
/// as the binary run in `dir` reads it.
pub(crate) fn rebase(dir: &Path, paths: &mut [String]) {
    for path in paths.iter_mut().filter(|p| *p != "-") {
        *path = dir.join(&*path).display().to_string();
    }
}

/// Runs `command` with `stdin` and in-memory `out` and `err` (no colour),
/// the paths it wrote shown relative to `dir` (`dir/` taken off), as the
/// binary run in `dir` with relative paths writes them: the expected text
/// reads as a user sees it.
pub(crate) fn run_in(
    dir: &Path,
    stdin: &str,
    command: impl FnOnce(&mut Io<'_>) -> anyhow::Result<Exit>,
) -> Ran {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = command(&mut Io {
        stdin: &mut stdin.as_bytes(),
        out: &mut out,
        err: &mut err,
        colour: false,
    })
    .unwrap();
    let prefix = format!("{}/", dir.display());
    let shown = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap().replace(&prefix, "");
    Ran {
        exit,
        out: shown(out),
        err: shown(err),
    }
}

// === the mutators and objects the tests share ===

/// PULL for every operation: what expansion generates is admitted by no
/// operation, which only such a mutator matches (as in Gatekeeper).
pub(crate) fn pull_every_operation() -> String {
    PULL.replace(", operations: [CREATE]", "")
}

/// A repository: mutators beside the workloads and their Namespace, in one
/// tree and one multi-document file (as `kustomize build` prints it).
pub(crate) fn repository(test: &str) -> Scratch {
    let namespace =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n";
    scratch(
        test,
        &[
            ("repo/policy/pull.yaml", PULL),
            ("repo/policy/tier.yaml", PROD_ONLY),
            ("repo/shop/namespace.yaml", namespace),
            ("repo/shop/pod.yaml", POD),
            (
                "built.yaml",
                &format!("{namespace}---\n{PULL}---\n{PROD_ONLY}---\n{POD}"),
            ),
        ],
    )
}

pub(crate) const WIDGET_SIZE: &str = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: widget-size
spec:
  applyTo:
  - groups: [example.com]
    kinds: [Widget]
    versions: [v1]
  match:
    scope: Namespaced
  location: spec.size
  parameters:
    assign:
      value: 3
";
