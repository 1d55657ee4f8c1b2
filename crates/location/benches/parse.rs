//! Parsing speed of typical locations. Run: `cargo bench -p sartor-location`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use sartor_location::Path;

/// Five fields and a keyed list: the shape of most real mutator locations.
const TYPICAL: &str = r#"spec.template.spec.containers[name: "sidecar"].imagePullPolicy"#;

fn parse(c: &mut Criterion) {
    c.bench_function("parse 5 fields + keyed list", |b| {
        b.iter(|| Path::parse(black_box(TYPICAL)))
    });
    c.bench_function("parse 5 fields + keyed list + notin set", |b| {
        b.iter(|| {
            Path::parse(black_box(
                "spec.template.spec.containers[name notin (istio-proxy, linkerd-proxy)].ports[containerPort notin (80, 443)].protocol",
            ))
        })
    });
    c.bench_function("parse 2 fields", |b| {
        b.iter(|| Path::parse(black_box("spec.priority")))
    });
    c.bench_function("parse quoted + escaped", |b| {
        b.iter(|| {
            Path::parse(black_box(
                r#"metadata.annotations."example.com/owner\"s \\ name""#,
            ))
        })
    });
    let parsed = Path::parse(TYPICAL);
    c.bench_function("display 5 fields + keyed list", |b| {
        b.iter(|| black_box(&parsed).as_ref().map(ToString::to_string))
    });
    c.bench_function("parse error with caret", |b| {
        b.iter(|| {
            Path::parse(black_box("spec.containers[name: foo.image")).map_err(|e| e.to_string())
        })
    });
}

criterion_group!(benches, parse);
criterion_main!(benches);
