//! The log output: text for a terminal, JSON for a cluster's log pipeline.

use std::io::IsTerminal as _;

use super::args::LogFormat;

/// Logs to standard error, at the level `RUST_LOG` says (`info` without it).
pub(super) fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}
