//! The runner of the suites that need the pinned Kubernetes tools (the
//! cluster suite, the Helm chart's): one control-plane state shared by
//! trials run one after another, started by the first trial that needs it
//! and stopped before the process exits; trials that need the tools reported
//! as ignored, with the reason printed, where this machine cannot build them.
//!
//! libtest cannot mark a test ignored at run time, hence libtest-mimic.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Failed, Trial};

use crate::cluster::{Tools, Unavailable};

/// What a trial needs, and the check itself.
pub enum Needs<S> {
    /// Files of the repository only: always runs.
    Files(fn() -> Result<(), String>),
    /// The pinned tools, no control plane.
    Tools(fn(&Tools) -> Result<(), String>),
    /// The suite's shared state (a running control plane and whatever the
    /// trials before it set up).
    Cluster(fn(&mut S) -> Result<(), String>),
}

impl<S> Clone for Needs<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Needs<S> {}

/// One trial: its name and what it needs.
pub type Check<S> = (&'static str, Needs<S>);

type Shared<S> = Arc<Mutex<Option<Result<S, String>>>>;

/// Runs `trials` in order as the test binary `suite` (call it from `main` of
/// a `harness = false` test); `start` builds the shared state from the tools
/// the first time a trial needs it.
pub fn main<S: Send + 'static>(
    suite: &str,
    trials: &'static [Check<S>],
    start: fn(&Tools) -> Result<S, String>,
) -> ExitCode {
    let mut args = Arguments::from_args();
    // One control plane with cluster-scoped objects: one trial at a time.
    args.test_threads = Some(1);
    let tools = Tools::provision();
    match &tools {
        Ok(tools) => eprintln!(
            "{suite} suite: {} | {} | {} | {}",
            tools.version("kube-apiserver", &["--version"]),
            tools.version("etcd", &["--version"]),
            tools.version("kubectl", &["version", "--client"]),
            tools.version("helm", &["version", "--short"]),
        ),
        Err(Unavailable::Skip(reason)) => {
            eprintln!("{suite} suite SKIPPED (trials that need the tools are ignored): {reason}");
        }
        Err(Unavailable::Broken(reason)) => eprintln!("{suite} suite cannot run: {reason}"),
    }
    let shared: Shared<S> = Arc::new(Mutex::new(None));
    let runnable = trials
        .iter()
        .map(|&(name, needs)| {
            let ignored =
                !matches!(needs, Needs::Files(_)) && matches!(tools, Err(Unavailable::Skip(_)));
            let (tools, shared) = (tools.clone(), Arc::clone(&shared));
            Trial::test(name, move || {
                run(needs, &tools, &shared, start).map_err(Failed::from)
            })
            .with_ignored_flag(ignored)
            .with_kind(suite)
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, runnable);
    // exit() skips destructors: stop what the trials started first.
    let state = shared.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(state);
    conclusion.exit_code()
}

/// Runs one trial, starting the shared state if it needs it and no trial
/// has yet.
fn run<S>(
    needs: Needs<S>,
    tools: &Result<Tools, Unavailable>,
    shared: &Mutex<Option<Result<S, String>>>,
    start: fn(&Tools) -> Result<S, String>,
) -> Result<(), String> {
    match (needs, tools) {
        (Needs::Files(check), _) => check(),
        (_, Err(unavailable)) => Err(unavailable.to_string()),
        (Needs::Tools(check), Ok(tools)) => check(tools),
        (Needs::Cluster(check), Ok(tools)) => {
            // A trial that panicked poisons the lock; the state is still usable.
            let mut state = shared.lock().unwrap_or_else(|e| e.into_inner());
            match state.get_or_insert_with(|| start(tools)) {
                Ok(state) => check(state),
                Err(error) => Err(format!("the control plane did not start: {error}")),
            }
        }
    }
}
