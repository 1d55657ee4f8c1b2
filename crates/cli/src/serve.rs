//! `sartor serve`: the admission webhook, fed either from a directory of
//! mutator files that it watches (the mode for a laptop and for GitOps setups
//! that sync a git repository into a volume) or, without `--mutators`, from
//! the cluster's mutator objects (sartor-controller).

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use sartor_api::Wildcard;
use sartor_controller::{
    CertManager, CertOptions, FileWatch, MutatorWatch, NamespaceCache, RulesWriter, StatusLimits,
    StatusWriter,
};
use sartor_webhook::{
    Config, Fixed, Limits, Metrics, Namespaces, OnError, SelfSigned, Server, Settings, TlsFiles,
    Unlabelled, Webhook,
};

use crate::{Outcome, load};

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
    mutators: Vec<String>,
    /// A file or directory of Namespace objects, for mutators with a
    /// namespaceSelector; repeat the flag for more. Without it every namespace
    /// counts as unlabelled; with it a namespace not listed fails such a
    /// mutator's match (answered per --on-error).
    #[arg(long = "namespaces", value_name = "PATH", action = clap::ArgAction::Append)]
    namespaces: Vec<String>,
    /// Address for admission over TLS.
    #[arg(long, default_value = "0.0.0.0:8443")]
    addr: SocketAddr,
    /// Address for /metrics, /healthz and /readyz over plain HTTP.
    #[arg(long, default_value = "0.0.0.0:8888")]
    metrics_addr: SocketAddr,
    /// PEM certificate chain to serve; reloaded when the file changes.
    /// Required with --mutators (or --self-signed) and with --cert-mode external.
    #[arg(long, value_name = "FILE", requires = "tls_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file; reloaded when the file changes.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_key_file: Option<PathBuf>,
    /// PEM CA bundle; when given, clients must present a certificate it
    /// signed (the API server can be configured to).
    #[arg(long, value_name = "FILE")]
    client_ca_file: Option<PathBuf>,
    /// Generate a CA and a serving certificate for localhost, 127.0.0.1 and
    /// ::1 into --cert-dir, and serve it; clients trust DIR/ca.crt.
    #[arg(long, conflicts_with_all = ["tls_cert_file", "tls_key_file"])]
    self_signed: bool,
    /// Where --self-signed and --cert-mode managed write ca.crt, tls.crt and
    /// tls.key [default: a directory under the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    cert_dir: Option<PathBuf>,
    /// Cluster mode: `managed` keeps a CA and serving certificate in
    /// --cert-secret, rotates them before they expire and injects the CA into
    /// the webhook configurations; `external` serves --tls-cert-file and
    /// --tls-key-file (cert-manager, say) and touches none of that.
    #[arg(long, value_enum, default_value_t = CertMode::Managed)]
    cert_mode: CertMode,
    /// Cluster mode: the Secret (in --namespace) holding the managed certificate.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "sartor-webhook-server-cert"
    )]
    cert_secret: String,
    /// Cluster mode: the webhook's Service; the managed certificate names
    /// SERVICE.NAMESPACE.svc.
    #[arg(long, value_name = "NAME", default_value = "sartor-webhook")]
    webhook_service: String,
    /// Cluster mode: the MutatingWebhookConfiguration the CA is injected into
    /// and whose rules are derived (--webhook-rules).
    #[arg(long, value_name = "NAME", default_value = "sartor-mutating")]
    mutating_webhook_configuration: String,
    /// Cluster mode: `derived` keeps the rules of the mutating webhook
    /// (mutation.sartor.dev) equal to what the enforced mutators can mutate,
    /// so the API server sends sartor nothing else; `pinned` leaves them as
    /// installed. Empty rules (the emergency off switch) are left alone.
    #[arg(long, value_enum, default_value_t = WebhookRules::Derived)]
    webhook_rules: WebhookRules,
    /// Cluster mode: the ValidatingWebhookConfiguration the CA is injected into.
    #[arg(long, value_name = "NAME", default_value = "sartor-validating")]
    validating_webhook_configuration: String,
    /// Cluster mode: how often the managed certificate, the injected CA and
    /// the derived webhook rules are checked, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    cert_check_interval: u64,
    /// Cluster mode: this replica's name, the id of its entry in every
    /// mutator's status.byPod [default: $HOSTNAME].
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pod_name: Option<String>,
    /// Cluster mode: also serve Gatekeeper's mutators (mutations.gatekeeper.sh),
    /// for each kind whose CRD is installed when sartor starts. sartor's own
    /// object wins over Gatekeeper's of the same kind and name; Gatekeeper's
    /// objects are read, never written.
    #[arg(long)]
    gatekeeper_compat: bool,
    /// Cluster mode: status writes per second at most (they are queued,
    /// newest first, and retried with backoff).
    #[arg(long, value_name = "N", default_value_t = 10.0)]
    status_writes_per_second: f64,
    /// The namespace sartor runs in; objects in it are never mutated.
    #[arg(long, env = "POD_NAMESPACE", default_value = "sartor-system")]
    namespace: String,
    /// sartor's service account; its own requests are never mutated.
    #[arg(long, default_value = "sartor")]
    service_account: String,
    /// A namespace whose objects are never mutated (besides sartor's own):
    /// a name, or a glob with `*` at the start and/or end (`kube-*`,
    /// `*-system`) as in Gatekeeper's exempt namespaces; repeat the flag for
    /// more.
    #[arg(long = "exclude-namespace", value_name = "NAME", default_value = "kube-system", action = clap::ArgAction::Append)]
    exclude_namespaces: Vec<Wildcard>,
    /// A namespace that may be given the exemption label
    /// `admission.sartor.dev/ignore` (a name, or a glob with `*` at the start
    /// and/or end); repeat the flag for more. The validating webhook denies
    /// adding or changing the label on any other namespace but sartor's own
    /// (--namespace); removing it is always allowed.
    #[arg(long = "exemptable-namespace", value_name = "NAME")]
    exemptable_namespaces: Vec<Wildcard>,
    /// Annotate each object sartor changes with `sartor.dev/mutations`, the
    /// mutators that changed it: `KIND/NAME:GENERATION` (the mutator
    /// object's `metadata.generation`, 0 for one read from a file), sorted
    /// and joined by `, `, e.g. `Assign/always-pull:3, AssignImage/mirror:1`.
    #[arg(long)]
    mutation_annotations: bool,
    /// What to answer for an object that cannot be mutated (not converging,
    /// a setter error): admit it unmutated with a warning, or deny it.
    #[arg(long, value_enum, default_value_t = OnErrorArg::Allow)]
    on_error: OnErrorArg,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// How often --mutators and the certificate files are checked for
    /// changes, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    poll_interval_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnErrorArg {
    Allow,
    Deny,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CertMode {
    Managed,
    External,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WebhookRules {
    Derived,
    Pinned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Runs `sartor serve` until SIGTERM or Ctrl-C.
///
/// # Errors
/// When the certificate, the Namespace files or the addresses are unusable.
pub fn run(args: &ServeArgs) -> anyhow::Result<Outcome> {
    init_logs(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))?;
    Ok(Outcome::Ok)
}

async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    if args.mutators.is_empty() {
        serve_cluster(args).await
    } else {
        serve_files(args).await
    }
}

