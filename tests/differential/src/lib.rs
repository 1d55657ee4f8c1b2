//! sartor against Gatekeeper v3.23.1's own mutation code.
//!
//! Random cases ([`generate`]) go to both sides: sartor's engine in process
//! ([`sartor`]) and Gatekeeper's library through the oracle
//! ([`oracle`], `tests/gatekeeper/`). The answers are compared
//! ([`compare`]), every difference is put in a known class ([`classes`]) or
//! reported as undocumented, and undocumented ones are minimized to a
//! reproducer ([`run`]). `docs/gatekeeper-differences.md` documents each
//! class; README.md says how to run it for hours.

pub mod case;
pub mod classes;
pub mod compare;
pub mod expansion;
pub mod generate;
pub mod oracle;
pub mod run;
pub mod sartor;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository this crate is in: the directory above the package whose
/// `Cargo.toml` declares `[workspace]`. The package is cargo's run-time
/// `CARGO_MANIFEST_DIR` when set (`cargo test`, `cargo run`): a build reused
/// from a shared target directory keeps the compile-time path of whichever
/// checkout built it, which may be another one, or gone.
pub fn repository() -> PathBuf {
    let here = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    here.ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.lines().any(|l| l.trim() == "[workspace]"))
        })
        .map_or_else(|| here.join("../.."), Path::to_path_buf)
}

/// The differences document, relative to the repository.
pub const DIFFERENCES: &str = "docs/gatekeeper-differences.md";

/// The classes the differences document has a section for.
///
/// # Errors
/// When the document cannot be read.
pub fn documented(repository: &Path) -> std::io::Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(repository.join(DIFFERENCES))?;
    Ok(classes::documented(&text))
}
