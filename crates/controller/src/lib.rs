//! sartor's sources of mutators: the cluster (watched mutator objects, with
//! status written back) and files ([`files`]: a directory polled for changes).
//!
//! ```text
//!  API server ──watch mutator kinds──▶ MutatorSet ──snapshot──▶ Webhook::publish
//!      │                                   └──status entries──▶ StatusWriter ──SSA /status──▶ API server
//!      ├──watch Namespaces──▶ NamespaceCache (the webhook's namespace provider)
//!      ├──watch Providers──▶ ProviderWatch ──▶ the webhook's external data providers
//!      ├──Secret + webhook configurations ◀──▶ CertManager ──files──▶ server's TLS reload
//!      └──discovery + mutating webhook rules ◀──▶ RulesWriter ◀──System::targets── snapshots
//! ```
//!
//! In file mode only [`FileWatch`] runs: files ──poll──▶ Compiled ──▶
//! `Webhook::publish`, with no status, certificates or rules to manage.
//!
//! In cluster mode every replica runs all of it: each writes only its own
//! `status.byPod` entry (its own field manager), and the Secret and the
//! webhook rules are settled by the API server's optimistic concurrency, so
//! no leader election is needed.

pub mod certs;
pub mod files;
pub mod mutators;
pub mod namespaces;
pub mod providers;
pub mod rules;
pub mod status;
pub mod watch;

pub use certs::{CertError, CertManager, CertOptions, SecretAction};
pub use files::{Compiled, FileError, FileWatch, MutatorFiles, Reload};
pub use mutators::{Group, MutatorKey, MutatorSet};
pub use namespaces::NamespaceCache;
pub use providers::ProviderWatch;
pub use rules::{RulesAction, RulesError, RulesWriter, Served};
pub use status::{StatusLimits, StatusQueue, StatusWriter, field_manager};
pub use watch::{MutatorWatch, Watched, watched};
