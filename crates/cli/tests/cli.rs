#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
//! The `sartor` binary's own contract, end to end: its flags, its exit
//! codes, results on stdout and problems on stderr, standard input and a
//! closed stdout. What `lint`, `mutate` and `test` compute is tested beside
//! them, in `sartor-offline` (`crates/offline/src/*/tests.rs`), through the
//! same entry points this binary calls.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use sartor_tests::samples::{MUTATED_POD, POD, PROD_ONLY, PULL};
use sartor_tests::scratch::scratch;

/// Runs `sartor` in `dir`; (exit code, stdout, stderr).
fn sartor(dir: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sartor"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The same location made invalid: the mutator does not compile.
fn broken_pull() -> String {
    PULL.replace(
        "'spec.containers[name: *].imagePullPolicy'",
        "'spec.containers[name: *'",
    )
}

/// What `sartor` says of `broken_pull()` in `pull.yaml`.
const BROKEN_PULL_ERROR: &str = "error: pull.yaml: document 1: Assign pull: spec.location: invalid location \"spec.containers[name: *\": expected ']' at 23, found end of location\n  spec.containers[name: *\n                         ^\n";

// === the offline commands: exit codes, stdout and stderr, stdin ===

#[test]
fn mutate_prints_objects_on_stdout_problems_on_stderr_and_exits_0_1_or_2() {
    let namespace =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n";
    let dir = scratch(
        "mutate-exits",
        &[
            ("pull.yaml", PULL),
            ("broken.yaml", &broken_pull()),
            ("tier.yaml", PROD_ONLY),
            ("pod.yaml", POD),
            ("ns.yaml", namespace),
        ],
    );
    // 0: the objects on stdout, nothing on stderr.
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "pull.yaml", "pod.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, MUTATED_POD, "")
    );
    // 1: a mutation failed, said on stderr.
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "tier.yaml", "pod.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            1,
            "",
            "error: pod.yaml: document 1: v1 Pod shop/web: AssignMetadata tier: its namespaceSelector needs the labels of Namespace \"shop\", which was not provided; pass the Namespace object with --namespaces\n"
        )
    );
    // 1 with --exit-code: an object would change (it is printed all the same).
    let (code, stdout, stderr) = sartor(
        &dir,
        &["mutate", "--exit-code", "-m", "pull.yaml", "pod.yaml"],
        "",
    );
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (1, MUTATED_POD, "")
    );
    let (code, _, _) = sartor(
        &dir,
        &[
            "mutate",
            "--exit-code",
            "-m",
            "tier.yaml",
            "ns.yaml",
            "pod.yaml",
        ],
        "",
    );
    assert_eq!(code, 1);
    // 2: invalid input.
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "broken.yaml", "pod.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr),
        (2, "", BROKEN_PULL_ERROR.replace("pull.yaml", "broken.yaml"))
    );
}

#[test]
fn mutate_reads_stdin_when_no_path_is_given_or_at_a_dash() {
    let dir = scratch("mutate-stdin", &[("pull.yaml", PULL), ("pod.yaml", POD)]);
    // `kustomize build | sartor mutate`: the mutators among the objects.
    let (code, stdout, stderr) = sartor(&dir, &["mutate"], &format!("{PULL}---\n{POD}"));
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, MUTATED_POD, "")
    );
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "pull.yaml", "-"], POD);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, MUTATED_POD, "")
    );
    // A path given, and no dash: stdin is not read.
    let (code, stdout, _) = sartor(
        &dir,
        &["mutate", "-m", "pull.yaml", "pod.yaml"],
        "not: read",
    );
    assert_eq!((code, stdout.as_str()), (0, MUTATED_POD));
}

