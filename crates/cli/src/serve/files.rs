//! File mode: mutators from --mutators, watched; namespaces from --namespaces.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use sartor_controller::{FileWatch, SelfSigned};
use sartor_state::{Fixed, Namespaces, Unlabelled};
use sartor_webhook::TlsFiles;

use super::ServeArgs;
use super::signal::shutdown_signal;

/// File mode: mutators from --mutators, namespaces from --namespaces.
pub(super) async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    if args.mutators.iter().any(|path| path == "-") {
        anyhow::bail!("--mutators -: sartor serve watches files; standard input cannot be watched");
    }
    let paths: Vec<PathBuf> = args.mutators.iter().map(PathBuf::from).collect();
    let tls = match args.given_tls() {
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
        let (namespaces, errors) = sartor_offline::namespaces(&args.namespaces);
        if !errors.is_empty() {
            anyhow::bail!("--namespaces: {}", errors.join("; "));
        }
        Box::new(Fixed::new(namespaces.into_values()))
    };
    let wired = super::wire(args, namespaces);
    let server = super::bind(args, tls, wired.webhook).await?;
    let watch = FileWatch::new(paths, wired.feed);
    let poll = Duration::from_millis(args.poll_interval_ms);
    std::thread::Builder::new()
        .name("mutator-watch".to_string())
        .spawn(move || watch.run(poll))
        .context("starting the mutator watcher")?;
    server.run(shutdown_signal()).await;
    Ok(())
}
