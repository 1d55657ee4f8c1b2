//! The invariants of docs/architecture.md that the dependency graph can
//! show: which crate may depend on which (`cargo metadata`), and which
//! crates link no cluster client, no network and no async runtime, through
//! any crate (`cargo tree -e normal`). Dev-dependencies are not counted: the
//! webhook's TLS tests take the controller's self-signed certificates.

// Test code: a panic here is a failed test, not a crash on user input.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Each workspace crate's declared normal dependencies, by package name
/// (`--no-deps`: what its Cargo.toml says; [`reachable`] follows the whole
/// tree).
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
        .current_dir(sartor_tests::workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let normal = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|dependency| dependency["kind"].is_null())
                .map(|dependency| dependency["name"].as_str().unwrap().to_string())
                .collect();
            (package["name"].as_str().unwrap().to_string(), normal)
        })
        .collect()
}

/// Every package in `name`'s normal dependency tree, third-party crates
/// included, as `cargo tree -e normal` resolves it for this machine.
fn reachable(name: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args([
            "tree", "-e", "normal", "--prefix", "none", "--format", "{p}", "--locked", "-p",
        ])
        .arg(name)
        .current_dir(sartor_tests::workspace_root())
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree -p {name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|package| *package != name)
        .map(str::to_string)
        .collect()
}

/// The sartor crates each product crate may depend on: location <- api <-
/// engine <- state <- webhook, controller <- offline <- playground <- sartor
/// (the binary).
const ALLOWED: [(&str, &[&str]); 11] = [
    ("sartor-location", &[]),
    ("sartor-api", &["sartor-location"]),
    ("sartor-engine", &["sartor-api", "sartor-location"]),
    ("sartor-state", &["sartor-api", "sartor-engine"]),
    (
        "sartor-webhook",
        &[
            "sartor-api",
            "sartor-engine",
            "sartor-location",
            "sartor-state",
        ],
    ),
    ("sartor-audit", &["sartor-api", "sartor-engine"]),
    (
        "sartor-controller",
        &[
            "sartor-api",
            "sartor-audit",
            "sartor-engine",
            "sartor-export",
            "sartor-state",
        ],
    ),
    (
        "sartor-export",
        &["sartor-api", "sartor-engine", "sartor-location"],
    ),
    (
        "sartor-offline",
        &[
            "sartor-api",
            "sartor-audit",
            "sartor-engine",
            "sartor-export",
            "sartor-webhook",
        ],
    ),
    ("sartor-playground", &["sartor-offline"]),
    (
        "sartor",
        &[
            "sartor-api",
            "sartor-audit",
            "sartor-controller",
            "sartor-engine",
            "sartor-export",
            "sartor-offline",
            "sartor-playground",
            "sartor-state",
            "sartor-webhook",
        ],
    ),
];

#[test]
fn dependencies_point_one_way() {
    let graph = dependencies();
    for (name, allowed) in ALLOWED {
        let sartor: BTreeSet<&str> = graph[name]
            .iter()
            .map(String::as_str)
            .filter(|d| d.starts_with("sartor"))
            .collect();
        let allowed: BTreeSet<&str> = allowed.iter().copied().collect();
        assert!(
            sartor.is_subset(&allowed),
            "{name} depends on {:?}, outside what docs/architecture.md allows ({allowed:?})",
            sartor.difference(&allowed).collect::<Vec<_>>()
        );
    }
}

#[test]
fn the_controller_and_the_webhook_do_not_know_each_other() {
    assert!(!reachable("sartor-controller").contains("sartor-webhook"));
    assert!(!reachable("sartor-webhook").contains("sartor-controller"));
}

#[test]
fn only_the_controller_and_the_binary_link_the_cluster_client() {
    let graph = dependencies();
    let clients = ["kube", "kube-client", "kube-runtime"];
    for name in [
        "sartor-location",
        "sartor-api",
        "sartor-engine",
        "sartor-audit",
        "sartor-state",
        "sartor-webhook",
        "sartor-export",
        "sartor-offline",
    ] {
        let reached = reachable(name);
        for client in clients {
            assert!(!reached.contains(client), "{name} reaches {client}");
        }
    }
    assert!(graph["sartor-controller"].contains("kube"));
    // The walk sees through third-party crates: kube-runtime only comes
    // through kube.
    assert!(reachable("sartor-controller").contains("kube-runtime"));
}

#[test]
fn the_engine_does_no_io_and_no_async() {
    let reached = reachable("sartor-engine");
    for io in ["tokio", "hyper", "futures", "kube", "tracing"] {
        assert!(!reached.contains(io), "sartor-engine reaches {io}");
    }
}

#[test]
fn the_audit_core_decides_without_the_cluster() {
    let reached = reachable("sartor-audit");
    for io in [
        "tokio",
        "hyper",
        "futures",
        "kube",
        "kube-client",
        "tracing",
    ] {
        assert!(!reached.contains(io), "sartor-audit reaches {io}");
    }
}