#[test]
fn lint_reports_text_on_stderr_and_json_on_stdout_and_exits_0_or_2() {
    let dir = scratch(
        "lint-exits",
        &[("pull.yaml", PULL), ("broken.yaml", &broken_pull())],
    );
    let (code, stdout, stderr) = sartor(&dir, &["lint", "pull.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, "", "1 mutators, no problems\n")
    );
    let (code, stdout, stderr) = sartor(&dir, &["lint", "-o", "json", "pull.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "{\n  \"errors\": 0,\n  \"findings\": [],\n  \"mutators\": 1,\n  \"skipped\": 0,\n  \"warnings\": 0\n}\n",
            ""
        )
    );
    let (code, stdout, stderr) = sartor(&dir, &["lint", "broken.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr),
        (2, "", BROKEN_PULL_ERROR.replace("pull.yaml", "broken.yaml"))
    );
    let (code, stdout, stderr) = sartor(&dir, &["lint", "-o", "json", "broken.yaml"], "");
    assert_eq!((code, stderr.as_str()), (2, ""));
    assert!(stdout.contains("\"errors\": 1,"), "{stdout}");
    // The location's line in the file, for CI annotations; none on stdin.
    assert!(stdout.contains("\"line\": 6,"), "{stdout}");
    let (code, stdout, _) = sartor(&dir, &["lint", "-o", "json", "-"], &broken_pull());
    assert_eq!(code, 2);
    assert!(stdout.contains("\"line\": null,"), "{stdout}");
    // From stdin.
    let (code, _, stderr) = sartor(&dir, &["lint", "-"], PULL);
    assert_eq!((code, stderr.as_str()), (0, "1 mutators, no problems\n"));
}

#[test]
fn test_prints_its_report_on_stdout_and_exits_0_1_or_2() {
    let suite = |expected: &str| {
        format!(
            "mutators: [../pull.yaml]\ncases:\n- name: pulls\n  input: ../pod.yaml\n  expected: {expected}\n"
        )
    };
    let dir = scratch(
        "test-exits",
        &[
            ("pull.yaml", PULL),
            ("pod.yaml", POD),
            ("mutated.yaml", MUTATED_POD),
            ("pass/a.sartor-test.yaml", &suite("../mutated.yaml")),
            ("fail/a.sartor-test.yaml", &suite("../pod.yaml")),
            (
                "invalid/a.sartor-test.yaml",
                "mutators: [pull.yaml]\ncase: []\n",
            ),
        ],
    );
    let (code, stdout, stderr) = sartor(&dir, &["test", "pass"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "PASS pass/a.sartor-test.yaml: pulls\n1 passed, 0 failed\n",
            ""
        )
    );
    let (code, stdout, stderr) = sartor(&dir, &["test", "fail"], "");
    assert_eq!((code, stderr.as_str()), (1, ""));
    assert!(
        stdout.starts_with("FAIL fail/a.sartor-test.yaml: pulls\n    --- expected #1\n"),
        "{stdout}"
    );
    assert!(stdout.ends_with("\n0 passed, 1 failed\n"), "{stdout}");
    let (code, stdout, stderr) = sartor(&dir, &["test", "invalid"], "");
    assert_eq!(
        (code, stdout.as_str()),
        (2, "0 passed, 0 failed, 1 suite invalid\n")
    );
    assert!(
        stderr
            .starts_with("error: invalid/a.sartor-test.yaml: invalid suite: unknown field `case`"),
        "{stderr}"
    );
    let (code, stdout, stderr) = sartor(&dir, &["test", "pass", "--run", "nothing"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (2, "", "error: no case name contains \"nothing\"\n")
    );
}

#[test]
fn the_help_says_the_exit_codes_and_where_output_goes() {
    let dir = scratch("help", &[]);
    let (code, stdout, stderr) = sartor(&dir, &["--help"], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(
        stdout.ends_with(
            "Exit codes: 0 ok; 1 a mutation or a test case failed; 2 invalid input (unreadable files, \
             invalid mutators, schema or condition conflicts).\n\
             Results go to stdout, problems to stderr.\n"
        ),
        "{stdout}"
    );
    for command in [
        "mutate",
        "lint",
        "test",
        "serve",
        "audit",
        "crds",
        "export",
        "playground",
    ] {
        assert!(
            stdout.contains(&format!("\n  {command} ")),
            "{command}: {stdout}"
        );
    }
}

/// Flags that cannot go together, or are missing, are refused by the parser
/// before anything is read: exit 2, the reason on stderr.
#[test]
fn flags_that_do_not_go_together_exit_2_before_reading_anything() {
    let dir = scratch("flags", &[("pull.yaml", PULL), ("pod.yaml", POD)]);
    let refused = |args: &[&str], reason: &str| {
        let (code, stdout, stderr) = sartor(&dir, args, "");
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(reason),
            "{args:?}: {stderr}"
        );
    };
    refused(
        &[
            "mutate",
            "-m",
            "pull.yaml",
            "--diff",
            "--explain",
            "pod.yaml",
        ],
        "'--diff' cannot be used with '--explain'",
    );
    refused(
        &[
            "mutate",
            "-m",
            "pull.yaml",
            "--no-builtin-templates",
            "pod.yaml",
        ],
        "--expand",
    );
    refused(
        &[
            "mutate",
            "-m",
            "pull.yaml",
            "--call-providers",
            "--provider-answers",
            "a.yaml",
            "pod.yaml",
        ],
        "'--call-providers' cannot be used with '--provider-answers <FILE>'",
    );
    refused(
        &["mutate", "--operation", "DELETE", "pod.yaml"],
        "invalid value 'DELETE'",
    );
    refused(
        &["lint"],
        "the following required arguments were not provided",
    );
    refused(
        &["lint", "--allow", "no-such-rule", "pull.yaml"],
        "unknown rule \"no-such-rule\"; the rules are ",
    );
    refused(
        &["test"],
        "the following required arguments were not provided",
    );
    refused(&["test", "--format", "xml", "."], "invalid value 'xml'");
}

/// A reader that goes away (`sartor mutate ... | head`) is an error said on
/// stderr, not a panic: 3,000 Pods (over 400 kB of YAML) do not fit in a
/// pipe's 64 KiB buffer, so a write meets the closed pipe.
#[test]
fn a_closed_stdout_ends_mutate_with_an_error_not_a_panic() {
    let pods: String = (0..3000)
        .map(|i| POD.replace("name: web", &format!("name: web-{i}")))
        .collect::<Vec<_>>()
        .join("---\n");
    let dir = scratch(
        "mutate-closed",
        &[("pull.yaml", PULL), ("pods.yaml", &pods)],
    );
    let (code, stderr) = with_stdout_closed(&dir, &["mutate", "-m", "pull.yaml", "pods.yaml"]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            Some(2),
            "error: writing to stdout: Broken pipe (os error 32)\n"
        )
    );
}

// === the commands whose libraries are tested elsewhere ===

#[test]
fn audit_names_a_kubeconfig_it_cannot_read() {
    let dir = scratch("audit-kubeconfig", &[("pull.yaml", PULL)]);
    let (code, stdout, stderr) = sartor(
        &dir,
        &["audit", "-m", "pull.yaml", "--kubeconfig", "missing/config"],
        "",
    );
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(
        stderr.starts_with("error: --kubeconfig missing/config: "),
        "{stderr}"
    );
}

#[test]
fn audit_refuses_invalid_mutator_files_before_reaching_a_cluster() {
    let broken = PULL.replace(
        "'spec.containers[name: *].imagePullPolicy'",
        "'spec.containers[name: *'",
    );
    let dir = scratch("audit-invalid", &[("pull.yaml", &broken)]);
    let (code, stdout, stderr) = sartor(&dir, &["audit", "-m", "pull.yaml"], "");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "error: pull.yaml: document 1: Assign pull: spec.location: invalid location \"spec.containers[name: *\": expected ']' at 23, found end of location\n  spec.containers[name: *\n                         ^\n"
    );
}

#[test]
fn crds_prints_or_writes_the_checked_in_crds() {
    let root = sartor_tests::workspace_root().join("crds");
    let files = [
        "assign.yaml",
        "assignimage.yaml",
        "assignmetadata.yaml",
        "modifyset.yaml",
    ];
    let checked_in: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .collect();
    let dir = scratch("crds", &[]);
    std::fs::create_dir_all(&dir).unwrap();
    let (code, stdout, _) = sartor(&dir, &["crds"], "");
    assert_eq!(code, 0);
    assert_eq!(stdout, checked_in.join("---\n"));
    let (code, stdout, _) = sartor(&dir, &["crds", "--out", "out/crds"], "");
    assert_eq!((code, stdout.as_str()), (0, ""));
    for (file, want) in files.iter().zip(&checked_in) {
        assert_eq!(
            &std::fs::read_to_string(dir.join("out/crds").join(file)).unwrap(),
            want
        );
    }
}

#[test]
fn export_map_prints_the_policy_and_names_what_it_leaves_out() {
    let dir = sartor_tests::workspace_root();
    let (code, stdout, stderr) = sartor(&dir, &["export", "map", "examples/mutators"], "");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr, "10 of 10 mutators exported\n");
    let documents: Vec<serde_json::Value> = stdout
        .split("---\n")
        .map(|document| serde_yaml::from_str(document).unwrap())
        .collect();
    let kinds: Vec<&str> = documents
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
    );
    assert_eq!(
        documents[0]["metadata"]["annotations"]["mutations.sartor.dev/exported"],
        "Assign/always-pull-deployments, Assign/always-pull-pods, Assign/log-sidecar, Assign/no-host-ports, Assign/read-only-root, Assign/seccomp-runtime-default, AssignImage/pin-registry, AssignMetadata/owner-from-namespace, AssignMetadata/team-from-namespace, ModifySet/no-debug-flag"
    );
    // gatekeeper-library's pod-security-policy set, whole.
    let (library_code, _, library_stderr) = sartor(
        &dir,
        &[
            "export",
            "map",
            "tests/fixtures/export/gatekeeper-library/mutators.yaml",
        ],
        "",
    );
    assert_eq!(
        (library_code, library_stderr.as_str()),
        (0, "15 of 15 mutators exported\n")
    );
    // The mutators named by -m / --mutators, as the other commands take
    // them: the same output.
    let flagged = sartor(&dir, &["export", "map", "-m", "examples/mutators"], "");
    assert_eq!(flagged, (code, stdout.clone(), stderr.clone()));
    let (code_none, _, refused) = sartor(&dir, &["export", "map"], "");
    assert_eq!(code_none, 2);
    assert!(refused.contains("<PATH>"), "{refused}");
    // Some left out: 1, naming each and why; invalid input: 2, saying why.
    let scratch_dir = scratch(
        "export-invalid",
        &[
            (
                "partly.yaml",
                concat!(
                    "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: generated}\n",
                    "spec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Pod]}]\n",
                    "  match: {source: Generated}\n  location: spec.dnsPolicy\n  parameters: {assign: {value: None}}\n",
                    "---\n",
                    "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: dns}\n",
                    "spec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Pod]}]\n",
                    "  location: spec.dnsPolicy\n  parameters: {assign: {value: None}}\n",
                ),
            ),
            (
                "m.yaml",
                "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: a}\n",
            ),
            (
                "none.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
            ),
        ],
    );
    let (code, _, stderr) = sartor(&scratch_dir, &["export", "map", "partly.yaml"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            1,
            "Assign/generated: not exported: it matches only generated objects (match.source: Generated), which never reach admission\n1 of 2 mutators exported\n"
        )
    );
    let (code, stdout, stderr) = sartor(&scratch_dir, &["export", "map", "m.yaml"], "");
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert!(stderr.starts_with("error: m.yaml: document 1:"), "{stderr}");
    let (code, stdout, stderr) = sartor(&scratch_dir, &["export", "map", "none.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: no mutators in none.yaml (documents whose apiVersion is mutations.sartor.dev or mutations.gatekeeper.sh)\n"
        )
    );
}

