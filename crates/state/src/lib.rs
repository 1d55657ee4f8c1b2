//! What a sartor process publishes and serves from: the mutators in force,
//! which mutator CRDs are installed, where Namespace objects come from, and
//! the external data providers in force.
//!
//! Two halves, as kube-runtime's reflector has a `Writer` and a `Store`: a
//! source (the controller's CRD watch, the file watch) writes through the
//! [`Publisher`]; the webhook reads through the [`State`], which never waits
//! on a write. The binary makes both with [`channel`] and hands each half to
//! its side, so neither side depends on the other.
//!
//! ```text
//!  controller / file watch ──Publisher::publish──▶ Snapshot ──State::current──▶ webhook
//!                          ──Publisher::set_crds──▶ CRD facts ──State::missing_crds──▶ /readyz
//!                          ──Publisher::set_providers──▶ ProviderSet (the webhook's clients)
//! ```
//!
//! ```
//! use std::sync::Arc;
//! use sartor_state::{Accepting, Snapshot, channel};
//!
//! let (publisher, state) = channel(Arc::new(Accepting));
//! assert!(!state.is_ready());
//! publisher.publish(Snapshot::default());
//! assert!(state.is_ready());
//! assert_eq!(state.current().map(|s| s.system.len()), Some(0));
//! ```

mod namespaces;

use std::sync::{Arc, RwLock};

use sartor_api::{MutatorKind, Provider};
use sartor_engine::{MutatorId, System};
use tokio::sync::watch;

pub use namespaces::{Fixed, Lookup, Namespaces, Unlabelled};

/// One published set of mutators.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The compiled mutators.
    pub system: System,
    /// Mutators the source knows of that did not compile (for the metrics).
    pub errors: Vec<MutatorId>,
}

/// One watched mutator kind's CRD, as the controller last found it. A kind
/// whose CRD the API server does not serve has no objects, so the mutators in
/// force are exact without it; `/readyz` names it and
/// `sartor_mutator_crd_installed` is 0 for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutatorCrd {
    /// The API group its objects are read from (`mutations.sartor.dev` or,
    /// with `--gatekeeper-compat`, `mutations.gatekeeper.sh`).
    pub group: &'static str,
    /// The mutator kind it defines.
    pub kind: MutatorKind,
    /// The CRD's `metadata.name`, `PLURAL.GROUP` (`assignimage.mutations.sartor.dev`).
    pub name: String,
    /// False while listing the kind answers 404: mutators of this kind are
    /// not enforced until the CRD is installed.
    pub installed: bool,
}

impl MutatorCrd {
    /// The CRD of `kind` in `group`, installed or not; named
    /// `PLURAL.GROUP`, a mutator kind's plural being its lowercase name
    /// (sartor's and Gatekeeper's CRDs alike).
    pub fn new(group: &'static str, kind: MutatorKind, installed: bool) -> MutatorCrd {
        MutatorCrd {
            group,
            kind,
            name: format!("{}.{group}", kind.as_str().to_lowercase()),
            installed,
        }
    }
}

/// A Provider that could not be put in force (an unusable CA bundle or url).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Provider {name}: {reason}")]
pub struct ProviderError {
    /// The provider.
    pub name: String,
    /// Why.
    pub reason: String,
}

/// Where the external data providers in force live: the webhook's clients.
/// Setting them checks each (a client must be buildable from its spec), so
/// a source can refuse a set with an unusable provider, or leave that one out.
pub trait ProviderSet: Send + Sync {
    /// Replaces the providers in force with `providers`.
    ///
    /// # Errors
    /// Every provider that cannot be used; then nothing changes.
    fn set(&self, providers: &[Provider]) -> Result<(), Vec<ProviderError>>;
}

/// A [`ProviderSet`] that takes every provider and calls none: for a process
/// that never asks providers (tests, tools).
#[derive(Debug, Clone, Copy, Default)]
pub struct Accepting;

impl ProviderSet for Accepting {
    fn set(&self, _providers: &[Provider]) -> Result<(), Vec<ProviderError>> {
        Ok(())
    }
}

/// The writer half: what a source of mutators publishes.
#[derive(Clone)]
pub struct Publisher {
    shared: Arc<Shared>,
    providers: Arc<dyn ProviderSet>,
}

/// The reader half: what the webhook serves from. Cheap to clone.
#[derive(Debug, Clone)]
pub struct State {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The current snapshot; subscribers hear of every publish.
    snapshot: watch::Sender<Option<Arc<Snapshot>>>,
    crds: RwLock<Vec<MutatorCrd>>,
    /// Why the in-cluster audit's findings are not written, when they are
    /// not (`/readyz` says it; admission goes on).
    audit_problem: RwLock<Option<String>>,
}

