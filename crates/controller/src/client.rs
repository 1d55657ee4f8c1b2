//! The cluster client, made as kubectl makes one.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Neither an in-cluster service account nor a kubeconfig was found.
    /// The inner error's own sources repeat its message: said once.
    #[error(
        "no API server is configured (in-cluster service account or kubeconfig: $KUBECONFIG, \
         ~/.kube/config): {0}"
    )]
    NotConfigured(kube::config::InferConfigError),
    /// The kubeconfig could not be read.
    #[error("reading the kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    /// The context asked for is not usable.
    #[error("--context {context}")]
    Context {
        /// The context asked for.
        context: String,
        /// Why it is not usable.
        #[source]
        error: kube::config::KubeconfigError,
    },
    /// The configuration found does not make a client.
    #[error("making the API client")]
    Client(#[source] kube::Error),
}

/// A client as kubectl makes one: the in-cluster service account or the
/// kubeconfig (`$KUBECONFIG`, `~/.kube/config`), its `context` when given
/// (`--context`), else its current one.
///
/// # Errors
/// No configuration was found, the kubeconfig or the context cannot be
/// used, or the client cannot be built from them.
pub async fn client(context: Option<&str>) -> Result<Client, ClientError> {
    let config = match context {
        None => Config::infer().await.map_err(ClientError::NotConfigured)?,
        Some(context) => {
            let kubeconfig = Kubeconfig::read().map_err(ClientError::Kubeconfig)?;
            let options = KubeConfigOptions {
                context: Some(context.to_string()),
                ..KubeConfigOptions::default()
            };
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|error| ClientError::Context {
                    context: context.to_string(),
                    error,
                })?
        }
    };
    Client::try_from(config).map_err(ClientError::Client)
}
