//! What the commands print as their result, on stdout: `print!` panics
//! when the reader has gone (`sartor audit | head`); this is an error
//! instead, said like any other (`error: writing to stdout: Broken pipe`).
//! `lint`, `mutate` and `test` write through the [`crate::Io`] they are
//! given, in the same way.

/// Writes `text` to stdout, flushed.
///
/// # Errors
/// stdout is closed (the pipe's reader exited) or cannot be written.
pub fn print(text: &str) -> anyhow::Result<()> {
    crate::io::write_flushed(&mut std::io::stdout().lock(), text)
}

/// [`print`] of `text` and a newline.
///
/// # Errors
/// As [`print`].
pub fn print_line(text: &str) -> anyhow::Result<()> {
    print(&format!("{text}\n"))
}
