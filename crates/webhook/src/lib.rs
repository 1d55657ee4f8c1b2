//! sartor's admission webhook server: the endpoint the Kubernetes API server
//! calls for every object it admits.
//!
//! ```text
//!  TLS accept ─▶ HTTP/1.1 or HTTP/2 ─▶ body (≤ 3 MiB, timed) ─▶ AdmissionReview v1/v1beta1
//!    ─▶ skip rules ─▶ Namespace from the provider ─▶ current System snapshot ─▶ mutate
//!    ─▶ RFC 6902 patch of original vs mutated ─▶ AdmissionResponse ─▶ metrics + log line
//! ```
//!
//! The crate knows nothing of where mutators come from: a source (a directory
//! watcher, the controller's CRD watch) builds a [`System`](sartor_engine::System)
//! and hands it to [`Webhook::publish`]; requests read the latest snapshot and
//! never wait on an update. [`Server`] is the network shell around [`Webhook`]
//! (the transport); a private `routes` module maps paths onto handlers.

pub mod admission;
pub mod certs;
pub mod metrics;
pub mod namespaces;
pub mod providers;
pub mod review;
mod routes;
pub mod server;
pub mod tls;

pub use admission::{OnError, Reply, Settings, Snapshot, Webhook};
pub use certs::{CertFiles, SelfSigned};
pub use metrics::{Endpoint, Metrics, Outcome, ProviderCall, RulesState};
pub use namespaces::{Fixed, Lookup, Namespaces, Unlabelled};
pub use providers::{ProviderError, Providers};
pub use server::{Config, Limits, MAX_BODY_BYTES, ServeError, Server};
pub use tls::{Certificate, TlsError, TlsFiles};
