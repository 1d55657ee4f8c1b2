//! `sartor playground`'s answers equal the binary's output: the
//! differential generator's sets (`tests/differential`, normal and wild
//! modes) as the page would send them, each view compared with `sartor
//! mutate` (plain, `--diff`, `--explain`, `-o suite`, and with `--expand`),
//! `sartor lint --export-map` and `sartor export map` run on the same panes
//! written as files; each suite the page writes passes `sartor test`, and
//! each lint finding is marked at a line of the pane. The unit tests of
//! `crates/playground` do the same on the examples.
//!
//! `SARTOR_PLAYGROUND_CASES` sets how many sets per mode (25 by default).

// Test code: a failed expectation is a failed test.
#![allow(clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use sartor_differential::generate::{self, Mode};
use sartor_playground::{Input, Run, evaluate};
use serde_json::Value;

#[test]
fn the_playground_answers_what_the_binary_prints_for_generated_sets() {
    let count = std::env::var("SARTOR_PLAYGROUND_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(25);
    let binary = sartor_tests::binary::sartor().expect("the sartor binary");
    let dir = tempfile::tempdir().expect("a scratch directory");
    for mode in [Mode::Normal, Mode::Wild] {
        for case in generate::cases(3, mode, count) {
            // The page sends YAML; the CLI reads the same text from files.
            let mut objects = case.namespace.iter().cloned().collect::<Vec<Value>>();
            objects.push(case.object.clone());
            let operation = match case.operation.as_str() {
                "UPDATE" => "UPDATE",
                _ => "CREATE",
            };
            let input = Input {
                mutators: stream(&case.mutators),
                objects: stream(&objects),
                namespace: "default".to_string(),
                operation: operation.to_string(),
                expand: false,
                api_resources: String::new(),
                username: String::new(),
                namespace_labels: String::new(),
            };
            let page = evaluate(&input).expect("the playground evaluates");
            std::fs::write(dir.path().join("mutators.yaml"), &input.mutators).expect("written");
            std::fs::write(dir.path().join("objects.yaml"), &input.objects).expect("written");
            let mutate = |extra: &[&str]| {
                let mut args = vec![
                    "mutate",
                    "-m",
                    "mutators.yaml",
                    "-n",
                    "default",
                    "--operation",
                    operation,
                ];
                args.extend(extra);
                args.push("objects.yaml");
                cli(binary, dir.path(), &args)
            };
            let views = [
                ("mutate", &page.mutate, mutate(&[])),
                ("diff", &page.diff, mutate(&["--diff"])),
                ("explain", &page.explain, mutate(&["--explain"])),
                ("suite", &page.suite, mutate(&["-o", "suite"])),
                (
                    "lint",
                    &page.lint,
                    cli(
                        binary,
                        dir.path(),
                        &["lint", "--export-map", "mutators.yaml"],
                    ),
                ),
                (
                    "export",
                    &page.export,
                    cli(binary, dir.path(), &["export", "map", "mutators.yaml"]),
                ),
            ];
            for (view, answered, printed) in views {
                assert_eq!(
                    answered, &printed,
                    "{}: the {view} view differs from the binary's output\nmutators:\n{}\nobjects:\n{}",
                    case.id, input.mutators, input.objects
                );
            }
            // With --expand: the Pod a Deployment creates, and its suite.
            let expanded = evaluate(&Input {
                expand: true,
                ..input.clone()
            })
            .expect("the playground evaluates");
            for (view, answered, printed) in [
                ("expanded", &expanded.mutate, mutate(&["--expand"])),
                (
                    "expanded suite",
                    &expanded.suite,
                    mutate(&["--expand", "-o", "suite"]),
                ),
            ] {
                assert_eq!(
                    answered, &printed,
                    "{}: the {view} view differs from the binary's output\nmutators:\n{}\nobjects:\n{}",
                    case.id, input.mutators, input.objects
                );
            }
            // The suite keeps what the preview showed: saved beside the
            // panes, every case passes.
            for suite in [&page.suite, &expanded.suite] {
                if suite.exit == 2 {
                    continue;
                }
                std::fs::write(dir.path().join("page.sartor-test.yaml"), &suite.out)
                    .expect("written");
                let tested = cli(binary, dir.path(), &["test", "page.sartor-test.yaml"]);
                assert!(
                    tested.exit == 0 && tested.out.ends_with(" passed, 0 failed\n"),
                    "{}: the page's suite fails:\n{}{}\nsuite:\n{}",
                    case.id,
                    tested.out,
                    tested.err,
                    suite.out
                );
            }
            // Each finding is marked at a line of the pane; one naming
            // spec.location at the location's line.
            let lines: Vec<&str> = input.mutators.split('\n').collect();
            for problem in &page.problems {
                let Some(line) = problem.line else { continue };
                let text = lines
                    .get(line - 1)
                    .unwrap_or_else(|| panic!("{}: {problem:?} is past the pane's end", case.id));
                if problem.text.contains(": spec.location: ") {
                    assert!(
                        text.trim_start().starts_with("location:"),
                        "{}: {problem:?} is marked at {text:?}",
                        case.id
                    );
                }
            }
        }
    }
}

/// Documents as one YAML stream, as a user would paste them.
fn stream(documents: &[Value]) -> String {
    documents
        .iter()
        .map(|document| serde_yaml::to_string(document).expect("YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The binary's exit code, stdout and stderr for `args`, run in `dir`.
fn cli(binary: &Path, dir: &Path, args: &[&str]) -> Run {
    let output = Command::new(binary)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the binary runs");
    Run {
        exit: output
            .status
            .code()
            .and_then(|code| u8::try_from(code).ok())
            .unwrap_or(u8::MAX),
        out: String::from_utf8_lossy(&output.stdout).into_owned(),
        err: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
