//! The cluster client, made as kubectl makes one.

use std::path::{Path, PathBuf};

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
    /// The kubeconfig file given could not be read.
    #[error("--kubeconfig {}", .path.display())]
    KubeconfigFile {
        /// The file given.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        error: kube::config::KubeconfigError,
    },
    /// The context asked for is not usable.
    #[error("--context {context}")]
    Context {
        /// The context asked for.
        context: String,
        /// Why it is not usable.
        #[source]
        error: kube::config::KubeconfigError,
    },
    /// The kubeconfig's current context is not usable.
    #[error("the kubeconfig's current context")]
    CurrentContext(#[source] kube::config::KubeconfigError),
    /// The configuration found does not make a client.
    #[error("making the API client")]
    Client(#[source] kube::Error),
}

/// A client as kubectl makes one: the in-cluster service account or the
/// kubeconfig (`$KUBECONFIG`, `~/.kube/config`, or `kubeconfig` when given:
/// `--kubeconfig`), its `context` when given (`--context`), else its
/// current one.
///
/// # Errors
/// No configuration was found, the kubeconfig or the context cannot be
/// used, or the client cannot be built from them.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ClientError> {
    let config = match (kubeconfig, context) {
        (None, None) => Config::infer().await.map_err(ClientError::NotConfigured)?,
        (file, context) => {
            let kubeconfig = match file {
                Some(path) => {
                    Kubeconfig::read_from(path).map_err(|error| ClientError::KubeconfigFile {
                        path: path.to_path_buf(),
                        error,
                    })?
                }
                None => Kubeconfig::read().map_err(ClientError::Kubeconfig)?,
            };
            let options = KubeConfigOptions {
                context: context.map(str::to_string),
                ..KubeConfigOptions::default()
            };
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|error| match context {
                    Some(context) => ClientError::Context {
                        context: context.to_string(),
                        error,
                    },
                    None => ClientError::CurrentContext(error),
                })?
        }
    };
    Client::try_from(config).map_err(ClientError::Client)
}