#[test]
fn audit_rbac_prints_the_role_and_names_a_kind_it_cannot_resolve() {
    let widgets = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: size}\nspec:\n  applyTo: [{groups: [example.com], versions: [v1], kinds: [Widget]}]\n  location: spec.size\n  parameters: {assign: {value: 3}}\n";
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {kind: Widget, plural: widgets}\n  versions: []\n";
    let dir = scratch(
        "audit-rbac",
        &[("m.yaml", widgets), ("crds/widget.yaml", crd)],
    );
    let (code, stdout, stderr) = sartor(dir.as_ref(), &["audit", "rbac", "-m", "m.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: m.yaml: document 1: Widget.example.com/*, which Assign/size applies to, has no resource (plural) known offline: give its CRD among the mutator paths, or `kubectl api-resources` output with --api-resources\n"
        )
    );
    // With the CRD, Widgets are granted, and in the chart's values too.
    let (code, stdout, stderr) = sartor(
        dir.as_ref(),
        &[
            "audit",
            "rbac",
            "-m",
            "m.yaml",
            "-m",
            "crds",
            "-o",
            "helm-values",
        ],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    let values: serde_json::Value = serde_yaml::from_str(&stdout).unwrap();
    assert_eq!(
        values,
        serde_json::json!({"audit": {"rules": [
            {"apiGroups": [""], "resources": ["namespaces"]},
            {"apiGroups": ["example.com"], "resources": ["widgets"]},
        ]}})
    );
}

