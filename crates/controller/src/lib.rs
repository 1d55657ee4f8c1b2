//! sartor's sources of mutators: the cluster (watched mutator objects, with
//! status written back) and files ([`FileWatch`]: a directory polled for changes).
//!
//! ```text
//!  API server ──watch mutator kinds──▶ MutatorSet ──snapshot──▶ Publisher::publish (sartor-state)
//!      │                                   └──status entries──▶ StatusWriter ──SSA /status──▶ API server
//!      ├──watch Namespaces──▶ NamespaceCache (the webhook's namespace provider)
//!      ├──watch Providers──▶ ProviderWatch ──▶ Publisher::set_providers
//!      ├──Secret + webhook configurations ◀──▶ CertManager ──files──▶ server's TLS reload
//!      └──discovery + mutating webhook rules ◀──▶ RulesWriter ◀──System::targets── snapshots
//! ```
//!
//! In file mode only [`FileWatch`] runs: files ──poll──▶ Compiled ──▶
//! `Publisher::publish`, with no status, certificates or rules to manage.
//!
//! The controller never answers admission and does not know the webhook:
//! it writes through the [`Publisher`](sartor_state::Publisher) half of the
//! published state, and registers its own [`Metrics`] into the process's
//! one registry.
//!
//! In cluster mode every replica runs all of it: each writes only its own
//! `status.byPod` entry (its own field manager), and the Secret and the
//! webhook rules are settled by the API server's optimistic concurrency, so
//! no leader election is needed.
//!
//! File mode, end to end, without a cluster: a directory of mutators,
//! watched and published into the state the webhook would read.
//!
//! ```
//! use std::sync::Arc;
//!
//! use prometheus_client::registry::Registry;
//! use sartor_controller::{Feed, FileWatch, Metrics, Reload};
//! use sartor_state::Accepting;
//!
//! let dir = std::env::temp_dir().join(format!("sartor-controller-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! std::fs::write(
//!     dir.join("pull.yaml"),
//!     "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: pull}\n\
//!      spec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  \
//!      location: 'spec.containers[name: *].imagePullPolicy'\n  \
//!      parameters: {assign: {value: Always}}\n",
//! )?;
//!
//! let mut registry = Registry::with_prefix("sartor");
//! let metrics = Arc::new(Metrics::new(&mut registry));
//! let (publisher, state) = sartor_state::channel(Arc::new(Accepting));
//! let mut watch = FileWatch::new(vec![dir.clone()], Feed::new(publisher, metrics));
//!
//! assert_eq!(watch.poll(), Reload::Published);
//! let snapshot = state.current().ok_or("nothing published")?;
//! assert_eq!(snapshot.system.len(), 1);
//! assert_eq!(watch.poll(), Reload::Unchanged);
//!
//! let mut page = String::new();
//! prometheus_client::encoding::text::encode(&mut page, &registry)?;
//! assert!(page.contains("sartor_mutators{kind=\"Assign\",state=\"enforced\"} 1"));
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod api_errors;
pub mod audit;
mod certs;
mod client;
mod feed;
mod files;
mod lease;
mod metrics;
mod mutators;
mod namespaces;
mod pager;
mod providers;
mod relist;
mod rules;
mod self_signed;
mod status;
mod watch;

pub use certs::{CertError, CertManager, CertOptions, SecretAction};
pub use client::{ClientError, client};
pub use feed::Feed;
pub use files::{FileWatch, Reload};
pub use lease::LeaseHolder;
pub use metrics::Metrics;
pub use namespaces::{NamespaceCache, NamespaceChange};
pub use providers::ProviderWatch;
pub use rules::{RulesAction, RulesError, RulesWriter, Served};
pub use self_signed::{CertFiles, SelfSigned};
pub use status::{StatusLimits, StatusQueue, StatusWriter};
pub use watch::{MutatorWatch, Watched, watched};
