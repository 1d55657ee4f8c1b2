//! The serving certificate: read from PEM files, swapped when the files
//! change (cert-manager renewals, Secret volume updates) without touching
//! open connections, which keep the session they negotiated.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

/// Where the serving certificate, its key and the optional client CA live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA bundle; when set, clients must present a certificate it signed.
    pub client_ca: Option<PathBuf>,
}

/// Why the TLS configuration cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (in the message, so not also a `source`).
        error: io::Error,
    },
    /// A file holds no usable PEM section of the expected kind.
    #[error("{}: {reason}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The key does not belong to the certificate (also seen for a moment
    /// while a rotation has replaced one file and not yet the other).
    #[error("the key in {} does not match the certificate in {}", key.display(), cert.display())]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The serving certificate currently in use, reloadable from its files.
pub struct Certificate {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The bytes `current` was built from, to tell when the files change.
    loaded_from: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for Certificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificate")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl Certificate {
    /// Loads the certificate and key named by `files`.
    ///
    /// # Errors
    /// A [`TlsError`] naming the file at fault.
    pub fn load(files: &TlsFiles) -> Result<Certificate, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (cert_pem, key_pem) = read_pair(files)?;
        let certified = certified_key(files, &provider, &cert_pem, &key_pem)?;
        Ok(Certificate {
            files: files.clone(),
            provider,
            current: RwLock::new(Arc::new(certified)),
            loaded_from: Mutex::new((cert_pem, key_pem)),
        })
    }

    /// Rereads the files; swaps in the new certificate when they changed.
    /// Returns whether it swapped.
    ///
    /// # Errors
    /// A [`TlsError`] when the files changed but do not form a valid pair;
    /// the current certificate stays in use.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let (cert_pem, key_pem) = read_pair(&self.files)?;
        let mut loaded_from = match self.loaded_from.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if loaded_from.0 == cert_pem && loaded_from.1 == key_pem {
            return Ok(false);
        }
        let certified = certified_key(&self.files, &self.provider, &cert_pem, &key_pem)?;
        match self.current.write() {
            Ok(mut current) => *current = Arc::new(certified),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(certified),
        }
        *loaded_from = (cert_pem, key_pem);
        Ok(true)
    }

    /// The files it reads.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// A rustls server configuration serving this certificate: TLS 1.3 and
    /// 1.2 only, ALPN `h2` and `http/1.1`, client certificates required when
    /// the files name a client CA.
    ///
    /// # Errors
    /// A [`TlsError`] for an unreadable or empty client CA bundle.
    pub fn server_config(self: &Arc<Self>) -> Result<ServerConfig, TlsError> {
        let builder = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
        let builder = match &self.files.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for cert in read_certificates(path)? {
                    roots.add(cert).map_err(|error| TlsError::Pem {
                        path: path.clone(),
                        reason: format!("not a usable CA certificate: {error}"),
                    })?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    self.provider.clone(),
                )
                .build()
                .map_err(|error| TlsError::Pem {
                    path: path.clone(),
                    reason: format!("not a usable client CA bundle: {error}"),
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The serving certificate is also the client certificate sartor presents
/// to external data providers, as Gatekeeper presents its webhook's.
impl ResolvesClientCert for Certificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        })
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        path: path.to_path_buf(),
        error,
    })
}

fn read_pair(files: &TlsFiles) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    Ok((read(&files.cert)?, read(&files.key)?))
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    parse_certificates(path, &read(path)?)
}

fn parse_certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Pem {
            path: path.to_path_buf(),
            reason: error.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_path_buf(),
            reason: "no PEM certificate found".to_string(),
        });
    }
    Ok(certs)
}

fn certified_key(
    files: &TlsFiles,
    provider: &CryptoProvider,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let chain = parse_certificates(&files.cert, cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|error| TlsError::Pem {
        path: files.key.clone(),
        reason: format!("no usable PEM private key: {error}"),
    })?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|error| TlsError::Pem {
            path: files.key.clone(),
            reason: format!("unsupported private key: {error}"),
        })?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified.keys_match().map_err(|_| TlsError::Mismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
    })?;
    Ok(certified)
}
