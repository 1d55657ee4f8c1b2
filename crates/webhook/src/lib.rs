//! sartor's admission webhook server: the endpoint the Kubernetes API server
//! calls for every object it admits.
//!
//! ```text
//!  TLS accept ─▶ HTTP/1.1 or HTTP/2 ─▶ deadline (?timeout=) ─▶ body (≤ 3 MiB, by the deadline)
//!    ─▶ a slot (bounded, queued by the deadline; else 503 at once) ─▶ AdmissionReview v1/v1beta1
//!    ─▶ skip rules ─▶ Namespace from the provider ─▶ current System snapshot ─▶ mutate
//!    ─▶ RFC 6902 patch of original vs mutated ─▶ AdmissionResponse ─▶ metrics + log line
//! ```
//!
//! The crate knows nothing of where mutators come from: a source (a directory
//! watcher, the controller's CRD watch) publishes a
//! [`Snapshot`](sartor_state::Snapshot) through the state's
//! [`Publisher`](sartor_state::Publisher); the webhook reads the
//! [`State`](sartor_state::State) half, and requests never wait on an
//! update. [`Server`] is the network shell around [`Webhook`] (the
//! transport); a private `routes` module maps paths onto handlers. It never
//! calls the API server; its only outbound calls go to external data
//! providers ([`Providers`]).
//!
//! The admission decision without the network: an AdmissionReview body in,
//! the reply (with its JSON Patch) out.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//!
//! use base64::Engine as _;
//! use sartor_engine::{Mutator, System};
//! use sartor_state::{Snapshot, Unlabelled};
//! use sartor_webhook::{Deadline, Metrics, Providers, Settings, Webhook};
//! use serde_json::{Value, json};
//!
//! // One Assign, published as the controller would.
//! let mut system = System::new();
//! let assign = json!({
//!     "apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
//!     "metadata": {"name": "always-pull"},
//!     "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
//!              "location": "spec.containers[name: *].imagePullPolicy",
//!              "parameters": {"assign": {"value": "Always"}}}});
//! system.upsert(Mutator::compile(&sartor_api::parse_mutator(&assign)?)?);
//! let metrics = Arc::new(Metrics::new());
//! let providers = Arc::new(Providers::new(Duration::ZERO, metrics.clone()));
//! let (publisher, state) = sartor_state::channel(providers.clone());
//! publisher.publish(Snapshot { system, errors: Vec::new() });
//! let settings = Settings::new("sartor-system", "sartor");
//! let webhook = Webhook::new(settings, state, Box::new(Unlabelled::default()), providers, metrics);
//!
//! let review = json!({
//!     "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
//!     "request": {"uid": "42", "operation": "CREATE", "namespace": "shop",
//!                 "kind": {"group": "", "version": "v1", "kind": "Pod"},
//!                 "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
//!                            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}});
//! // Due within the API server's timeout for this call (`?timeout=1s`).
//! let deadline = Deadline::new(Instant::now(), Duration::from_secs(1));
//! let reply = futures::executor::block_on(webhook.mutate(review.to_string().as_bytes(), &deadline));
//! assert_eq!(reply.status, 200);
//! let answer: Value = serde_json::from_slice(&reply.body)?;
//! assert_eq!(answer["response"]["uid"], "42");
//! assert_eq!(answer["response"]["patchType"], "JSONPatch");
//! let patch = base64::engine::general_purpose::STANDARD
//!     .decode(answer["response"]["patch"].as_str().unwrap_or_default())?;
//! assert_eq!(
//!     serde_json::from_slice::<Value>(&patch)?,
//!     json!([{"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"}])
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod admission;
pub mod metrics;
pub mod overload;
pub mod providers;
pub mod review;
mod routes;
pub mod server;
pub mod tls;

pub use admission::{OnError, Reply, Settings, Webhook};
pub use metrics::{Endpoint, Metrics, Outcome, ProviderCall, Shed};
pub use overload::{Deadline, parse_go_duration};
pub use providers::Providers;
pub use server::{Config, Limits, MAX_BODY_BYTES, ServeError, Server};
pub use tls::{Certificate, TlsError, TlsFiles};
