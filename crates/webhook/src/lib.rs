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
//! watcher, the controller's CRD watch) publishes a
//! [`Snapshot`](sartor_state::Snapshot) through the state's
//! [`Publisher`](sartor_state::Publisher); the webhook reads the
//! [`State`](sartor_state::State) half, and requests never wait on an update. [`Server`] is the network shell around [`Webhook`]
//! (the transport); a private `routes` module maps paths onto handlers.

pub mod admission;
pub mod metrics;
pub mod providers;
pub mod review;
mod routes;
pub mod server;
pub mod tls;

pub use admission::{OnError, Reply, Settings, Webhook};
pub use metrics::{Endpoint, Metrics, Outcome, ProviderCall};
pub use providers::Providers;
pub use server::{Config, Limits, MAX_BODY_BYTES, ServeError, Server};
pub use tls::{Certificate, TlsError, TlsFiles};
