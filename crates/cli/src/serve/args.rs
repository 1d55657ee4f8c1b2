//! The flags of `sartor serve`, and the webhook settings and certificate
//! files they give.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use sartor_api::Wildcard;
use sartor_webhook::{Limits, OnError, Settings, TlsFiles};

/// Serve the mutating admission webhook.
///
/// Admission (`POST /v1/mutate`, `POST /v1/validate`) is served over TLS on
/// --addr; `GET /metrics` (Prometheus) on --metrics-addr over plain HTTP;
/// `/healthz` and `/readyz` on both. Mutators come from --mutators, which is
/// watched: a change swaps in a new set, and a broken file keeps the last
/// good set (and says why in the log). The certificate files are watched too.
///
/// Without --mutators, sartor runs in cluster mode: it watches the mutator
/// objects (and Namespaces) through the usual kubeconfig or in-cluster
/// configuration, writes each mutator's status, and by default manages its
/// own serving certificate (--cert-mode). It turns ready once every watched
/// kind has been listed.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A mutator file or directory to serve and watch; repeat the flag for
    /// more. Without it, mutators come from the cluster.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", action = clap::ArgAction::Append)]
    pub(super) mutators: Vec<String>,
    /// A file or directory of Namespace objects, for mutators with a
    /// namespaceSelector; repeat the flag for more. Without it every namespace
    /// counts as unlabelled; with it a namespace not listed fails such a
    /// mutator's match (answered per --on-error).
    #[arg(long = "namespaces", value_name = "PATH", action = clap::ArgAction::Append)]
    pub(super) namespaces: Vec<String>,
    /// Address for admission over TLS.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub(super) addr: SocketAddr,
    /// Address for /metrics, /healthz and /readyz over plain HTTP.
    #[arg(long, default_value = "0.0.0.0:8888")]
    pub(super) metrics_addr: SocketAddr,
    /// PEM certificate chain to serve; reloaded when the file changes.
    /// Required with --mutators (or --self-signed) and with --cert-mode external.
    #[arg(long, value_name = "FILE", requires = "tls_key_file")]
    pub(super) tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file; reloaded when the file changes.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub(super) tls_key_file: Option<PathBuf>,
    /// PEM CA bundle; when given, clients must present a certificate it
    /// signed (the API server can be configured to).
    #[arg(long, value_name = "FILE")]
    pub(super) client_ca_file: Option<PathBuf>,
    /// Generate a CA and a serving certificate for localhost, 127.0.0.1 and
    /// ::1 into --cert-dir, and serve it; clients trust DIR/ca.crt.
    #[arg(long, conflicts_with_all = ["tls_cert_file", "tls_key_file"])]
    pub(super) self_signed: bool,
    /// Where --self-signed and --cert-mode managed write ca.crt, tls.crt and
    /// tls.key [default: a directory under the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    pub(super) cert_dir: Option<PathBuf>,
    /// Cluster mode: `managed` keeps a CA and serving certificate in
    /// --cert-secret, rotates them before they expire and injects the CA into
    /// the webhook configurations; `external` serves --tls-cert-file and
    /// --tls-key-file (cert-manager, say) and touches none of that.
    #[arg(long, value_enum, default_value_t = CertMode::Managed)]
    pub(super) cert_mode: CertMode,
    /// Cluster mode: the Secret (in --namespace) holding the managed certificate.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "sartor-webhook-server-cert"
    )]
    pub(super) cert_secret: String,
    /// Cluster mode: the webhook's Service; the managed certificate names
    /// SERVICE.NAMESPACE.svc.
    #[arg(long, value_name = "NAME", default_value = "sartor-webhook")]
    pub(super) webhook_service: String,
    /// Cluster mode: the MutatingWebhookConfiguration the CA is injected into
    /// and whose rules are derived (--webhook-rules).
    #[arg(long, value_name = "NAME", default_value = "sartor-mutating")]
    pub(super) mutating_webhook_configuration: String,
    /// Cluster mode: `derived` keeps the rules of the mutating webhook
    /// (mutation.sartor.dev) equal to what the enforced mutators can mutate,
    /// so the API server sends sartor nothing else; `pinned` leaves them as
    /// installed (and removes the derived match condition, which nothing
    /// would keep in step with the mutators). Empty rules (the emergency off
    /// switch) are left alone.
    #[arg(long, value_enum, default_value_t = WebhookRules::Derived)]
    pub(super) webhook_rules: WebhookRules,
    /// Cluster mode, with --webhook-rules derived: `derived` keeps a match
    /// condition (sartor-may-change) on the mutating webhook that is true
    /// only when an enforced mutator matches the request and would change
    /// the object, so the API server skips sartor for every other object
    /// (docs/operations.md, "Which requests reach sartor"); `none` removes
    /// it. The install's own match conditions are left alone.
    #[arg(long, value_enum, default_value_t = WebhookMatchCondition::Derived)]
    pub(super) webhook_match_condition: WebhookMatchCondition,
    /// Cluster mode: the ValidatingWebhookConfiguration the CA is injected into.
    #[arg(long, value_name = "NAME", default_value = "sartor-validating")]
    pub(super) validating_webhook_configuration: String,
    /// Cluster mode: how often the managed certificate, the injected CA and
    /// the derived webhook rules are checked, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) cert_check_interval: u64,
    /// Cluster mode: keep an audit of the objects already stored, as
    /// OpenReports reports (a `Report` named sartor-audit per namespace, a
    /// `ClusterReport` for cluster-scoped objects), scanning in full every
    /// this many seconds and when the mutators change, and following writes
    /// and deletions between scans through watches; only the replica holding
    /// the Lease `sartor-audit` writes. 0 (the default) keeps no audit: it
    /// needs `list` and `watch` on every kind the mutators can change, which
    /// the default install does not grant (see the operations guide).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub(super) audit_interval: u64,
    /// Cluster mode: this replica's name, the id of its entry in every
    /// mutator's status.byPod [default: $HOSTNAME].
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub(super) pod_name: Option<String>,
    /// Cluster mode: also serve Gatekeeper's mutators (mutations.gatekeeper.sh),
    /// for each kind whose CRD is installed when sartor starts. sartor's own
    /// object wins over Gatekeeper's of the same kind and name; Gatekeeper's
    /// objects are read, never written.
    #[arg(long)]
    pub(super) gatekeeper_compat: bool,
    /// Cluster mode: status writes per second at most (they are queued,
    /// newest first, and retried with backoff).
    #[arg(long, value_name = "N", default_value_t = 10.0)]
    pub(super) status_writes_per_second: f64,
    /// The namespace sartor runs in; objects in it are never mutated.
    #[arg(long, env = "POD_NAMESPACE", default_value = "sartor-system")]
    pub(super) namespace: String,
    /// sartor's service account; its own requests are never mutated.
    #[arg(long, default_value = "sartor")]
    pub(super) service_account: String,
    /// A namespace whose objects are never mutated (besides sartor's own):
    /// a name, or a glob with `*` at the start and/or end (`kube-*`,
    /// `*-system`) as in Gatekeeper's exempt namespaces; repeat the flag for
    /// more.
    #[arg(long = "exclude-namespace", value_name = "NAME", default_value = "kube-system", action = clap::ArgAction::Append)]
    pub(super) exclude_namespaces: Vec<Wildcard>,
    /// A namespace that may be given the exemption label
    /// `admission.sartor.dev/ignore` (a name, or a glob with `*` at the start
    /// and/or end); repeat the flag for more. The validating webhook denies
    /// adding or changing the label on any other namespace but sartor's own
    /// (--namespace); removing it is always allowed.
    #[arg(long = "exemptable-namespace", value_name = "NAME")]
    pub(super) exemptable_namespaces: Vec<Wildcard>,
    /// Annotate each object sartor changes with `sartor.dev/mutations`, the
    /// mutators that changed it: `KIND/NAME:GENERATION` (the mutator
    /// object's `metadata.generation`, 0 for one read from a file), sorted
    /// and joined by `, `, e.g. `Assign/always-pull:3, AssignImage/mirror:1`.
    #[arg(long)]
    pub(super) mutation_annotations: bool,
    /// Log each mutated request at info level: uid, kind, object, the
    /// mutators that changed it, passes, handler time (off by default, like
    /// Gatekeeper's --log-mutations: a log line per admission costs about a
    /// sixth of the webhook's throughput; they are at debug level otherwise).
    #[arg(long)]
    pub(super) log_mutations: bool,
    /// What to answer for an object that cannot be mutated (not converging,
    /// a setter error): admit it unmutated with a warning, or deny it.
    #[arg(long, value_enum, default_value_t = OnError::Allow)]
    pub(super) on_error: OnError,
    /// How long after an admission request arrives external data providers
    /// may still be answering it, in milliseconds, so that sartor answers
    /// per each mutator's failurePolicy; never past the time the request's
    /// answer is due (see --request-timeout), and a provider's own
    /// `timeout` can only shorten it.
    #[arg(long, value_name = "MS", default_value_t = 800, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) provider_deadline_ms: u64,
    /// How long the API server waits for an answer when a request does not
    /// say, as a Go duration (`10s`, `1m0s`, `500ms`): the API server writes
    /// its webhook's timeoutSeconds on every call (`?timeout=1s`; the
    /// install's is 1 s for /v1/mutate and 3 s for /v1/validate), so this
    /// is for other callers. sartor answers every admission request 100 ms
    /// (or a tenth of its timeout, if less) before its deadline: when it
    /// cannot (no slot free in time, the body still arriving), with a 503
    /// that makes the API server apply the webhook's failurePolicy.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(super) request_timeout: Duration,
    /// Admission requests worked on at once; more wait for a slot (probes
    /// and /metrics never do) [default: 64 per available core, 64 to 1024].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(super) max_in_flight: Option<u64>,
    /// Admission requests waiting for a slot at most, each only until its
    /// deadline; more are answered at once with a 503 (0: none wait)
    /// [default: 8 times --max-in-flight].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub(super) max_queued: Option<u64>,
    /// How long an external data provider's answer for a key is reused, in
    /// seconds (0: ask every time). Gatekeeper's cache has the same default,
    /// but its mutation does not use it.
    #[arg(long, value_name = "SECONDS", default_value_t = 180)]
    pub(super) provider_cache_ttl: u64,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(super) log_format: LogFormat,
    /// How often --mutators and the certificate files are checked for
    /// changes, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    pub(super) poll_interval_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum CertMode {
    Managed,
    External,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum WebhookRules {
    Derived,
    Pinned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum WebhookMatchCondition {
    Derived,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum LogFormat {
    Text,
    Json,
}

impl ServeArgs {
    /// The certificate files given on the command line, if any.
    pub(super) fn given_tls(&self) -> Option<TlsFiles> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.client_ca_file.clone(),
            }),
            _ => None,
        }
    }

    /// The limits from the flags; the rest as [`Limits::default`].
    pub(super) fn limits(&self) -> Limits {
        let defaults = Limits::default();
        let count = |flag: Option<u64>, default: usize| {
            flag.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
        };
        let max_in_flight = count(self.max_in_flight, defaults.max_in_flight);
        Limits {
            tls_reload_interval: Duration::from_millis(self.poll_interval_ms),
            request_timeout: self.request_timeout,
            max_in_flight,
            max_queued: count(self.max_queued, max_in_flight.saturating_mul(8)),
            ..defaults
        }
    }

    /// The skip rules and error policy from the flags.
    pub(super) fn settings(&self) -> Settings {
        let mut settings = Settings::new(&self.namespace, &self.service_account);
        // The flag's default holds kube-system; given, the flags say it all.
        settings.exclusions.namespaces = self.exclude_namespaces.clone();
        settings.mutation_annotations = self.mutation_annotations;
        settings.log_mutations = self.log_mutations;
        settings.exemptable_namespaces = self.exemptable_namespaces.clone();
        settings.on_error = self.on_error;
        settings.provider_deadline = std::time::Duration::from_millis(self.provider_deadline_ms);
        settings.provider_cache_ttl = std::time::Duration::from_secs(self.provider_cache_ttl);
        settings
    }
}

/// A Go duration, as the API server writes `?timeout=` (`10s`, `1m0s`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    sartor_webhook::parse_go_duration(text)
        .ok_or_else(|| format!("not a duration: {text:?} (write it as 10s, 1m0s or 500ms)"))
}
