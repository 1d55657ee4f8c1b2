//! Shared helpers for sartor's end-to-end tests, which live in `tests/tests/`.
//!
//! This crate exists because a virtual workspace cannot own a top-level
//! `tests/` directory; it is never published.

pub mod apiserver;
pub mod binary;
pub mod cluster;
pub mod https;
pub mod node;
pub mod provider;
pub mod samples;
pub mod scratch;
pub mod suite;

use std::path::{Path, PathBuf};

/// The mutators under examples/mutators, as the plural resource of each kind
/// and the names of its objects there.
pub const EXAMPLE_MUTATORS: &[(&str, &[&str])] = &[
    (
        "assign.mutations.sartor.dev",
        &[
            "always-pull-pods",
            "always-pull-deployments",
            "log-sidecar",
            "no-host-ports",
            "read-only-root",
            "seccomp-runtime-default",
        ],
    ),
    ("assignimage.mutations.sartor.dev", &["pin-registry"]),
    (
        "assignmetadata.mutations.sartor.dev",
        &["owner-from-namespace", "team-from-namespace"],
    ),
    ("modifyset.mutations.sartor.dev", &["no-debug-flag"]),
];

/// The workspace root: the directory holding the top-level `Cargo.toml`.
///
/// Read from cargo's run-time `CARGO_MANIFEST_DIR` first: a build reused from
/// a shared target directory keeps the compile-time path of whichever
/// checkout built it, which may no longer exist.
/// Works from any member's tests: walks up from the running test's package
/// to the directory whose `Cargo.toml` declares `[workspace]`.
pub fn workspace_root() -> PathBuf {
    let here = manifest_dir(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.lines().any(|l| l.trim() == "[workspace]"))
        })
        .map_or_else(|| here.clone(), Path::to_path_buf)
}

/// The package directory cargo runs a test in, else `compiled` (the
/// compile-time `env!("CARGO_MANIFEST_DIR")` of the caller).
pub fn manifest_dir(compiled: &str) -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(compiled))
}

/// Reads a file relative to the workspace root.
///
/// # Errors
/// The I/O error, with the path in its message.
pub fn read_repo_file(relative: &str) -> std::io::Result<String> {
    let path = workspace_root().join(relative);
    std::fs::read_to_string(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// The YAML documents of `path` (a file, or a directory's files in name
/// order), empty ones left out.
///
/// # Errors
/// A file that cannot be read or a document that is not YAML, with its path.
pub fn documents(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    use serde::Deserialize as _;
    let mut files = vec![path.to_path_buf()];
    if path.is_dir() {
        files = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .collect();
        files.sort();
    }
    let mut documents = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_json::Value::deserialize(document)
                .map_err(|e| format!("{}: {e}", file.display()))?;
            if !value.is_null() {
                documents.push(value);
            }
        }
    }
    Ok(documents)
}