/// A new, empty state (nothing published: not ready), with its two halves;
/// providers set through the [`Publisher`] go to `providers`.
pub fn channel(providers: Arc<dyn ProviderSet>) -> (Publisher, State) {
    let shared = Arc::new(Shared {
        snapshot: watch::Sender::new(None),
        crds: RwLock::new(Vec::new()),
        audit_problem: RwLock::new(None),
    });
    (
        Publisher {
            shared: shared.clone(),
            providers,
        },
        State { shared },
    )
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("ready", &self.state().is_ready())
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// Swaps in a new snapshot; requests in flight finish on the old one.
    pub fn publish(&self, snapshot: Snapshot) {
        self.shared.snapshot.send_replace(Some(Arc::new(snapshot)));
    }

    /// Records which watched mutator kinds' CRDs are served; replaces what
    /// was set before.
    pub fn set_crds(&self, crds: Vec<MutatorCrd>) {
        match self.shared.crds.write() {
            Ok(mut current) => *current = crds,
            Err(poisoned) => *poisoned.into_inner() = crds,
        }
    }

    /// Records why the in-cluster audit's findings are not written (`None`:
    /// they are, or there is no audit).
    pub fn set_audit_problem(&self, problem: Option<String>) {
        match self.shared.audit_problem.write() {
            Ok(mut current) => *current = problem,
            Err(poisoned) => *poisoned.into_inner() = problem,
        }
    }

    /// Puts `providers` in force.
    ///
    /// # Errors
    /// Every provider that cannot be used; then the providers in force stay.
    pub fn set_providers(&self, providers: &[Provider]) -> Result<(), Vec<ProviderError>> {
        self.providers.set(providers)
    }

    /// A reader of what this publishes.
    pub fn state(&self) -> State {
        State {
            shared: self.shared.clone(),
        }
    }
}

impl State {
    /// The current snapshot, `None` before the first [`Publisher::publish`].
    pub fn current(&self) -> Option<Arc<Snapshot>> {
        self.shared.snapshot.borrow().clone()
    }

    /// A receiver that sees every snapshot published from now on (the
    /// controller's webhook rules follow the mutators through it).
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<Snapshot>>> {
        self.shared.snapshot.subscribe()
    }

    /// Whether a snapshot has been published (`/readyz`).
    pub fn is_ready(&self) -> bool {
        self.shared.snapshot.borrow().is_some()
    }

    /// The CRDs last given to [`Publisher::set_crds`].
    pub fn crds(&self) -> Vec<MutatorCrd> {
        match self.shared.crds.read() {
            Ok(crds) => crds.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// What [`Publisher::set_audit_problem`] last set.
    pub fn audit_problem(&self) -> Option<String> {
        match self.shared.audit_problem.read() {
            Ok(problem) => problem.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The CRDs last given to [`Publisher::set_crds`] that are not installed.
    pub fn missing_crds(&self) -> Vec<MutatorCrd> {
        let mut crds = self.crds();
        crds.retain(|crd| !crd.installed);
        crds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(kind: MutatorKind, installed: bool) -> MutatorCrd {
        MutatorCrd::new("mutations.sartor.dev", kind, installed)
    }

    #[test]
    fn the_reader_sees_what_the_writer_publishes() {
        let (publisher, state) = channel(Arc::new(Accepting));
        let seen = state.subscribe();
        assert!(state.current().is_none());
        publisher.publish(Snapshot::default());
        assert!(seen.has_changed().unwrap_or(false));
        assert!(publisher.state().is_ready());
        publisher.set_crds(vec![
            crd(MutatorKind::Assign, true),
            crd(MutatorKind::ModifySet, false),
        ]);
        assert_eq!(state.missing_crds(), [crd(MutatorKind::ModifySet, false)]);
        assert_eq!(state.crds().len(), 2);
    }

    /// Refuses every set, to see the refusal reach the source.
    struct Refusing;

    impl ProviderSet for Refusing {
        fn set(&self, _providers: &[Provider]) -> Result<(), Vec<ProviderError>> {
            Err(vec![refused()])
        }
    }

    fn refused() -> ProviderError {
        ProviderError {
            name: "tags".to_string(),
            reason: "bad caBundle".to_string(),
        }
    }

    #[test]
    fn providers_go_to_the_set_and_its_refusal_comes_back() {
        let (publisher, _) = channel(Arc::new(Refusing));
        assert_eq!(publisher.set_providers(&[]), Err(vec![refused()]));
        assert_eq!(refused().to_string(), "Provider tags: bad caBundle");
        let (publisher, _) = channel(Arc::new(Accepting));
        assert_eq!(publisher.set_providers(&[]), Ok(()));
    }
}
