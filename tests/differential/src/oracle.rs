//! Gatekeeper's side: the oracle (`tests/gatekeeper/`, Go, Gatekeeper
//! v3.23.1's own mutation library) run as a child process, one JSON line per
//! case each way.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde::Deserialize;

use crate::case::{Answer, Case};

/// Why the oracle could not answer.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// `tests/gatekeeper/build` failed or Go is missing.
    #[error("building the Gatekeeper oracle (tests/gatekeeper/build): {0}")]
    Build(String),
    /// The process could not be started or talked to.
    #[error("the Gatekeeper oracle {path}: {source}")]
    Io {
        /// The binary.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// It answered something that is not an answer.
    #[error("the Gatekeeper oracle answered case {id} with {line:?}: {reason}")]
    Answer {
        /// The case.
        id: String,
        /// The line it wrote (cut to 500 bytes).
        line: String,
        /// Why it is not an answer.
        reason: String,
    },
}

/// A running oracle.
pub struct Oracle {
    path: PathBuf,
    child: Child,
    input: BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
}

/// An answer line: an answer, or the oracle's `fatal` for a case it could
/// not read.
#[derive(Deserialize)]
struct Line {
    id: String,
    #[serde(default)]
    fatal: Option<String>,
    #[serde(flatten)]
    answer: serde_json::Value,
}

impl Oracle {
    /// The oracle binary: `$SARTOR_GATEKEEPER_ORACLE`, else built (or found
    /// already built) by `tests/gatekeeper/build`.
    ///
    /// # Errors
    /// When the build fails.
    pub fn locate(repository: &Path) -> Result<PathBuf, OracleError> {
        if let Some(path) = std::env::var_os("SARTOR_GATEKEEPER_ORACLE") {
            return Ok(PathBuf::from(path));
        }
        let script = repository.join("tests/gatekeeper/build");
        let output = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| OracleError::Build(format!("{}: {e}", script.display())))?;
        if !output.status.success() {
            return Err(OracleError::Build(format!(
                "{} exited with {}",
                script.display(),
                output.status
            )));
        }
        let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if path.is_empty() {
            return Err(OracleError::Build("it printed no path".into()));
        }
        Ok(PathBuf::from(path))
    }

    /// Starts the oracle at `path`.
    ///
    /// # Errors
    /// When it cannot be started.
    pub fn start(path: &Path) -> Result<Oracle, OracleError> {
        let io = |source| OracleError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut child = Command::new(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(io)?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io(std::io::Error::other("no pipes to the child")));
        };
        Ok(Oracle {
            path: path.to_path_buf(),
            child,
            input: BufWriter::new(input),
            output: BufReader::new(output),
        })
    }

    /// Gatekeeper's answers to `cases`, in order. A thread writes the cases
    /// while this one reads the answers, so neither pipe fills up.
    ///
    /// # Errors
    /// When the oracle fails or answers out of order.
    pub fn answer_all(&mut self, cases: &[Case]) -> Result<Vec<Answer>, OracleError> {
        let Oracle {
            path,
            input,
            output,
            ..
        } = self;
        std::thread::scope(|scope| {
            let writer = scope.spawn(move || -> std::io::Result<()> {
                for case in cases {
                    serde_json::to_writer(&mut *input, case).map_err(std::io::Error::other)?;
                    input.write_all(b"\n")?;
                }
                input.flush()
            });
            let answers = cases
                .iter()
                .map(|case| receive(path, output, case))
                .collect::<Result<Vec<Answer>, OracleError>>();
            let written = writer
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the writer thread panicked")));
            // A read error is the more telling one when both fail.
            let answers = answers?;
            written.map_err(|source| OracleError::Io {
                path: path.clone(),
                source,
            })?;
            Ok(answers)
        })
    }

    /// Gatekeeper's answer to one case.
    ///
    /// # Errors
    /// As [`Oracle::answer_all`].
    pub fn answer(&mut self, case: &Case) -> Result<Answer, OracleError> {
        self.send(case)?;
        self.input.flush().map_err(|e| self.io(e))?;
        receive(&self.path, &mut self.output, case)
    }

    fn send(&mut self, case: &Case) -> Result<(), OracleError> {
        serde_json::to_writer(&mut self.input, case)
            .map_err(|e| self.io(std::io::Error::other(e)))?;
        self.input.write_all(b"\n").map_err(|e| self.io(e))
    }

    fn io(&self, source: std::io::Error) -> OracleError {
        OracleError::Io {
            path: self.path.clone(),
            source,
        }
    }
}

fn receive(
    path: &Path,
    output: &mut BufReader<ChildStdout>,
    case: &Case,
) -> Result<Answer, OracleError> {
    let mut line = String::new();
    let read = output
        .read_line(&mut line)
        .map_err(|source| OracleError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    let bad = |reason: String| OracleError::Answer {
        id: case.id.clone(),
        line: line.chars().take(500).collect(),
        reason,
    };
    if read == 0 {
        return Err(bad("it exited".into()));
    }
    let parsed: Line = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
    if parsed.id != case.id {
        return Err(bad(format!("the answer is to case {}", parsed.id)));
    }
    if let Some(fatal) = parsed.fatal {
        return Err(bad(fatal));
    }
    serde_json::from_value(parsed.answer).map_err(|e| bad(e.to_string()))
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
