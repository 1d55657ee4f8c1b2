//! The managed serving certificate, as Gatekeeper's cert-controller does it:
//! a CA and a serving certificate kept in a Secret (created when missing,
//! rotated well before expiry), written to the directory the server reloads
//! from, and the CA injected as `caBundle` into sartor's two webhook
//! configurations. Every replica runs it; the API server's optimistic
//! concurrency (409 on create or stale update) picks one writer, and the
//! others adopt what it wrote.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::self_signed::SelfSigned;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;

/// The Secret's keys.
pub const CA_CERT: &str = "ca.crt";
/// The CA's private key.
pub const CA_KEY: &str = "ca.key";
/// The serving certificate.
pub const TLS_CERT: &str = "tls.crt";
/// The serving certificate's private key.
pub const TLS_KEY: &str = "tls.key";

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// Where the certificate lives and how long it lasts.
#[derive(Debug, Clone, PartialEq)]
pub struct CertOptions {
    /// The namespace of the Secret and the Service.
    pub namespace: String,
    /// The Secret holding CA and serving certificate.
    pub secret: String,
    /// The webhook Service; the certificate names `SERVICE.NAMESPACE.svc`.
    pub service: String,
    /// The MutatingWebhookConfiguration to inject the CA into.
    pub mutating: String,
    /// The ValidatingWebhookConfiguration to inject the CA into.
    pub validating: String,
    /// Where `ca.crt`, `tls.crt` and `tls.key` are written for the server.
    pub dir: PathBuf,
    /// How long a new CA is valid.
    pub ca_validity: Duration,
    /// How long a new serving certificate is valid.
    pub cert_validity: Duration,
    /// A serving certificate is replaced when it has less than this left; a
    /// CA when it has less than `cert_validity` left.
    pub rotate_before: Duration,
}

impl CertOptions {
    /// Gatekeeper's lifetimes: a 10-year CA, 1-year serving certificates
    /// replaced 90 days before they expire.
    pub fn new(namespace: &str, dir: PathBuf) -> CertOptions {
        CertOptions {
            namespace: namespace.to_string(),
            secret: "sartor-webhook-server-cert".to_string(),
            service: "sartor-webhook".to_string(),
            mutating: "sartor-mutating".to_string(),
            validating: "sartor-validating".to_string(),
            dir,
            ca_validity: 10 * 365 * DAY,
            cert_validity: 365 * DAY,
            rotate_before: 90 * DAY,
        }
    }

    /// The DNS names the serving certificate carries.
    pub fn dns_names(&self) -> Vec<String> {
        let (service, namespace) = (&self.service, &self.namespace);
        vec![
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.cluster.local"),
        ]
    }
}

/// Why a reconcile failed; the next one retries.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// An API call failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Other replicas kept writing the Secret while this one tried to.
    #[error("Secret {secret} changed under this replica twice in one round")]
    Contended {
        /// The Secret.
        secret: String,
    },
    /// A certificate could not be generated.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The files could not be written.
    #[error(transparent)]
    Write(#[from] crate::self_signed::CertError),
}

/// What one reconcile did to the Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretAction {
    /// Nothing: it holds a valid, current certificate.
    Kept,
    /// It was missing (or unusable) and was written with a new CA and certificate.
    Created,
    /// The serving certificate was replaced, signed by the same CA.
    RotatedCertificate,
    /// The CA was replaced too (the old one stays in `ca.crt` until it expires).
    RotatedCa,
}

/// The managed certificate of one replica.
#[derive(Clone)]
pub struct CertManager {
    client: Client,
    options: CertOptions,
}

impl std::fmt::Debug for CertManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertManager")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The PEM material of the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Material {
    ca_cert: String,
    ca_key: String,
    cert: String,
    key: String,
}

impl CertManager {
    /// A manager with `options`.
    pub fn new(client: Client, options: CertOptions) -> CertManager {
        CertManager { client, options }
    }

    /// The options it runs with.
    pub fn options(&self) -> &CertOptions {
        &self.options
    }

    /// One round: makes the Secret hold a valid certificate, writes it to the
    /// directory, injects the CA into both webhook configurations.
    ///
    /// # Errors
    /// The first API call or file write that failed.
    pub async fn reconcile(&self) -> Result<SecretAction, CertError> {
        let (material, action) = self.ensure_secret().await?;
        // The CA first: after a CA rotation the bundle trusts old and new, so
        // the API server can verify this replica before and after it reloads.
        self.inject(&material.ca_cert).await?;
        let files = SelfSigned {
            ca_pem: material.ca_cert.clone(),
            cert_pem: material.cert.clone(),
            key_pem: material.key.clone(),
        };
        if !files.is_written(&self.options.dir) {
            files.write(&self.options.dir)?;
            tracing::info!(dir = %self.options.dir.display(), "serving certificate written");
        }
        Ok(action)
    }

