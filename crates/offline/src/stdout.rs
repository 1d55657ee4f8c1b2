//! What the commands print as their result, on stdout: `print!` panics
//! when the reader has gone (`sartor audit | head`); this is an error
//! instead, said like any other (`error: writing to stdout: Broken pipe`).

use std::io::Write as _;

use anyhow::Context as _;

/// Writes `text` to stdout, flushed.
///
/// # Errors
/// stdout is closed (the pipe's reader exited) or cannot be written.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

/// [`print`] of `text` and a newline.
///
/// # Errors
/// As [`print`].
pub fn print_line(text: &str) -> anyhow::Result<()> {
    print(&format!("{text}\n"))
}
