//! One `/v1/mutate` body through `Webhook::mutate` (no network): the load
//! test's realistic Pod and each set of 100 mutators, against none.
//!
//! Inputs come from `load/make-load.py`, written to a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use sartor_api::{Input, load_mutators};
use sartor_engine::{Mutator, System};
use sartor_state::{Snapshot, Unlabelled};
use sartor_webhook::{Deadline, Metrics, Providers, Settings, Webhook};

fn webhook(mutators: &Path) -> Webhook {
    let loaded = load_mutators(&[Input::from_arg(&mutators.to_string_lossy())]);
    assert!(loaded.errors.is_empty());
    let mut system = System::new();
    for mutator in &loaded.mutators {
        system.upsert(Mutator::compile(&mutator.object).unwrap());
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
    webhook
}

/// A fresh deadline as the install's mutating webhook gives one (1 s).
fn deadline() -> Deadline {
    Deadline::new(Instant::now(), Duration::from_secs(1))
}

fn admission(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("sartor-admission-bench-{}", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("load/make-load.py");
    let status = Command::new("python3")
        .arg(script)
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success());
    let body = std::fs::read(dir.join("review.json")).unwrap();
    let mut group = c.benchmark_group("webhook_mutate");
    for set in ["empty", "typical", "heavy"] {
        let webhook = webhook(&dir.join(set));
        // Unlabelled never waits: the future is ready when first polled.
        let mutate = || futures::executor::block_on(webhook.mutate(&body, &deadline()));
        assert_eq!(mutate().status, 200);
        group.bench_function(set, |b| b.iter(mutate));
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, admission);
criterion_main!(benches);
