//! The differential suite: sartor against Gatekeeper v3.23.1's own mutation
//! library (the oracle, `tests/gatekeeper/`, built with Go on first use).
//!
//! - every reproducer in `tests/differential/reproducers/` pins both sides
//!   (the oracle's answer and sartor's, exactly) and its class;
//! - a bounded differential pass (a fixed seed, plus one it prints) fails on
//!   any difference no documented class explains;
//! - the pass flags a known divergent case once its class is left out of the
//!   documented list;
//! - the oracle's CRD step (pruning, defaulting, validation) agrees with the
//!   real kube-apiserver on a sample of generated mutators.
//!
//! Without Go the trials that need the oracle are reported as ignored; with
//! `SARTOR_REQUIRE_CLUSTER` set (CI) that is a failure. `.ci/run` sets
//! `SARTOR_SKIP_DIFFERENTIAL` (the reason) when a cold oracle build does not
//! fit its time budget: then only the trials without the oracle run.
//! `DIFFERENTIAL_CASES` sets the cases per seed and mode (default 5,000).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;

use sartor_differential::case::Case;
use sartor_differential::classes::CLASSES;
use sartor_differential::generate::{self, Mode};
use sartor_differential::oracle::Oracle;
use sartor_differential::run::{self, Report, Reproducer, minimize, pass};
use sartor_differential::{DIFFERENCES, documented, repository, sartor};
use sartor_tests::cluster::{ControlPlane, Tools};
use sartor_tests::suite::{Check, Needs};
use serde_json::Value;

const TRIALS: &[Check<ControlPlane>] = &[
    (
        "the_differences_document_has_every_class",
        Needs::Files(document_has_every_class),
    ),
    (
        "reproducers_pin_both_sides",
        Needs::Tools(reproducers_pin_both_sides),
    ),
    (
        "an_undocumented_divergence_fails_the_pass",
        Needs::Tools(undocumented_divergence_fails),
    ),
    ("differential_pass", Needs::Tools(differential_pass)),
    (
        "the_crd_step_agrees_with_the_api_server",
        Needs::Cluster(crd_step_agrees),
    ),
];

/// The trials that need no oracle: what runs when `.ci/run` could not fit
/// the oracle's cold build in its time budget.
const WITHOUT_ORACLE: &[Check<ControlPlane>] = &[(
    "the_differences_document_has_every_class",
    Needs::Files(document_has_every_class),
)];

fn main() -> ExitCode {
    if let Some(reason) = std::env::var_os("SARTOR_SKIP_DIFFERENTIAL") {
        eprintln!(
            "differential suite: trials that need the oracle SKIPPED: {}",
            reason.to_string_lossy()
        );
        return sartor_tests::suite::main("differential", WITHOUT_ORACLE, ControlPlane::start);
    }
    sartor_tests::suite::main("differential", TRIALS, ControlPlane::start)
}

/// The oracle, built once per run.
fn oracle() -> Result<Oracle, String> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let path = PATH
        .get_or_init(|| Oracle::locate(&repository()).map_err(|e| e.to_string()))
        .clone()?;
    Oracle::start(&path).map_err(|e| e.to_string())
}

fn documented_classes() -> Result<BTreeSet<String>, String> {
    documented(&repository()).map_err(|e| format!("{DIFFERENCES}: {e}"))
}

fn reproducers() -> Result<Vec<(String, Reproducer)>, String> {
    let dir = repository().join("tests/differential/reproducers");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let reproducer =
                serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((name, reproducer))
        })
        .collect()
}

