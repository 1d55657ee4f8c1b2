//! `sartor audit` at scale, against the test control plane: PODS Pods and
//! DEPLOYMENTS Deployments (three containers each) in one namespace, the
//! example mutators from files, and what the scan costs: wall time,
//! sartor's CPU time and peak RSS (GNU time), and the API requests it made
//! (kube-apiserver's `apiserver_request_total`, before and after).
//!
//! ```text
//! cargo build --release -p sartor
//! SARTOR_BIN=target/release/sartor cargo run --release -p sartor-tests --example audit_scale -- 10000 1000
//! ```
//!
//! Each round scans with the examples, then with
//! `tests/fixtures/audit-floor` (the same kinds listed, nothing matched):
//! the floor, what listing and reading the objects cost with no mutation.
//! `AUDIT_SCALE_ROUNDS=N` scans N times over the same objects;
//! `AUDIT_SCALE_VS=path/to/another/sartor` scans with that binary after
//! each round's scan and prints the ratio of their CPU times (median and
//! range over the rounds): two builds compared in one run.
//!
//! A benchmark, not a test: it prints what it measured and exits 0 when the
//! scan ran. Needs the control plane (`tests/k8s/provision`) and
//! `/usr/bin/time` (Debian: the `time` package).

use std::fmt::Write as _;
use std::process::{Command, ExitCode};
use std::time::Instant;

use sartor_tests::cluster::{ControlPlane, Tools};

fn main() -> ExitCode {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let (pods, deployments) = match args.as_slice() {
        [] => (10_000, 1_000),
        [pods, deployments] => (*pods, *deployments),
        _ => {
            eprintln!("usage: audit_scale [PODS DEPLOYMENTS]");
            return ExitCode::from(2);
        }
    };
    match run(pods, deployments) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("audit_scale: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A three-container workload's containers, as YAML at `indent`.
fn containers(indent: &str) -> String {
    ["app", "sidecar", "proxy"]
        .iter()
        .map(|name| format!("{indent}- name: {name}\n{indent}  image: shop/{name}:1.0\n"))
        .collect()
}

/// `count` objects made by `one`, in files of 1,000 under the plane's directory.
fn write_objects(
    plane: &ControlPlane,
    what: &str,
    count: usize,
    one: impl Fn(usize) -> String,
) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    for (chunk, start) in (0..count).step_by(1000).enumerate() {
        let mut text = String::new();
        for i in start..count.min(start + 1000) {
            text.push_str("---\n");
            text.push_str(&one(i));
        }
        let path = plane.dir().join(format!("{what}-{chunk}.yaml"));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        files.push(path.display().to_string());
    }
    Ok(files)
}

/// The sum of kube-apiserver's `apiserver_request_total` counters.
fn requests(plane: &ControlPlane) -> Result<f64, String> {
    let metrics = plane.kubectl(&["get", "--raw", "/metrics"])?;
    Ok(metrics
        .lines()
        .filter(|line| line.starts_with("apiserver_request_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// One GNU time field (`Maximum resident set size (kbytes): 52100`).
fn time_field<'a>(stderr: &'a str, name: &str) -> Option<&'a str> {
    stderr
        .lines()
        .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(": "))
}

fn run(pods: usize, deployments: usize) -> Result<String, String> {
    let tools = Tools::provision().map_err(|e| format!("{e:?}"))?;
    let plane = ControlPlane::start(&tools)?;
    plane.kubectl_with_input(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bench\n"),
    )?;
    let started = Instant::now();
    let mut files = write_objects(&plane, "pods", pods, |i| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-{i}\n  namespace: bench\n  labels: {{app: shop}}\nspec:\n  containers:\n{}",
            containers("  ")
        )
    })?;
    files.extend(write_objects(&plane, "deployments", deployments, |i| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: deploy-{i}\n  namespace: bench\nspec:\n  selector:\n    matchLabels: {{app: shop-{i}}}\n  template:\n    metadata:\n      labels: {{app: shop-{i}}}\n    spec:\n      containers:\n{}",
            containers("      ")
        )
    })?);
    for file in &files {
        plane.kubectl(&["create", "-f", file, "-o", "name"])?;
    }
    let created = started.elapsed();

    let mut report = String::new();
    let _ = writeln!(
        report,
        "{pods} Pods and {deployments} Deployments created in {:.1} s",
        created.as_secs_f64()
    );
    let sartor = sartor_tests::binary::sartor()?;
    let versus = std::env::var_os("AUDIT_SCALE_VS").map(std::path::PathBuf::from);
    let rounds: usize = std::env::var("AUDIT_SCALE_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(1);
    let mut ratios = Vec::new();
    let examples = sartor_tests::workspace_root().join("examples/mutators");
    let floor = sartor_tests::workspace_root().join("tests/fixtures/audit-floor");
    let mut floors = Vec::new();
    for round in 1..=rounds {
        let scan = scan_once(&plane, sartor, &examples)?;
        let _ = writeln!(report, "round {round}: {}", scan.line);
        let nothing = scan_once(&plane, sartor, &floor)?;
        let _ = writeln!(report, "round {round}, floor: {}", nothing.line);
        floors.push(nothing.cpu / nothing.wall.max(f64::EPSILON));
        if let Some(versus) = &versus {
            let other = scan_once(&plane, versus, &examples)?;
            let _ = writeln!(report, "round {round}, AUDIT_SCALE_VS: {}", other.line);
            ratios.push(other.cpu / scan.cpu.max(f64::EPSILON));
        }
    }
    floors.sort_by(f64::total_cmp);
    let _ = writeln!(
        report,
        "floor: a scan that lists and reads the same objects and changes none takes sartor CPU \
         for {:.0}% of its wall time (median of {} rounds, {:.0}-{:.0}%)",
        100.0 * floors.get(floors.len() / 2).copied().unwrap_or(0.0),
        floors.len(),
        100.0 * floors.first().copied().unwrap_or(0.0),
        100.0 * floors.last().copied().unwrap_or(0.0),
    );
    if !ratios.is_empty() {
        ratios.sort_by(f64::total_cmp);
        let median = ratios.get(ratios.len() / 2).copied().unwrap_or(0.0);
        let _ = writeln!(
            report,
            "CPU, AUDIT_SCALE_VS / SARTOR_BIN: median {median:.2}x of {} rounds ({:.2}-{:.2})",
            ratios.len(),
            ratios.first().copied().unwrap_or(0.0),
            ratios.last().copied().unwrap_or(0.0),
        );
    }
    Ok(report)
}

