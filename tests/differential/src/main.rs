//! `sartor-differential`: the long differential run against Gatekeeper
//! v3.23.1 (README.md, "Compatibility with Gatekeeper").

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::Parser;
use sartor_differential::generate::Mode;
use sartor_differential::oracle::Oracle;
use sartor_differential::run::{Report, Reproducer, minimize, pass};

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
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Mode::Normal, Mode::Wild])]
    mode: Vec<Mode>,
    /// Undocumented findings to minimize and print as reproducers.
    #[arg(long, default_value_t = 5)]
    reproducers: usize,
    /// Print an example of every class met, as a reproducer, too.
    #[arg(long)]
    examples: bool,
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
    for finding in report.undocumented.iter().take(args.reproducers) {
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