    /// Reconciles now and then every `every`, retrying sooner after a failure.
    pub async fn run(self, every: Duration) {
        loop {
            let wait = match self.reconcile().await {
                Ok(action) => {
                    if action != SecretAction::Kept {
                        tracing::info!(?action, secret = %self.options.secret, "serving certificate");
                    }
                    every
                }
                Err(error) => {
                    tracing::warn!(%error, "managing the serving certificate; retrying");
                    every.min(Duration::from_secs(5))
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    async fn ensure_secret(&self) -> Result<(Material, SecretAction), CertError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.options.namespace);
        let name = &self.options.secret;
        // Two rounds: a lost race (409) is settled by reading the winner's Secret.
        for _ in 0..2 {
            let existing = api.get_opt(name).await.map_err(|source| CertError::Api {
                action: format!("reading Secret {}/{name}", self.options.namespace),
                source,
            })?;
            let current = existing.as_ref().and_then(material_of);
            let (material, action) = self.renewed(current.as_ref(), OffsetDateTime::now_utc())?;
            if action == SecretAction::Kept {
                return Ok((material, action));
            }
            let result = match existing {
                None => {
                    api.create(&PostParams::default(), &self.secret(&material))
                        .await
                }
                Some(mut existing) => {
                    // Only the four keys change: type, labels, annotations,
                    // owners and other keys stay as they are.
                    let data = existing.data.get_or_insert_with(BTreeMap::new);
                    data.extend(self.secret(&material).data.unwrap_or_default());
                    api.replace(name, &PostParams::default(), &existing).await
                }
            };
            match result {
                Ok(_) => return Ok((material, action)),
                Err(kube::Error::Api(status))
                    if status.is_already_exists() || status.is_conflict() =>
                {
                    tracing::debug!(secret = %name, "another replica wrote the Secret first");
                }
                Err(source) => {
                    return Err(CertError::Api {
                        action: format!("writing Secret {}/{name}", self.options.namespace),
                        source,
                    });
                }
            }
        }
        Err(CertError::Contended {
            secret: format!("{}/{name}", self.options.namespace),
        })
    }

    /// What the Secret should hold at `now`, given what it holds.
    fn renewed(
        &self,
        current: Option<&Material>,
        now: OffsetDateTime,
    ) -> Result<(Material, SecretAction), CertError> {
        let Some(current) = current else {
            return Ok((self.generate(None, now)?, SecretAction::Created));
        };
        let (Some(ca), Some(cert)) = (Facts::read(&current.ca_cert), Facts::read(&current.cert))
        else {
            return Ok((self.generate(None, now)?, SecretAction::Created));
        };
        let ca_fresh = ca.not_after > now + self.options.cert_validity;
        if !ca_fresh {
            // The old CA stays trusted next to the new one until it expires,
            // so replicas still serving the old certificate keep working.
            let old = (ca.not_after > now).then_some(current);
            return Ok((self.generate(old, now)?, SecretAction::RotatedCa));
        }
        let cert_fresh = cert.not_after > now + self.options.rotate_before
            && cert.client_auth
            && self
                .options
                .dns_names()
                .iter()
                .all(|n| cert.dns_names.contains(n));
        if cert_fresh {
            return Ok((current.clone(), SecretAction::Kept));
        }
        let ca_key = KeyPair::from_pem(&current.ca_key)?;
        let issuer = Issuer::from_ca_cert_pem(&current.ca_cert, ca_key)?;
        let (cert, key) = self.serving(&issuer, now)?;
        Ok((
            Material {
                cert,
                key,
                ..current.clone()
            },
            SecretAction::RotatedCertificate,
        ))
    }

    /// A new CA and serving certificate; `old`'s CA stays in the bundle.
    fn generate(&self, old: Option<&Material>, now: OffsetDateTime) -> Result<Material, CertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "sartor CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + self.options.ca_validity;
        let ca_key = KeyPair::generate()?;
        let ca_key_pem = ca_key.serialize_pem();
        let ca = CertifiedIssuer::self_signed(params, ca_key)?;
        let (cert, key) = self.serving(&ca, now)?;
        let mut ca_cert = ca.pem();
        if let Some(old) = old {
            ca_cert.push_str(&old.ca_cert);
        }
        Ok(Material {
            ca_cert,
            ca_key: ca_key_pem,
            cert,
            key,
        })
    }

    /// A serving certificate and key signed by `issuer`.
    fn serving<S: rcgen::SigningKey>(
        &self,
        issuer: &Issuer<'_, S>,
        now: OffsetDateTime,
    ) -> Result<(String, String), CertError> {
        let mut params = CertificateParams::new(self.options.dns_names())?;
        params.distinguished_name.push(
            DnType::CommonName,
            format!("{}.{}.svc", self.options.service, self.options.namespace),
        );
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        // Also a client certificate: sartor presents it to external data
        // providers, as Gatekeeper presents its webhook's.
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + self.options.cert_validity;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    fn secret(&self, material: &Material) -> Secret {
        let data = [
            (CA_CERT, &material.ca_cert),
            (CA_KEY, &material.ca_key),
            (TLS_CERT, &material.cert),
            (TLS_KEY, &material.key),
        ]
        .into_iter()
        .map(|(key, pem)| (key.to_string(), ByteString(pem.clone().into_bytes())))
        .collect();
        Secret {
            metadata: ObjectMeta {
                name: Some(self.options.secret.clone()),
                namespace: Some(self.options.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/name".to_string(),
                    "sartor".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_string()),
            data: Some(data),
            ..Secret::default()
        }
    }

    /// Sets `caBundle` of every webhook in both configurations to `ca`, when
    /// it differs. A configuration that does not exist is skipped (logged):
    /// it may not be installed yet, or be deleted to disable sartor.
    async fn inject(&self, ca: &str) -> Result<(), CertError> {
        let bundle = ByteString(ca.as_bytes().to_vec());
        self.inject_into(
            &self.options.mutating,
            &bundle,
            |config: &mut MutatingWebhookConfiguration| {
                config
                    .webhooks
                    .iter_mut()
                    .flatten()
                    .map(|w| &mut w.client_config.ca_bundle)
                    .collect()
            },
        )
        .await?;
        self.inject_into(
            &self.options.validating,
            &bundle,
            |config: &mut ValidatingWebhookConfiguration| {
                config
                    .webhooks
                    .iter_mut()
                    .flatten()
                    .map(|w| &mut w.client_config.ca_bundle)
                    .collect()
            },
        )
        .await
    }

    /// Sets the bundles `bundles` finds in configuration `name` of kind `K`.
    async fn inject_into<K>(
        &self,
        name: &str,
        bundle: &ByteString,
        bundles: fn(&mut K) -> Vec<&mut Option<ByteString>>,
    ) -> Result<(), CertError>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
    {
        let kind = K::kind(&());
        let api: Api<K> = Api::all(self.client.clone());
        let fail = |source| CertError::Api {
            action: format!("injecting the CA into {kind} {name}"),
            source,
        };
        let Some(mut config) = api.get_opt(name).await.map_err(fail)? else {
            tracing::warn!(configuration = %name, %kind, "webhook configuration not found; caBundle not injected");
            return Ok(());
        };
        let mut changed = false;
        for current in bundles(&mut config) {
            if current.as_ref() != Some(bundle) {
                *current = Some(bundle.clone());
                changed = true;
            }
        }
        if changed {
            api.replace(name, &crate::status::post_params(), &config)
                .await
                .map_err(fail)?;
            tracing::info!(configuration = %name, %kind, "CA injected");
        }
        Ok(())
    }
}

/// The PEM material of a Secret, when it holds all four keys as text.
fn material_of(secret: &Secret) -> Option<Material> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| String::from_utf8(data.get(key)?.0.clone()).ok();
    Some(Material {
        ca_cert: text(CA_CERT)?,
        ca_key: text(CA_KEY)?,
        cert: text(TLS_CERT)?,
        key: text(TLS_KEY)?,
    })
}

/// What a reconcile needs to know of a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Facts {
    not_after: OffsetDateTime,
    dns_names: Vec<String>,
    /// Whether it may serve as a client certificate (to external data
    /// providers); certificates made before sartor called providers lack it.
    client_auth: bool,
}

impl Facts {
    /// The facts of the first certificate in `pem`, if it parses.
    fn read(pem: &str) -> Option<Facts> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
        let cert = pem.parse_x509().ok()?;
        let dns_names = match cert.subject_alternative_name() {
            Ok(Some(extension)) => extension
                .value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(name) => Some(name.to_string()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let client_auth = matches!(
            cert.extended_key_usage(),
            Ok(Some(extension)) if extension.value.client_auth
        );
        Some(Facts {
            not_after: cert.validity().not_after.to_datetime(),
            dns_names,
            client_auth,
        })
    }
}
