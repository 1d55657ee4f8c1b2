//! `sartor playground`: the preview, lint and export in a browser page.

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context as _;
use clap::Args;
use sartor_offline::Exit;

/// Serve a page to write mutators in and see, as you type, what `sartor
/// mutate` (the objects, a diff, the explain trace), `sartor lint` and
/// `sartor export map` print for them. The page is in the binary: nothing
/// is fetched, and what you type stays on this machine (a share link
/// carries it in its fragment, which browsers never send).
///
/// Listens on 127.0.0.1 only, unless `--listen` says otherwise.
#[derive(Debug, Args)]
pub struct PlaygroundArgs {
    /// The port on 127.0.0.1 to serve the page on (0: any free one).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Listen on ADDRESS:PORT instead (for a container or another
    /// machine's browser): anyone who reaches it can use the playground.
    #[arg(long, value_name = "ADDRESS:PORT", conflicts_with = "port")]
    listen: Option<SocketAddr>,
}

/// Runs `sartor playground` until Ctrl-C or SIGTERM.
///
/// # Errors
/// The address cannot be bound.
pub fn run(args: &PlaygroundArgs) -> anyhow::Result<Exit> {
    let addr = args
        .listen
        .unwrap_or_else(|| SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let listening = sartor_playground::listen(addr)
            .await
            .with_context(|| format!("listening on {addr} (--port, --listen)"))?;
        let bound = listening.addr();
        if !bound.ip().is_loopback() {
            eprintln!(
                "warning: listening on {bound}, beyond this machine's loopback: anyone who reaches it can use the playground"
            );
        }
        eprintln!("sartor playground: http://{bound}/ (Ctrl-C to stop)");
        tokio::select! {
            served = listening.serve() => served.context("serving the playground")?,
            () = crate::serve::signal::shutdown_signal() => {}
        }
        Ok(Exit::Ok)
    })
}
