//! External data offline: answers recorded in files (`--provider-answers`,
//! a test case's `providers`), or, only when asked (`--call-providers`), the
//! providers themselves over the network.
//!
//! A recording maps each Provider's name to what it answered, a
//! `ProviderResponse` exactly as the provider sends it (so `curl` output can
//! be pasted in):
//!
//! ```yaml
//! providers:
//!   tag-to-digest:
//!     apiVersion: externaldata.gatekeeper.sh/v1beta1
//!     kind: ProviderResponse
//!     response:
//!       idempotent: true
//!       items:
//!       - key: nginx:1.27
//!         value: nginx@sha256:6784...
//!       - key: redis:7
//!         error: tag not found
//! ```
//!
//! A key the mutators ask for that the recording lacks is an error naming
//! the provider and the key, never a silent `failurePolicy`: a preview that
//! quietly took the default would not be what the cluster does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sartor_api::{LoadedProvider, Provider, ProviderResponse};
use sartor_engine::{Answers, Asks};
use sartor_webhook::{Metrics, Providers};
use serde::Deserialize;

/// How long `--call-providers` waits for every provider of one object.
const CALL_DEADLINE: Duration = Duration::from_secs(10);

/// A file of recorded answers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recording {
    /// Each provider's answer, by the Provider's name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderResponse>,
}

/// Where external data comes from offline.
pub enum External {
    /// Recorded answers, by provider.
    Recorded(BTreeMap<String, ProviderResponse>),
    /// The providers themselves (`--call-providers`).
    Network {
        providers: Box<Providers>,
        runtime: tokio::runtime::Runtime,
    },
}

impl std::fmt::Debug for External {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            External::Recorded(recorded) => f
                .debug_tuple("Recorded")
                .field(&recorded.keys().collect::<Vec<_>>())
                .finish(),
            External::Network { providers, .. } => f
                .debug_struct("Network")
                .field("providers", providers)
                .finish_non_exhaustive(),
        }
    }
}

// === impl External ===

impl External {
    /// The answers recorded in `paths` (later files win for a provider).
    ///
    /// # Errors
    /// A message naming the file that cannot be read or is not a recording.
    pub fn recorded(paths: &[String]) -> Result<External, String> {
        let mut recorded = BTreeMap::new();
        for path in paths {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            let recording: Recording = serde_yaml::from_str(&text)
                .map_err(|e| format!("{path}: not a recording of provider answers: {e}"))?;
            recorded.extend(recording.providers);
        }
        Ok(External::Recorded(recorded))
    }

    /// The providers of the mutator set, called over the network (without a
    /// client certificate).
    ///
    /// # Errors
    /// A provider whose CA bundle or url is unusable, or no runtime.
    pub fn network(providers: &[LoadedProvider]) -> Result<External, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the provider client: {e}"))?;
        let set = Providers::new(Duration::ZERO, Arc::new(Metrics::new()));
        let list: Vec<Provider> = providers.iter().map(|p| p.provider.clone()).collect();
        // Clients are built inside the runtime (the connector needs one).
        runtime
            .block_on(async { set.set(&list) })
            .map_err(|errors| {
                errors
                    .iter()
                    .map(|error| {
                        let origin = providers
                            .iter()
                            .find(|p| p.provider.name() == error.name)
                            .map(|p| format!("{}: ", p.origin))
                            .unwrap_or_default();
                        format!("{origin}{error}")
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })?;
        Ok(External::Network {
            providers: Box::new(set),
            runtime,
        })
    }

    /// The answers to `asks`.
    ///
    /// # Errors
    /// For recorded answers, every provider or key asked that is not
    /// recorded.
    pub fn answers(&self, asks: &Asks) -> Result<Answers, String> {
        match self {
            External::Network { providers, runtime } => {
                Ok(runtime.block_on(providers.ask(asks, Instant::now() + CALL_DEADLINE)))
            }
            External::Recorded(recorded) => {
                let mut answers = Answers::new();
                let mut missing = Vec::new();
                for (provider, keys) in asks {
                    let Some(response) = recorded.get(provider) else {
                        missing.push(format!("provider {provider} ({})", quoted(keys.iter())));
                        continue;
                    };
                    let failed = response.response.refusal().is_some();
                    let items: BTreeSet<&String> =
                        response.response.items.iter().map(|i| &i.key).collect();
                    let unrecorded: Vec<&String> =
                        keys.iter().filter(|k| !items.contains(k)).collect();
                    if !failed && !unrecorded.is_empty() {
                        missing.push(format!(
                            "provider {provider} ({})",
                            quoted(unrecorded.into_iter())
                        ));
                    }
                    answers.response(provider, response);
                }
                if missing.is_empty() {
                    Ok(answers)
                } else {
                    Err(format!(
                        "external data has no recorded answer for {}: record them with --provider-answers (or a test case's providers), or pass --call-providers",
                        missing.join(", ")
                    ))
                }
            }
        }
    }
}

/// `"a", "b"`.
fn quoted<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    keys.map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
