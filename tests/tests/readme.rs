//! The README's quick-start commands are the ones CI runs.

// Test code: a panic here is a failed test, not a crash on user input.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use sartor_tests::read_repo_file;

/// The `cargo ...` lines of the first `sh` block under "## Quick start".
fn quick_start_commands(readme: &str) -> Vec<String> {
    let section = readme
        .split("## Quick start")
        .nth(1)
        .expect("README.md has a '## Quick start' section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the Quick start section has a ```sh block");
    block
        .lines()
        .filter(|line| line.starts_with("cargo "))
        .map(str::to_string)
        .collect()
}

#[test]
fn readme_names_an_example_command_and_a_test_command() {
    let readme = read_repo_file("README.md").unwrap();
    let commands = quick_start_commands(&readme);
    assert_eq!(commands.len(), 2, "expected two commands, got {commands:?}");
    assert!(commands[1].starts_with("cargo test"), "{commands:?}");
}

#[test]
fn ci_runs_the_readme_commands_verbatim() {
    let readme = read_repo_file("README.md").unwrap();
    let ci = read_repo_file(".ci/run").unwrap();
    for command in quick_start_commands(&readme) {
        assert!(
            ci.lines().any(|line| line.trim() == command),
            ".ci/run does not run the README command {command:?}"
        );
    }
}
