//! Shared helpers for sartor's end-to-end tests, which live in `tests/tests/`.
//!
//! This crate exists because a virtual workspace cannot own a top-level
//! `tests/` directory; it is never published.

use std::path::{Path, PathBuf};

/// The workspace root: the directory holding the top-level `Cargo.toml`.
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
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