fn document_has_every_class() -> Result<(), String> {
    let documented = documented_classes()?;
    let known: BTreeSet<String> = CLASSES.iter().map(|c| c.id.to_string()).collect();
    if documented != known {
        return Err(format!(
            "{DIFFERENCES} documents {documented:?}; the runner knows {known:?}"
        ));
    }
    let pinned: BTreeSet<String> = reproducers()?
        .into_iter()
        .map(|(_, r)| r.class)
        .filter(|class| class != Reproducer::AGREED)
        .collect();
    let unpinned: Vec<&String> = known.difference(&pinned).collect();
    if !unpinned.is_empty() {
        return Err(format!("no reproducer pins the classes {unpinned:?}"));
    }
    Ok(())
}

fn reproducers_pin_both_sides(_: &Tools) -> Result<(), String> {
    let mut oracle = oracle()?;
    let mut failures = Vec::new();
    for (name, recorded) in reproducers()? {
        let gatekeeper =
            run::without_stored(oracle.answer(&recorded.case).map_err(|e| e.to_string())?);
        let sartor = sartor::answer(&recorded.case);
        if gatekeeper != recorded.gatekeeper {
            failures.push(format!(
                "{name}: Gatekeeper now answers\n{}",
                serde_yaml::to_string(&gatekeeper).unwrap_or_default()
            ));
        }
        if sartor != recorded.sartor {
            failures.push(format!(
                "{name}: sartor now answers\n{}",
                serde_yaml::to_string(&sartor).unwrap_or_default()
            ));
        }
        let found = run::check(&mut oracle, std::slice::from_ref(&recorded.case))
            .map_err(|e| e.to_string())?;
        let classes: BTreeSet<&str> = found.iter().flatten().filter_map(|f| f.class).collect();
        let agreed = recorded.class == Reproducer::AGREED;
        let unexpected = found.iter().flatten().any(|f| {
            !f.class
                .is_some_and(|class| recorded.besides.iter().any(|b| b == class))
        });
        if agreed && unexpected {
            failures.push(format!(
                "{name}: recorded as agreed, the sides now differ: {found:?}"
            ));
        } else if !agreed && !classes.contains(recorded.class.as_str()) {
            failures.push(format!(
                "{name}: recorded as {}, the runner now finds {classes:?}",
                recorded.class
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

fn undocumented_divergence_fails(_: &Tools) -> Result<(), String> {
    let mut oracle = oracle()?;
    let all = documented_classes()?;
    for (name, recorded) in reproducers()? {
        if recorded.class == Reproducer::AGREED {
            continue;
        }
        let findings = run::check(&mut oracle, std::slice::from_ref(&recorded.case))
            .map_err(|e| e.to_string())?;
        let mut with = Report::default();
        let mut without = Report::default();
        let mut missing = all.clone();
        missing.remove(&recorded.class);
        for found in &findings {
            with.add(found.clone(), &all);
            without.add(found.clone(), &missing);
        }
        if with.undocumented_count != 0 {
            return Err(format!(
                "{name}: undocumented with every class documented: {:?}",
                with.undocumented
            ));
        }
        if without.undocumented_count == 0 {
            return Err(format!(
                "{name}: not flagged with {} left out of the documented list",
                recorded.class
            ));
        }
    }
    Ok(())
}

fn cases_per_pass() -> usize {
    std::env::var("DIFFERENTIAL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000)
}

fn differential_pass(_: &Tools) -> Result<(), String> {
    let mut oracle = oracle()?;
    let documented = documented_classes()?;
    let count = cases_per_pass();
    // The fixed seed makes a failure reproducible at once; the other,
    // printed, widens what CI covers over time.
    let random = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(2, |d| d.as_secs());
    let mut report = Report::default();
    for seed in [1, random] {
        for mode in [Mode::Normal, Mode::Wild, Mode::Expansion] {
            pass(
                &mut oracle,
                seed,
                mode,
                count,
                &documented,
                &mut report,
                &mut |_| {},
            )
            .map_err(|e| e.to_string())?;
        }
    }
    eprintln!(
        "differential pass: {} cases (seeds 1 and {random}, {count} per seed and mode), {} divergent: {:?}",
        report.cases, report.divergent, report.per_class
    );
    if report.undocumented_count == 0 {
        return Ok(());
    }
    let mut message = format!(
        "{} differences no documented class explains (rerun: cargo run -p sartor-differential --release -- --seed SEED --cases {count}); the first, minimized:\n",
        report.undocumented_count
    );
    for finding in report.undocumented.iter().take(3) {
        let minimized = minimize(&mut oracle, finding).map_err(|e| e.to_string())?;
        let reproducer = Reproducer::of(&mut oracle, &minimized).map_err(|e| e.to_string())?;
        message.push_str(&format!(
            "\n# {} (case {})\n{}",
            finding.difference,
            finding.case.id,
            serde_yaml::to_string(&reproducer).unwrap_or_default()
        ));
    }
    Err(message)
}

/// Gatekeeper's CRDs in the real API server; generated mutators created
/// there as `kubectl create --validate=false` would (unknown fields dropped),
/// read back, and compared with the oracle's CRD step.
fn crd_step_agrees(plane: &mut ControlPlane) -> Result<(), String> {
    let oracle_path = Oracle::locate(&repository()).map_err(|e| e.to_string())?;
    let crds = oracle_path
        .parent()
        .map(|dir| dir.join("crds"))
        .ok_or("the oracle has no directory")?;
    plane.kubectl(&["apply", "--server-side", "-f", &crds.display().to_string()])?;
    for crd in ["assign", "assignmetadata", "modifyset", "assignimage"] {
        plane.wait_established(Some(&format!("{crd}.mutations.gatekeeper.sh")))?;
    }
    let mut oracle = oracle()?;
    let mut compared = 0;
    let mut failures = Vec::new();
    let sample: Vec<Case> = generate::cases(11, Mode::Normal, 40)
        .chain(generate::cases(11, Mode::Wild, 20))
        .collect();
    for case in &sample {
        let answer = oracle.answer(case).map_err(|e| e.to_string())?;
        if answer.mutators.len() != case.mutators.len() {
            return Err(format!(
                "{}: the oracle judged {} of {} mutators",
                case.id,
                answer.mutators.len(),
                case.mutators.len()
            ));
        }
        for (mutator, verdict) in case.mutators.iter().zip(&answer.mutators) {
            let created = plane.kubectl_with_input(
                &["create", "--validate=false", "-o", "json", "-f", "-"],
                Some(&mutator.to_string()),
            );
            let oracle_stored =
                (verdict.stage.as_deref() != Some("crd")).then_some(verdict.stored.as_ref());
            match (created, oracle_stored) {
                (Ok(stored), Some(Some(expected))) => {
                    let stored: Value = serde_json::from_str(&stored).map_err(|e| e.to_string())?;
                    if stored.get("spec") != expected.get("spec") {
                        failures.push(format!(
                            "{}: the API server stores spec {}, the oracle {}",
                            mutator,
                            stored.get("spec").unwrap_or(&Value::Null),
                            expected.get("spec").unwrap_or(&Value::Null)
                        ));
                    }
                }
                (Err(_), None) => {}
                (Ok(_), None) => failures.push(format!(
                    "{mutator}: the API server accepts it, the oracle refuses it: {:?}",
                    verdict.error
                )),
                (Err(error), Some(_)) => failures.push(format!(
                    "{mutator}: the API server refuses it ({error}), the oracle accepts it"
                )),
                (Ok(_), Some(None)) => {
                    failures.push(format!("{mutator}: the oracle stored nothing"))
                }
            }
            compared += 1;
            let kind = mutator
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_lowercase();
            let name = sartor_differential::case::name_of(mutator);
            let _ = plane.kubectl(&[
                "delete",
                "--ignore-not-found",
                "--wait=false",
                &format!("{kind}.mutations.gatekeeper.sh"),
                name,
            ]);
        }
    }
    eprintln!("the CRD step compared on {compared} mutators");
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}
