//! Runs one `/v1/mutate` body through `Webhook::mutate` many times, for a
//! profiler: instructions per request are (cost of N+1 calls - cost of 1
//! call) / N, read off two runs.
//!
//! ```text
//! python3 crates/webhook/load/make-load.py /tmp/load
//! cargo build --release -p sartor-webhook --example profile_mutate
//! valgrind --tool=callgrind target/release/examples/profile_mutate /tmp/load typical 201
//! ```
//!
//! Arguments: the directory make-load.py wrote, the set (`empty`, `typical`,
//! `heavy`) and how many calls (default 1,000).
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sartor_api::{Input, load_mutators};
use sartor_engine::{Mutator, System};
use sartor_state::{Snapshot, Unlabelled};
use sartor_webhook::{Deadline, Metrics, Providers, Settings, Webhook};

/// The allocator `sartor serve` uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(set)) = (args.next(), args.next()) else {
        bail!("usage: profile_mutate LOAD_DIR SET [CALLS]");
    };
    let calls: usize = match args.next() {
        Some(calls) => calls.parse().context("CALLS")?,
        None => 1000,
    };
    let dir = Path::new(&dir);
    let loaded = load_mutators(&[Input::from_arg(&dir.join(&set).to_string_lossy())]);
    if let Some(error) = loaded.errors.first() {
        bail!("{error}");
    }
    let mut system = System::new();
    for mutator in &loaded.mutators {
        system.upsert(Mutator::compile(&mutator.object)?);
    }
    let metrics = Arc::new(Metrics::new());
    let providers = Arc::new(Providers::new(Duration::ZERO, metrics.clone()));
    let (publisher, state) = sartor_state::channel(providers.clone());
    let webhook = Webhook::new(
        Settings::new("sartor-system", "sartor"),
        state,
        Box::new(Unlabelled::default()),
        providers,
        metrics,
    );
    publisher.publish(Snapshot {
        system,
        errors: Vec::new(),
    });
    let body = std::fs::read(dir.join("review.json")).context("review.json")?;
    let mut bytes = 0;
    for _ in 0..calls {
        let deadline = Deadline::new(Instant::now(), Duration::from_secs(1));
        // Unlabelled never waits: the future is ready when first polled.
        let reply = futures::executor::block_on(webhook.mutate(&body, &deadline));
        bytes += reply.body.len();
    }
    println!("{calls} calls, {bytes} bytes answered");
    Ok(())
}