/// One scan's figures.
struct Scan {
    /// sartor's CPU time (user and system), in seconds.
    cpu: f64,
    /// Its wall time, in seconds.
    wall: f64,
    /// What was scanned and what it cost, as the report says it.
    line: String,
}

/// One `sartor audit -o json` of the `mutators` with the binary `sartor`,
/// timed.
fn scan_once(
    plane: &ControlPlane,
    sartor: &std::path::Path,
    mutators: &std::path::Path,
) -> Result<Scan, String> {
    let before = requests(plane)?;
    let started = Instant::now();
    let output = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(sartor)
        .args(["audit", "--mutators"])
        .arg(mutators)
        .args(["-o", "json"])
        .env("KUBECONFIG", &plane.kubeconfig)
        .output()
        .map_err(|e| format!("/usr/bin/time: {e}"))?;
    let wall = started.elapsed();
    // The /metrics read itself is one more request.
    let made = requests(plane)? - before - 1.0;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("sartor audit: {}\n{stderr}", output.status));
    }
    let audit: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("audit's JSON: {e}"))?;
    let seconds = |name: &str| -> f64 {
        time_field(&stderr, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let cpu = seconds("User time (seconds)") + seconds("System time (seconds)");
    let rss = time_field(&stderr, "Maximum resident set size (kbytes)").unwrap_or("?");
    let count = |field: &str| -> usize {
        audit
            .get(field)
            .and_then(serde_json::Value::as_array)
            .map_or(0, Vec::len)
    };
    let kinds = audit
        .get("kinds")
        .and_then(serde_json::Value::as_object)
        .map_or(0, serde_json::Map::len);
    let scanned = audit
        .get("scanned")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    let line = format!(
        "{scanned} objects of {kinds} kinds scanned, {} would change, {} cannot be mutated; \
         wall {:.2} s, sartor CPU {cpu:.2} s ({:.0}% of wall), peak RSS {rss} KB, {made} API requests",
        count("changes"),
        count("errors"),
        wall.as_secs_f64(),
        100.0 * cpu / wall.as_secs_f64().max(f64::EPSILON),
    );
    Ok(Scan {
        cpu,
        wall: wall.as_secs_f64(),
        line,
    })
}
