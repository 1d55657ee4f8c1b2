//! sartor's Kubernetes controller: the cluster as the source of mutators.
//!
//! ```text
//!  API server ──watch mutator kinds──▶ MutatorSet ──snapshot──▶ Webhook::publish
//!      │                                   └──status entries──▶ StatusWriter ──SSA /status──▶ API server
//!      ├──watch Namespaces──▶ NamespaceCache (the webhook's namespace provider)
//!      ├──Secret + webhook configurations ◀──▶ CertManager ──files──▶ server's TLS reload
//!      └──discovery + mutating webhook rules ◀──▶ RulesWriter ◀──System::targets── snapshots
//! ```
//!
//! Every replica runs all of it: each writes only its own `status.byPod`
//! entry (its own field manager), and the Secret and the webhook rules are
//! settled by the API server's optimistic concurrency, so no leader election
//! is needed.

pub mod certs;
pub mod mutators;
pub mod namespaces;
pub mod rules;
pub mod status;
pub mod watch;

pub use certs::{CertError, CertManager, CertOptions, SecretAction};
pub use mutators::{Group, MutatorKey, MutatorSet};
pub use namespaces::NamespaceCache;
pub use rules::{RulesAction, RulesError, RulesWriter, Served};
pub use status::{StatusLimits, StatusQueue, StatusWriter, field_manager};
pub use watch::{MutatorWatch, Watched, watched};