/// File mode: mutators from --mutators, namespaces from --namespaces.
async fn serve_files(args: &ServeArgs) -> anyhow::Result<()> {
    if args.mutators.iter().any(|path| path == "-") {
        anyhow::bail!("--mutators -: sartor serve watches files; standard input cannot be watched");
    }
    let paths: Vec<PathBuf> = args.mutators.iter().map(PathBuf::from).collect();
    let tls = match given_tls(args) {
        Some(tls) => tls,
        None if args.self_signed => {
            let dir = args
                .cert_dir
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("sartor-self-signed"));
            let names = ["localhost", "127.0.0.1", "::1"];
            let files = SelfSigned::generate("sartor", &names)
                .and_then(|generated| generated.write(&dir))
                .context("--self-signed")?;
            tracing::info!(ca = %files.ca.display(), "generated a self-signed certificate; clients trust this CA bundle");
            TlsFiles {
                cert: files.cert,
                key: files.key,
                client_ca: args.client_ca_file.clone(),
            }
        }
        None => anyhow::bail!(
            "--mutators needs a certificate: --tls-cert-file and --tls-key-file, or --self-signed"
        ),
    };
    let namespaces: Box<dyn Namespaces> = if args.namespaces.is_empty() {
        Box::new(Unlabelled::default())
    } else {
        let (namespaces, errors) = load::namespaces(&args.namespaces);
        if !errors.is_empty() {
            anyhow::bail!("--namespaces: {}", errors.join("; "));
        }
        Box::new(Fixed::new(namespaces.into_values()))
    };
    let webhook = Arc::new(Webhook::new(
        settings(args),
        namespaces,
        Arc::new(Metrics::new()),
    ));
    let server = bind(args, tls, webhook.clone()).await?;
    let watch = FileWatch::new(paths, webhook);
    let poll = Duration::from_millis(args.poll_interval_ms);
    std::thread::Builder::new()
        .name("mutator-watch".to_string())
        .spawn(move || watch.run(poll))
        .context("starting the mutator watcher")?;
    server.run(shutdown_signal()).await;
    Ok(())
}

