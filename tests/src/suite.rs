//! The runner of the suites that need the pinned Kubernetes tools (the
//! cluster suite, the Helm chart's): one control-plane state shared by
//! trials run one after another, started by the first trial that needs it
//! and stopped before the process exits; trials that need the tools reported
//! as ignored, with the reason printed, where this machine cannot build them.
//!
//! libtest cannot mark a test ignored at run time, hence libtest-mimic.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

use crate::cluster::{Tools, Unavailable};

/// A `&[Check<S>]` of cluster trials from `module::function` paths, each
/// named by its path: `trials![install::applies, admission::mutates]`.
#[macro_export]
macro_rules! trials {
    ($($module:ident :: $test:ident),* $(,)?) => {
        &[$((
            concat!(stringify!($module), "::", stringify!($test)),
            $crate::suite::Needs::Cluster($module::$test),
        )),*]
    };
}

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

/// The tools, found or built the first time a trial needs them, so that
/// listing or filtering out the trials never starts a build.
type LazyTools = Arc<OnceLock<Result<Tools, Unavailable>>>;

/// Runs `trials` in order as the test binary `suite` (call it from `main` of
/// a `harness = false` test); `start` builds the shared state from the tools
/// the first time a trial needs it.
pub fn main<S: Send + 'static>(
    suite: &'static str,
    trials: &'static [Check<S>],
    start: fn(&Tools) -> Result<S, String>,
) -> ExitCode {
    main_where(suite, trials, || Ok(()), start)
}

/// [`main`] for a suite that needs more of the machine than the tools
/// (root, packages): `here` says, without building or starting anything,
/// whether the suite can run, and its [`Unavailable::Skip`] is reported as
/// the tools' own is.
pub fn main_where<S: Send + 'static>(
    suite: &'static str,
    trials: &'static [Check<S>],
    here: fn() -> Result<(), Unavailable>,
    start: fn(&Tools) -> Result<S, String>,
) -> ExitCode {
    let mut args = Arguments::from_args();
    // One control plane with cluster-scoped objects: one trial at a time.
    args.test_threads = Some(1);
    let mut found = Tools::find().and_then(|tools| here().map(|()| tools));
    // CI sets this: a machine that should run the suite must not pass it by
    // skipping it.
    if let Err(Unavailable::Skip(reason)) = &found
        && std::env::var_os("SARTOR_REQUIRE_CLUSTER").is_some()
    {
        found = Err(Unavailable::Broken(format!(
            "{reason} (SARTOR_REQUIRE_CLUSTER is set: the suite must run here)"
        )));
    }
    let skip = match &found {
        Err(Unavailable::Skip(reason)) => {
            eprintln!("{suite} suite SKIPPED (trials that need the tools are ignored): {reason}");
            true
        }
        _ => false,
    };
    let tools: LazyTools = Arc::default();
    let shared: Shared<S> = Arc::new(Mutex::new(None));
    let runnable = trials
        .iter()
        .map(|&(name, needs)| {
            let ignored = skip && !matches!(needs, Needs::Files(_));
            let (found, tools, shared) = (found.clone(), Arc::clone(&tools), Arc::clone(&shared));
            Trial::test(name, move || {
                if let Needs::Files(check) = needs {
                    return check().map_err(Failed::from);
                }
                let tools = tools.get_or_init(|| ready(suite, found));
                run(needs, tools, &shared, start).map_err(Failed::from)
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

/// The tools `found` said are there, or built now; their versions printed.
fn ready(suite: &str, found: Result<Option<Tools>, Unavailable>) -> Result<Tools, Unavailable> {
    let tools = match found {
        Ok(Some(tools)) => Ok(tools),
        Ok(None) => Tools::provision(),
        Err(unavailable) => Err(unavailable),
    };
    match &tools {
        Ok(tools) => eprintln!(
            "{suite} suite: {} | {} | {} | {}",
            tools.version("kube-apiserver", &["--version"]),
            tools.version("etcd", &["--version"]),
            tools.version("kubectl", &["version", "--client"]),
            tools.version("helm", &["version", "--short"]),
        ),
        Err(unavailable) => eprintln!("{suite} suite cannot run: {unavailable}"),
    }
    tools
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

// === helpers for the trials ===

/// Polls `check` every 200 ms until it returns `Ok`, or fails with its last
/// error after `limit`.
///
/// # Errors
/// `what`, the limit and `check`'s last error.
pub fn eventually<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let start = Instant::now();
    loop {
        match check() {
            Ok(value) => return Ok(value),
            Err(error) if start.elapsed() > limit => {
                return Err(format!("{what}: not after {limit:?}: {error}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// `Ok` when `actual == expected`, else both, under `what`.
///
/// # Errors
/// The two values when they differ.
pub fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    actual: T,
    expected: T,
) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!(
            "{what}:\n  actual:   {actual:?}\n  expected: {expected:?}"
        ))
    }
}

/// Parses a tool's `-o json` output.
///
/// # Errors
/// The parse error and the text.
pub fn json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {text}"))
}
