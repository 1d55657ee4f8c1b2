//! The node's harness undoes every host change: when the suite takes the
//! node down, and when the harness is killed outright (the next start, or
//! `tests/k8s/node clean`, undoes what it left).

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use sartor_tests::cluster::{TempDir, run};
use sartor_tests::node::{HostState, script};

use crate::{Suite, same};

/// Takes the suite's node down and finds the host as it was before the
/// suite; then starts a node, SIGKILLs the script once the node is Ready
/// (its processes, mounts, cgroups, sysctls and network namespace all in
/// place), checks that it did leave things behind, runs what the next start
/// runs first (`tests/k8s/node clean`), and finds the host as it was again.
pub fn a_killed_harness_leaves_nothing_for_the_next_start(suite: &mut Suite) -> Result<(), String> {
    drop(suite.node.take());
    same(
        "the host after the suite's node is taken down",
        HostState::now(),
        suite.host_before.clone(),
    )?;

    let dir = TempDir::new("sartor-node")?;
    let mut up = Command::new(script())
        .arg("up")
        .arg(dir.path().join("node"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", script().display()))?;
    let stdout = up.stdout.take().ok_or("no stdout")?;
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.starts_with("ready "));
    // SIGKILL: no trap runs, the script's stdin stays open.
    let _ = up.kill();
    let _ = up.wait();
    if !ready {
        return Err("the second node did not become Ready".to_string());
    }
    let left = HostState::now();
    if left.netns.0.is_empty() || left.cgroups.is_empty() || left.records.is_empty() {
        return Err(format!(
            "the killed harness left nothing to undo, so this trial proves nothing: {left:?}"
        ));
    }
    let said = run(Command::new(script()).arg("clean"), None)?;
    if !said.contains("undid sartor-node-") {
        return Err(format!("tests/k8s/node clean said: {said}"));
    }
    same(
        "the host after tests/k8s/node clean",
        HostState::now(),
        suite.host_before.clone(),
    )
}
