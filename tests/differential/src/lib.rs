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

/// The repository this crate is in.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
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
