//! Cluster mode: mutators and namespaces from the API server, status
//! written back, the serving certificate and the webhook rules managed.

use std::time::Duration;

use anyhow::Context as _;
use sartor_api::Exclusions;
use sartor_controller::audit::InClusterAudit;
use sartor_controller::{
    CertManager, CertOptions, LeaseHolder, MutatorWatch, NamespaceCache, ProviderWatch,
    RulesWriter, StatusLimits, StatusWriter,
};
use sartor_webhook::TlsFiles;

use super::ServeArgs;
use super::args::{CertMode, WebhookMatchCondition, WebhookRules};
use super::signal::shutdown_signal;

/// Cluster mode: mutators and namespaces from the API server, status written
/// back, the serving certificate managed unless --cert-mode external.
pub(super) async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
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
        CertMode::External => match args.given_tls() {
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
    let wired = super::wire(args, Box::new(namespaces.clone()));
    let server = super::bind(args, tls, wired.webhook.clone()).await?;
    let (providers_listed, providers_listed_rx) = tokio::sync::watch::channel(false);
    let listed = both_listed(namespaces.listed(), providers_listed_rx);
    tokio::spawn(namespaces.clone().run());
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
    let rules = RulesWriter::new(
        client.clone(),
        wired.feed.metrics().clone(),
        &args.mutating_webhook_configuration,
        MUTATING_WEBHOOK,
    );
    let every = Duration::from_secs(args.cert_check_interval);
    match args.webhook_rules {
        WebhookRules::Derived => tokio::spawn(
            rules
                .deriving_condition(args.webhook_match_condition == WebhookMatchCondition::Derived)
                .run(wired.feed.state().subscribe(), every),
        ),
        WebhookRules::Pinned => tokio::spawn(rules.run_pinned(every)),
    };
    // Turns true at SIGTERM, before the drain: what must hand over to
    // another replica (the audit's Lease) does so at once.
    let (stopping_tx, stopping_rx) = tokio::sync::watch::channel(false);
    let mut lease_task = None;
    if args.audit_interval > 0 {
        let mut stop = stopping_rx.clone();
        let (leader, task) = LeaseHolder::new(
            client.clone(),
            &args.namespace,
            AUDIT_LEASE,
            &pod,
            AUDIT_LEASE_DURATION,
        )
        .run(async move {
            let _ = stop.wait_for(|stopping| *stopping).await;
        });
        lease_task = Some(task);
        tracing::info!(
            interval_seconds = args.audit_interval,
            lease = AUDIT_LEASE,
            "auditing stored objects into OpenReports reports"
        );
        tokio::spawn(
            InClusterAudit {
                client: client.clone(),
                feed: wired.feed.clone(),
                exclusions: Exclusions::new(&args.namespace, args.exclude_namespaces.clone()),
                interval: Duration::from_secs(args.audit_interval),
                leader,
                namespaces: namespaces.clone(),
            }
            .run(),
        );
    }
    tokio::spawn(
        ProviderWatch {
            client: client.clone(),
            feed: wired.feed.clone(),
            listed: providers_listed,
        }
        .run(),
    );
    let watch = MutatorWatch {
        client,
        feed: wired.feed,
        pod,
        watched,
    };
    tokio::spawn(watch.run(listed, queue));
    if let Some(manager) = certs {
        tokio::spawn(manager.run(Duration::from_secs(args.cert_check_interval)));
    }
    server
        .run(async move {
            shutdown_signal().await;
            let _ = stopping_tx.send(true);
            // A gone replica's status entries would read as enforcement that
            // is not there. Withdrawn from SIGTERM, beside the drain (the
            // endpoint has left by now), so a long drain cannot leave them
            // to the kill at the end of the grace period.
            stopping.withdraw_all();
        })
        .await;
    drop(stopping_rx);
    // Both have run since SIGTERM; what is left of them gets one bound after
    // the drain, inside the grace period (5 s pause + 20 s drain at most +
    // 3 s).
    let lease = async {
        if let Some(task) = lease_task {
            let _ = task.await;
        }
    };
    let (lease, withdrawn) = tokio::join!(
        tokio::time::timeout(STATUS_WITHDRAW_TIMEOUT, lease),
        tokio::time::timeout(STATUS_WITHDRAW_TIMEOUT, writer),
    );
    if lease.is_err() {
        tracing::warn!("the audit's lease was not released in time; it expires on its own");
    }
    match withdrawn {
        Ok(_) => tracing::info!("status entries withdrawn"),
        Err(_) => tracing::warn!(
            "status entries not all withdrawn in time; they stay until a replica with this name replaces them"
        ),
    }
    Ok(())
}

/// A flag that turns `true` once both `a` and `b` have; kept open as long
/// as it is watched.
fn both_listed(
    mut a: tokio::sync::watch::Receiver<bool>,
    mut b: tokio::sync::watch::Receiver<bool>,
) -> tokio::sync::watch::Receiver<bool> {
    let (both, listed) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if a.wait_for(|listed| *listed).await.is_ok() && b.wait_for(|listed| *listed).await.is_ok()
        {
            both.send_replace(true);
        }
        both.closed().await;
    });
    listed
}

/// The Lease the replicas hold to write the audit's reports.
const AUDIT_LEASE: &str = "sartor-audit";

/// How long the audit's Lease holds from each renewal (renewed every third).
const AUDIT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The webhook of the MutatingWebhookConfiguration whose rules are derived,
/// as the install names it.
const MUTATING_WEBHOOK: &str = "mutation.sartor.dev";

/// How long a stopping replica still waits, once the drain is over, for its
/// status entries' withdrawal and the audit Lease's release (both begun at
/// SIGTERM): 5 s pause + up to 20 s of drain + this, inside the install's
/// 30 s grace period.
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
