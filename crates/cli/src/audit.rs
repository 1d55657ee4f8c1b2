//! `sartor audit`: the objects already in a cluster that the mutators would
//! change on their next write; read-only unless `--fix` is given. The
//! mutators come from the cluster, or from files (`--mutators`) to try a set
//! against a live cluster before it is applied.

use std::io::IsTerminal as _;
use std::ops::ControlFlow;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use futures::StreamExt as _;
use kube::Client;
use sartor_api::Exclusions;
use sartor_audit::{Keep, Outcome, Stored, Summary};
use sartor_controller::audit::{self, Forbidden, Repairer, ScanOf};
use sartor_engine::{Operation, System};
use sartor_offline::audit::{
    AuditFormat, Progress, ScanArgs, exit, mutator_files, repaired, sink, summary_line,
};
use sartor_offline::{Exit, Io};

mod rbac;

/// List the objects in a cluster that the mutators would change on their
/// next write (objects stored before a mutator existed), without changing
/// anything. Cluster access as kubectl's: $KUBECONFIG or ~/.kube/config,
/// or the in-cluster service account.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    #[command(flatten)]
    scan: ScanArgs,
}

/// What `sartor audit` does instead of a scan.
#[derive(Debug, Subcommand)]
enum AuditCommand {
    Rbac(rbac::RbacArgs),
}

/// Runs `sartor audit`.
///
/// # Errors
/// No cluster configured, unusable mutator files, or a list the API server
/// refused.
pub fn run(args: &AuditArgs) -> anyhow::Result<Exit> {
    // Not locked: the client's threads may write too (a lock held across
    // the scan would make them wait for it).
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let mut io = Io {
        stdin: &mut std::io::empty(),
        out: &mut stdout,
        err: &mut stderr,
        colour: std::io::stdout().is_terminal(),
    };
    if let Some(AuditCommand::Rbac(rbac)) = &args.command {
        return rbac::run(rbac, &mut io);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(audit_cluster(&args.scan, &mut io))
}

async fn audit_cluster(args: &ScanArgs, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    // Files are checked before the cluster is reached: bad input first.
    let from_files = match args.mutators.is_empty() {
        true => None,
        false => match mutator_files(&args.mutators, io)? {
            Some(system) => Some(system),
            None => return Ok(Exit::InvalidInput),
        },
    };
    let client =
        sartor_controller::client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let system = match from_files {
        Some(system) => system,
        None => {
            let snapshot = audit::mutators_in_cluster(&client, args.gatekeeper_compat).await?;
            for id in &snapshot.errors {
                let said = format!(
                    "warning: {id} does not compile; left out, as the webhook leaves it out"
                );
                writeln!(io.err, "{said}").context("writing to stderr")?;
            }
            snapshot.system
        }
    };
    let exclusions = Exclusions::new(&args.sartor_namespace, args.exclude_namespaces.clone());
    let of = ScanOf {
        system: &system,
        namespace: args.namespace.as_deref(),
        exclusions: &exclusions,
        operation: args.operation,
        forbidden: Forbidden::Stops,
        keep: match args.diff && args.output == AuditFormat::Text {
            true => Keep::Before,
            false => Keep::Changes,
        },
    };
    let mut sink = sink(args.output, args.diff, args.explain);
    // With --fix, where each object to repair is: the repair reads it again.
    let mut to_fix: Vec<Stored> = Vec::new();
    let progress = Progress::new(std::io::stderr(), std::io::stderr().is_terminal());
    // The first failed write to stdout (its reader gone): nothing more is
    // printed, the scan stops, and the command ends with it. With --fix the
    // scan and the repairs go on: the repairs are what was asked for.
    let mut unprinted: Option<anyhow::Error> = None;
    let found = |audited: sartor_audit::Audited| {
        progress.clear();
        if unprinted.is_none()
            && let Err(error) = sink.found(&audited, io)
        {
            unprinted = Some(error);
        }
        if args.fix && matches!(audited.outcome, Outcome::Changes { .. }) {
            to_fix.push(audited.object);
        }
        match unprinted.is_some() && !args.fix {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    };
    let summary = audit::scan(&client, &of, found, |kind, scanned| {
        progress.show(kind, scanned);
    })
    .await?;
    progress.clear();
    if args.fix {
        let fixed = fix(&client, &system, args.operation, to_fix, &summary, io).await;
        return match unprinted {
            Some(error) => Err(error),
            None => fixed,
        };
    }
    if let Some(error) = unprinted {
        return Err(error);
    }
    sink.finish(&summary, io)?;
    Ok(exit(&summary, args.exit_code))
}

/// Repairs each of `objects` (`--fix`), several at a time, a line each in
/// the order listed: `repaired`, or why not; then the summary with what was
/// repaired.
async fn fix(
    client: &Client,
    system: &System,
    operation: Operation,
    objects: Vec<Stored>,
    summary: &Summary,
    io: &mut Io<'_>,
) -> anyhow::Result<Exit> {
    let repairer = Repairer::new(client, system, operation).await?;
    let (mut done, listed) = (0, objects.len());
    // The repairs asked for are all made, even when stdout's reader is gone
    // (that error is the command's after them): a repair under way is never
    // left half known.
    let mut unprinted: Option<anyhow::Error> = None;
    let mut outcomes = std::pin::pin!(repairer.repair_each(objects));
    while let Some((object, outcome)) = outcomes.next().await {
        if unprinted.is_none()
            && let Err(error) = repaired(&object, &outcome, io)
        {
            unprinted = Some(error);
        }
        done += usize::from(outcome.is_done());
    }
    let line = format!("{}; {done} of {listed} repaired", summary_line(summary));
    writeln!(io.err, "{line}").context("writing to stderr")?;
    if let Some(error) = unprinted {
        return Err(error);
    }
    Ok(match summary.failed > 0 || done < listed {
        true => Exit::MutationFailed,
        false => Exit::Ok,
    })
}
