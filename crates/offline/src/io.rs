//! What a command reads besides files and where it writes: the one shape
//! every `run` takes, so that the binary passes its standard streams and a
//! test passes bytes.

use std::io::{Read, Write};

use anyhow::Context as _;

/// A command's standard streams: `-` among its inputs is read from
/// `stdin`; its results (objects, diffs, reports) go to `out` and its
/// problems (errors, warnings, `sartor lint`'s text report) to `err`.
///
/// The binary passes its locked stdin, stdout and stderr; a test or a
/// tool calling the library passes `&[]` and two `Vec<u8>`s:
///
/// ```
/// let (mut out, mut err) = (Vec::new(), Vec::new());
/// let io = sartor_offline::Io {
///     stdin: &mut &[][..],
///     out: &mut out,
///     err: &mut err,
///     colour: false,
/// };
/// # let _ = io;
/// ```
///
/// A write that fails (the reader of a pipe has gone: `sartor mutate |
/// head`) ends the command with an error, `writing to stdout: Broken pipe
/// ...`, never a panic.
pub struct Io<'a> {
    /// Read, whole, when an input is `-`.
    pub stdin: &'a mut dyn Read,
    /// The results (stdout for the binary).
    pub out: &'a mut dyn Write,
    /// Errors and warnings, one line each (stderr for the binary).
    pub err: &'a mut dyn Write,
    /// Whether diffs are coloured for a terminal (the binary: whether
    /// stdout is one).
    pub colour: bool,
}

impl std::fmt::Debug for Io<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("colour", &self.colour)
            .finish_non_exhaustive()
    }
}

/// `eprintln!` onto an [`Io`]'s `err`: `say!(io, "warning: {note}")?`.
macro_rules! say {
    ($io:expr, $($arg:tt)*) => {
        $io.say(format_args!($($arg)*))
    };
}
pub(crate) use say;

// === impl Io ===

impl Io<'_> {
    /// Writes `text` to `out`, flushed.
    ///
    /// # Errors
    /// `out` is closed (the pipe's reader exited) or cannot be written.
    pub fn print(&mut self, text: &str) -> anyhow::Result<()> {
        write_flushed(self.out, text)
    }

    /// [`Io::print`] of `text` and a newline.
    ///
    /// # Errors
    /// As [`Io::print`].
    pub fn print_line(&mut self, text: &str) -> anyhow::Result<()> {
        self.print(&format!("{text}\n"))
    }

    /// Writes one line to `err`, as `eprintln!` would, without its panic
    /// ([`say!`]).
    ///
    /// # Errors
    /// `err` cannot be written.
    pub(crate) fn say(&mut self, line: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
        say_to(self.err, line)
    }
}

/// Writes `line` and a newline to `err`.
///
/// # Errors
/// `err` cannot be written: `writing to stderr: ...`.
pub(crate) fn say_to(err: &mut dyn Write, line: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    writeln!(err, "{line}").context("writing to stderr")
}

/// Writes `text` to `out` and flushes it: what every result written goes
/// through.
///
/// # Errors
/// `out` is closed or cannot be written: `writing to stdout: ...`, the
/// message users see.
pub(crate) fn write_flushed(out: &mut dyn Write, text: &str) -> anyhow::Result<()> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}
