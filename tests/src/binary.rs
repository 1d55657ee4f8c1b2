//! The `sartor` binary under test, for the suites of this crate.
//!
//! cargo hands a package's own integration tests its binaries
//! (`CARGO_BIN_EXE_sartor`), but this crate is not the `sartor` package, so
//! [`sartor`] asks cargo for the binary instead: `SARTOR_BIN` when it is set
//! (a binary built elsewhere, say with `--release`), else the one
//! `cargo build` leaves in the target directory (`CARGO_TARGET_DIR` and
//! cargo's configuration, as for the test itself) and the profile the
//! running test was built in, built first when it is missing or stale.
//!
//! Nothing is built twice. The build selects the whole workspace, its bins
//! and examples, rather than `-p sartor`: cargo unifies the features of shared
//! dependencies over the packages it selects, dev-dependencies included when
//! examples are built, so `-p sartor` would build the binary and most of its
//! dependencies a second time, with other features, after
//! `cargo test --workspace` had just built them; with the same selection the
//! build finds everything fresh there. And the nested cargo does not see the
//! variables cargo sets for the test, which it would take for a change.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The path of the `sartor` binary, found or built once per process.
///
/// # Errors
/// Why `cargo build` failed or named no `sartor` executable; every call
/// in the process returns the same error.
pub fn sartor() -> Result<&'static Path, String> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY
        .get_or_init(|| match std::env::var_os("SARTOR_BIN") {
            Some(path) => Ok(PathBuf::from(path)),
            None => build(),
        })
        .as_deref()
        .map_err(Clone::clone)
}

/// What cargo sets for the test it runs and would read back, in a nested
/// cargo, as a change: build scripts that watch them (ring's watches
/// `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME`) would run again and rebuild
/// what depends on them, here and again in the next plain `cargo test`.
fn set_for_the_test(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_MANIFEST_LINKS",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "OUT_DIR",
        ]
        .contains(&name)
}

/// Runs `cargo build` for the workspace's bins in the profile of the running
/// test and returns where cargo says it put `sartor`.
fn build() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let profile = profile()?;
    let mut command = Command::new(&cargo);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_the_test) {
            command.env_remove(name);
        }
    }
    command
        .current_dir(crate::workspace_root())
        .args(["build", "--locked", "--workspace", "--bins", "--examples"])
        .args(["--profile", &profile])
        .args(["--message-format=json-render-diagnostics", "--quiet"])
        .stdout(Stdio::piped())
        // Compiler errors, if any, go where the test's own output goes.
        .stderr(Stdio::inherit());
    let shown = format!(
        "cargo build --locked --workspace --bins --examples --profile {profile} (for the sartor binary)"
    );
    let output = command
        .output()
        .map_err(|e| format!("{shown}: cannot run {}: {e}", cargo.to_string_lossy()))?;
    if !output.status.success() {
        return Err(format!("{shown}: {}", output.status));
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(sartor_executable)
        .ok_or_else(|| format!("{shown}: cargo named no executable of the sartor package"))
}

/// The executable of a `compiler-artifact` message about the `sartor` bin.
fn sartor_executable(message: &str) -> Option<PathBuf> {
    let message: serde_json::Value = serde_json::from_str(message).ok()?;
    let field = |pointer: &str| message.pointer(pointer);
    let sartor_bin = field("/reason")? == "compiler-artifact"
        && field("/target/name")? == "sartor"
        && field("/target/kind")?
            .as_array()?
            .iter()
            .any(|kind| kind == "bin");
    if !sartor_bin {
        return None;
    }
    field("/executable")?.as_str().map(PathBuf::from)
}

/// The cargo profile the running test was built in, read from where cargo
/// put it (`<target>/<profile dir>/deps/<test>`): `debug` is `dev`, any other
/// directory is named after its profile.
fn profile() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("the test's own path: {e}"))?;
    let dir = exe
        .parent()
        .filter(|deps| deps.file_name().is_some_and(|name| name == "deps"))
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .ok_or_else(|| format!("{} is not in a cargo deps directory", exe.display()))?;
    Ok(match dir.to_string_lossy().as_ref() {
        "debug" => "dev".to_string(),
        other => other.to_string(),
    })
}
