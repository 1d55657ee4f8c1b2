#![allow(clippy::unwrap_used)]

use super::{ExportCommand, run};
use crate::Exit;
use crate::testing::{Ran, rebase, run_in, scratch};

#[derive(clap::Parser)]
struct Command {
    #[command(subcommand)]
    export: ExportCommand,
}

fn run_export(dir: &std::path::Path, args: &[&str]) -> Ran {
    let mut command = parse_command(args);
    match &mut command.export {
        ExportCommand::Map(args) => {
            rebase(dir, &mut args.paths);
            rebase(dir, &mut args.mutators);
        }
        ExportCommand::Condition(args) => {
            rebase(dir, &mut args.paths);
            rebase(dir, &mut args.mutators);
        }
    }
    run_in(dir, "", |io| run(&command.export, io))
}

fn parse_command(args: &[&str]) -> Command {
    use clap::Parser;
    Command::parse_from(std::iter::once("export").chain(args.iter().copied()))
}

/// A keyed list and a list of values at the same path: neither is
/// enforced, by a replica or by the export.
const CONFLICT: &str = "\
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: target-port}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Service]}]
  location: 'spec.ports[port: 80].targetPort'
  parameters: {assign: {value: 8080}}
---
apiVersion: mutations.sartor.dev/v1
kind: ModifySet
metadata: {name: ports}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Service]}]
  location: spec.ports
  parameters: {operation: merge, values: {fromList: [{port: 443}]}}
---
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: dns}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.dnsPolicy
  parameters: {assign: {value: None}}
";

#[test]
fn the_condition_leaves_out_mutators_in_conflict_and_says_so() {
    let dir = scratch("export-condition-conflict", &[("m.yaml", CONFLICT)]);
    let Ran { exit, out, err } = run_export(&dir, &["condition", "-m", "m.yaml"]);
    assert_eq!(exit, Exit::Ok);
    assert!(out.contains("name: sartor-may-change"), "{out}");
    assert!(!out.contains("Service"), "{out}");
    assert_eq!(
        err,
        "warning: m.yaml: document 1: Assign target-port: conflicts with ModifySet ports about spec.ports: this mutator treats it as a list keyed by port, ModifySet ports as a list of values (v1 Service CREATE and 1 more) (not enforced, so left out)\n\
         warning: m.yaml: document 2: ModifySet ports: conflicts with Assign target-port about spec.ports: this mutator treats it as a list of values, Assign target-port as a list keyed by port (v1 Service CREATE and 1 more) (not enforced, so left out)\n\
         Assign/dns: sent when it matches and would change the object\n"
    );
}
