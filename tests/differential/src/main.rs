//! `sartor-differential`: the long differential run against Gatekeeper
//! v3.23.1 (README.md, "Compatibility with Gatekeeper").

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::Parser;
use sartor_differential::case::Case;
use sartor_differential::generate::Mode;
use sartor_differential::oracle::Oracle;
use sartor_differential::run::{Report, Reproducer, check, minimize, pass};

/// Run random cases through sartor and Gatekeeper v3.23.1's mutation
/// library (the oracle in tests/gatekeeper) and report every difference no
/// documented class explains, minimized to a reproducer.
#[derive(Debug, Parser)]
struct Args {
    /// The first seed; each further seed is one more.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seeds to run.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Cases per seed and mode.
    #[arg(long, default_value_t = 10_000)]
    cases: usize,
    /// Modes to run (repeat, or separate with commas).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Mode::Normal, Mode::Wild, Mode::Expansion])]
    mode: Vec<Mode>,
    /// Undocumented findings to minimize and print as reproducers.
    #[arg(long, default_value_t = 5)]
    reproducers: usize,
    /// Print an example of every class met, as a reproducer, too.
    #[arg(long)]
    examples: bool,
    /// Instead of random cases, put this case to both sides and print the
    /// reproducer (a YAML file holding a case, or a reproducer's `case`).
    #[arg(long, value_name = "FILE")]
    case: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("sartor-differential: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> anyhow::Result<bool> {
    let repository = sartor_differential::repository();
    let documented = sartor_differential::documented(&repository)
        .with_context(|| format!("reading {}", sartor_differential::DIFFERENCES))?;
    let path = Oracle::locate(&repository)?;
    let mut oracle = Oracle::start(&path)?;
    if let Some(file) = &args.case {
        return one_case(&mut oracle, file, &documented);
    }
    let mut report = Report::default();
    let started = Instant::now();
    for seed in args.seed..args.seed + args.seeds {
        for &mode in &args.mode {
            let before = report.cases;
            pass(
                &mut oracle,
                seed,
                mode,
                args.cases,
                &documented,
                &mut report,
                &mut |r| {
                    eprint!(
                        "\rseed {seed} {}: {} cases, {} divergent, {} undocumented ({:.0} cases/s)   ",
                        mode.as_str(),
                        r.cases - before,
                        r.divergent,
                        r.undocumented_count,
                        r.cases as f64 / started.elapsed().as_secs_f64().max(0.001),
                    );
                },
            )?;
            eprintln!();
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} cases (seeds {}..{}, modes {}), {} divergent, {:.0} s",
        report.cases,
        args.seed,
        args.seed + args.seeds - 1,
        args.mode
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(","),
        report.divergent,
        started.elapsed().as_secs_f64()
    )?;
    writeln!(out, "\n| class | differences |\n|---|---:|")?;
    for (class, count) in &report.per_class {
        writeln!(out, "| {class} | {count} |")?;
    }
    if !report.undocumented_causes.is_empty() {
        writeln!(
            out,
            "\n| undocumented, by cause | differences |\n|---|---:|"
        )?;
        let mut causes: Vec<(&String, &usize)> = report.undocumented_causes.iter().collect();
        causes.sort_by(|a, b| b.1.cmp(a.1));
        for (cause, count) in causes {
            writeln!(out, "| {cause} | {count} |")?;
        }
    }
    if args.examples {
        for (class, finding) in &report.examples {
            let minimized = minimize(&mut oracle, finding)?;
            let reproducer = Reproducer::of(&mut oracle, &minimized)?;
            writeln!(
                out,
                "\n# example of {class}\n{}",
                serde_yaml::to_string(&reproducer)?
            )?;
        }
    }
    // One reproducer per rough cause, the causes in the order first met.
    let mut causes = std::collections::BTreeSet::new();
    let distinct = report
        .undocumented
        .iter()
        .filter(|finding| causes.insert(finding.cause()));
    for finding in distinct.take(args.reproducers) {
        let minimized = minimize(&mut oracle, finding)?;
        let reproducer = Reproducer::of(&mut oracle, &minimized)?;
        writeln!(
            out,
            "\n# UNDOCUMENTED ({}), minimized from case {}; paste into tests/differential/reproducers/NAME.yaml\n{}",
            finding.difference,
            finding.case.id,
            serde_yaml::to_string(&reproducer)?
        )?;
    }
    Ok(report.undocumented_count == 0)
}

/// `--case FILE`: both sides on one case, its findings and the reproducer.
fn one_case(
    oracle: &mut Oracle,
    file: &std::path::Path,
    documented: &std::collections::BTreeSet<String>,
) -> anyhow::Result<bool> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let value: serde_yaml::Value =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    let case_value = value.get("case").cloned().unwrap_or(value);
    let mut case: Case = serde_yaml::from_value(case_value)
        .with_context(|| format!("{}: not a case", file.display()))?;
    if case.id.is_empty() {
        case.id = "case".into();
    }
    let findings = check(oracle, std::slice::from_ref(&case))?
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    let mut out = std::io::stdout().lock();
    let mut clean = true;
    for finding in &findings {
        let class = finding.class.filter(|id| documented.contains(*id));
        clean &= class.is_some();
        writeln!(
            out,
            "# {}: {}",
            class.unwrap_or("UNDOCUMENTED"),
            finding.difference
        )?;
    }
    if findings.is_empty() {
        writeln!(out, "# both sides agree")?;
    }
    let reproducer = match findings.first() {
        Some(finding) => Reproducer::of(oracle, finding)?,
        None => Reproducer::agreed(oracle, &case)?,
    };
    writeln!(out, "{}", serde_yaml::to_string(&reproducer)?)?;
    Ok(clean)
}
