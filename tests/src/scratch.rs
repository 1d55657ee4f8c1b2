//! Scratch directories holding a test's files, removed when the test ends.

use std::ops::Deref;
use std::path::Path;

/// A test's scratch directory, removed when it is dropped (they used to
/// pile up in the temporary directory, one set per run).
pub struct Scratch(tempfile::TempDir);

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// A scratch directory named after `test`, holding `files` (a path in it,
/// its text), their directories created.
///
/// # Panics
/// The directory or a file cannot be written: the test cannot run.
#[allow(
    clippy::unwrap_used,
    reason = "test support: no scratch directory means no test"
)]
pub fn scratch(test: &str, files: &[(&str, &str)]) -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix(&format!("sartor-{test}-"))
        .tempdir()
        .unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    Scratch(dir)
}
