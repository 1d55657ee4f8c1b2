//! `sartor serve`: the admission webhook, fed either from a directory of
//! mutator files that it watches (the mode for a laptop and for GitOps setups
//! that sync a git repository into a volume) or, without `--mutators`, from
//! the cluster's mutator objects (sartor-controller).
//!
//! `args` holds the flags, `files` and `cluster` wire the two modes, `signal`
//! and `logs` the process around them.

mod args;
mod cluster;
mod files;
mod logs;
pub(crate) mod signal;

use std::sync::Arc;

use anyhow::Context as _;
use prometheus_client::registry::Registry;
use sartor_controller::Feed;
use sartor_state::Namespaces;
use sartor_webhook::{Config, Metrics, Providers, Server, TlsFiles, Webhook};

pub use self::args::ServeArgs;
use sartor_offline::Exit;

/// Runs `sartor serve` until SIGTERM or Ctrl-C.
///
/// # Errors
/// When the certificate, the Namespace files or the addresses are unusable.
pub fn run(args: &ServeArgs) -> anyhow::Result<Exit> {
    logs::init(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))?;
    Ok(Exit::Ok)
}

async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    if args.mutators.is_empty() {
        cluster::serve(args).await
    } else {
        files::serve(args).await
    }
}

/// The process's parts, wired: one metrics registry (the controller's
/// metrics and the webhook's, rendered on the metrics port), the published
/// state with the webhook's provider clients behind it, and the webhook
/// reading that state. The source of mutators writes into the feed.
struct Wired {
    webhook: Arc<Webhook>,
    feed: Feed,
}

fn wire(args: &ServeArgs, namespaces: Box<dyn Namespaces>) -> Wired {
    let settings = args.settings();
    let mut registry = Registry::with_prefix("sartor");
    let metrics = Arc::new(sartor_controller::Metrics::new(&mut registry));
    let webhook_metrics = Arc::new(Metrics::with_registry(registry));
    let providers = Arc::new(Providers::new(
        settings.provider_cache_ttl,
        webhook_metrics.clone(),
    ));
    let (publisher, state) = sartor_state::channel(providers.clone());
    let webhook = Arc::new(Webhook::new(
        settings,
        state,
        namespaces,
        providers,
        webhook_metrics,
    ));
    Wired {
        webhook,
        feed: Feed::new(publisher, metrics),
    }
}

/// Binds both listeners and says where.
async fn bind(args: &ServeArgs, tls: TlsFiles, webhook: Arc<Webhook>) -> anyhow::Result<Server> {
    let config = Config {
        addr: args.addr,
        metrics_addr: args.metrics_addr,
        tls,
        limits: args.limits(),
    };
    let server = Server::bind(&config, webhook).await?;
    tracing::info!(
        addr = %server.addr(),
        metrics_addr = %server.metrics_addr(),
        max_in_flight = config.limits.max_in_flight,
        max_queued = config.limits.max_queued,
        "listening"
    );
    Ok(server)
}