/// Cluster mode: mutators and namespaces from the API server, status written
/// back, the serving certificate managed unless --cert-mode external.
async fn serve_cluster(args: &ServeArgs) -> anyhow::Result<()> {
    if !args.namespaces.is_empty() {
        anyhow::bail!(
            "--namespaces goes with --mutators; in cluster mode namespaces come from the API server"
        );
    }
    if args.self_signed {
        anyhow::bail!(
            "--self-signed goes with --mutators; in cluster mode use --cert-mode managed (the default)"
        );
    }
    if args.status_writes_per_second.is_nan() || args.status_writes_per_second <= 0.0 {
        anyhow::bail!("--status-writes-per-second must be more than 0");
    }
    let pod = args
        .pod_name
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .filter(|name| !name.is_empty())
        .context("cluster mode needs this replica's name: --pod-name, $POD_NAME or $HOSTNAME")?;
    // The client error's own sources repeat its message; print it once.
    let client = kube::Client::try_default().await.map_err(|error| {
        anyhow::anyhow!(
            "no --mutators, so mutators come from the cluster, but no API server is configured \
             (in-cluster service account or kubeconfig: $KUBECONFIG, ~/.kube/config): {error}"
        )
    })?;
    let (tls, certs) = match args.cert_mode {
        CertMode::External => match given_tls(args) {
            Some(tls) => (tls, None),
            None => anyhow::bail!("--cert-mode external needs --tls-cert-file and --tls-key-file"),
        },
        CertMode::Managed => {
            if args.tls_cert_file.is_some() {
                anyhow::bail!(
                    "--tls-cert-file and --tls-key-file go with --cert-mode external; \
                     --cert-mode managed (the default) writes its own into --cert-dir"
                );
            }
            let dir = args
                .cert_dir
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("sartor-certs"));
            let mut options = CertOptions::new(&args.namespace, dir.clone());
            options.secret.clone_from(&args.cert_secret);
            options.service.clone_from(&args.webhook_service);
            options
                .mutating
                .clone_from(&args.mutating_webhook_configuration);
            options
                .validating
                .clone_from(&args.validating_webhook_configuration);
            let manager = CertManager::new(client.clone(), options);
            if !first_certificate(&manager).await {
                return Ok(());
            }
            let tls = TlsFiles {
                cert: dir.join("tls.crt"),
                key: dir.join("tls.key"),
                client_ca: args.client_ca_file.clone(),
            };
            (tls, Some(manager))
        }
    };
    let namespaces = NamespaceCache::new(client.clone());
    let webhook = Arc::new(Webhook::new(
        settings(args),
        Box::new(namespaces.clone()),
        Arc::new(Metrics::new()),
    ));
    let server = bind(args, tls, webhook.clone()).await?;
    let listed = namespaces.listed();
    tokio::spawn(namespaces.run());
    let limits = StatusLimits {
        per_second: args.status_writes_per_second,
        ..StatusLimits::default()
    };
    let (writer, queue) = StatusWriter::new(client.clone(), &pod, limits);
    let writer = tokio::spawn(writer.run());
    let stopping = queue.clone();
    let watched = sartor_controller::watched(&client, args.gatekeeper_compat).await;
    tracing::info!(
        pod,
        kinds = %watched.iter().map(|w| format!("{}.{}", w.resource.plural, w.resource.group)).collect::<Vec<_>>().join(", "),
        "watching mutators"
    );
    if args.webhook_rules == WebhookRules::Derived {
        let rules = RulesWriter::new(
            client.clone(),
            webhook.metrics().clone(),
            &args.mutating_webhook_configuration,
            MUTATING_WEBHOOK,
        );
        tokio::spawn(rules.run(
            webhook.subscribe(),
            Duration::from_secs(args.cert_check_interval),
        ));
    }
    let watch = MutatorWatch {
        client,
        webhook,
        pod,
        watched,
    };
    tokio::spawn(watch.run(listed, queue));
    if let Some(manager) = certs {
        tokio::spawn(manager.run(Duration::from_secs(args.cert_check_interval)));
    }
    server.run(shutdown_signal()).await;
    // A gone replica's status entries would read as enforcement that is not
    // there; withdraw them, within what is left of the grace period.
    stopping.withdraw_all();
    match tokio::time::timeout(STATUS_WITHDRAW_TIMEOUT, writer).await {
        Ok(_) => tracing::info!("status entries withdrawn"),
        Err(_) => tracing::warn!(
            "status entries not all withdrawn in time; they stay until a replica with this name replaces them"
        ),
    }
    Ok(())
}