/// A reader that goes away (`sartor crds | head -1`) is an error said on
/// stderr, not a panic. The CRDs (77 kB) do not fit in a pipe's 64 KiB
/// buffer, so a write waits for the reader, which is gone.
#[test]
fn a_closed_stdout_is_an_error_not_a_panic() {
    let dir = scratch("crds-closed", &[]);
    let (code, stderr) = with_stdout_closed(&dir, &["crds"]);
    assert_eq!(
        stderr,
        "error: writing to stdout: Broken pipe (os error 32)\n"
    );
    assert_eq!(code, Some(2));
}

/// Runs `sartor` in `dir` with its stdout closed at once, as when the
/// reader of a pipe has gone; (exit code, stderr).
fn with_stdout_closed(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sartor"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `sartor playground` from a directory holding nothing: the page, its
/// script and the examples come from the binary; the address it prints is
/// where it answers; a port in use is refused, naming the flag.
#[test]
fn the_playground_serves_its_page_from_the_binary_alone() {
    use std::io::{BufRead as _, Read as _};

    let dir = scratch("playground", &[]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sartor"))
        .args(["playground", "--port", "0"])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let address = line
        .strip_prefix("sartor playground: http://")
        .and_then(|rest| rest.strip_suffix("/ (Ctrl-C to stop)\n"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let get = |path: &str| {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let page = get("/");
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    assert!(page.contains("<title>sartor playground</title>"), "{page}");
    assert!(get("/playground.js").starts_with("HTTP/1.1 200 OK\r\n"));
    let examples = get("/api/examples");
    assert!(
        examples.contains("\"name\":\"all the examples\""),
        "{examples}"
    );

    // The same port again: refused, naming the address and the flags.
    let (code, stdout, refused) = sartor(&dir, &["playground", "--listen", &address], "");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(
        refused.starts_with(&format!(
            "error: listening on {address} (--port, --listen): Address already in use"
        )),
        "{refused}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// One vocabulary: every command that reads mutator files takes them as
/// `-m PATH` or `--mutators PATH`, repeated for more, and those that read
/// nothing else positionally (lint, export) as PATHs too; `sartor mutate`
/// finds mutators among its inputs as well. Each form gives the same
/// output.
#[test]
fn every_command_reading_mutators_takes_them_the_same_ways() {
    let seccomp = std::fs::read_to_string(
        sartor_tests::workspace_root().join("examples/mutators/seccomp-default.yaml"),
    )
    .unwrap();
    let dir = scratch(
        "vocabulary",
        &[("a.yaml", PULL), ("b.yaml", &seccomp), ("pod.yaml", POD)],
    );
    let commands: [(&[&str], &[&str], bool); 5] = [
        (&["mutate"], &["pod.yaml"], true),
        (&["lint"], &[], true),
        (&["export", "map"], &[], true),
        (&["export", "condition"], &[], true),
        // It reads the mutators before the kubeconfig it cannot find.
        (&["audit"], &["--kubeconfig", "missing/config"], false),
    ];
    for (command, rest, positional) in commands {
        let run = |mutators: &[&str]| {
            let args: Vec<&str> = [command, mutators, rest].concat();
            sartor(&dir, &args, "")
        };
        let short = run(&["-m", "a.yaml", "-m", "b.yaml"]);
        // Taken by the parser (its refusals print the usage).
        assert!(!short.2.contains("Usage:"), "{command:?}: {short:?}");
        assert_eq!(
            run(&["--mutators", "a.yaml", "--mutators", "b.yaml"]),
            short,
            "{command:?}"
        );
        if positional {
            assert_eq!(run(&["a.yaml", "b.yaml"]), short, "{command:?}");
        }
    }
}