/// The webhook of the MutatingWebhookConfiguration whose rules are derived,
/// as the install names it.
const MUTATING_WEBHOOK: &str = "mutation.sartor.dev";

/// How long a stopping replica spends withdrawing its status entries (after
/// up to 20 s of draining requests, inside the install's 30 s grace period).
const STATUS_WITHDRAW_TIMEOUT: Duration = Duration::from_secs(3);

/// Makes the first managed certificate, retrying until it works; `false`
/// when a shutdown signal came first.
async fn first_certificate(manager: &CertManager) -> bool {
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        match manager.reconcile().await {
            Ok(action) => {
                tracing::info!(?action, secret = %manager.options().secret, "serving certificate ready");
                return true;
            }
            Err(error) => {
                tracing::error!(%error, "cannot set up the serving certificate; retrying in 5 s");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
            () = &mut shutdown => return false,
        }
    }
}

/// The certificate files given on the command line, if any.
fn given_tls(args: &ServeArgs) -> Option<TlsFiles> {
    match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.client_ca_file.clone(),
        }),
        _ => None,
    }
}

/// The skip rules and error policy from the flags.
fn settings(args: &ServeArgs) -> Settings {
    let mut settings = Settings::new(&args.namespace, &args.service_account);
    // The flag's default holds kube-system; given, the flags say it all.
    settings.excluded_namespaces = args.exclude_namespaces.clone();
    settings.mutation_annotations = args.mutation_annotations;
    settings.exemptable_namespaces = args.exemptable_namespaces.clone();
    settings.on_error = match args.on_error {
        OnErrorArg::Allow => OnError::Allow,
        OnErrorArg::Deny => OnError::Deny,
    };
    settings
}

/// Binds both listeners and says where.
async fn bind(args: &ServeArgs, tls: TlsFiles, webhook: Arc<Webhook>) -> anyhow::Result<Server> {
    let config = Config {
        addr: args.addr,
        metrics_addr: args.metrics_addr,
        tls,
        limits: Limits {
            tls_reload_interval: Duration::from_millis(args.poll_interval_ms),
            ..Limits::default()
        },
    };
    let server = Server::bind(&config, webhook).await?;
    tracing::info!(
        addr = %server.addr(),
        metrics_addr = %server.metrics_addr(),
        "listening"
    );
    Ok(server)
}

/// Completes on SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => tracing::info!("interrupted"),
        () = term => tracing::info!("SIGTERM received"),
    }
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}
