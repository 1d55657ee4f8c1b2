//! Self-signed serving certificates: a CA and a leaf it signs, for
//! `sartor serve --self-signed` on a laptop and for tests.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A CA and a serving certificate it signed, PEM-encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfSigned {
    /// The CA certificate clients trust.
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

/// Where [`SelfSigned::write`] put the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// `ca.crt`.
    pub ca: PathBuf,
    /// `tls.crt`.
    pub cert: PathBuf,
    /// `tls.key`, readable by its owner only.
    pub key: PathBuf,
}

/// Why a certificate could not be made or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// rcgen refused the parameters.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("writing {}: {error}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why (in the message, so not also a `source`).
        error: std::io::Error,
    },
}

impl SelfSigned {
    /// A new CA named `common_name` and a serving certificate for `names`
    /// (DNS names or IP addresses), both with fresh ECDSA P-256 keys.
    ///
    /// # Errors
    /// A [`CertError`](crate::CertError) when a name is not usable in a certificate.
    pub fn generate(common_name: &str, names: &[&str]) -> Result<SelfSigned, CertError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("{common_name} CA"));
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        let names: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
        let mut params = CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name.to_string());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        // Also a client certificate: sartor presents it to external data
        // providers, as Gatekeeper presents its webhook's.
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &ca)?;
        Ok(SelfSigned {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Whether `dir` already holds exactly these files (so writing them again
    /// would only make the server reload for nothing).
    pub fn is_written(&self, dir: &Path) -> bool {
        let same = |file: &str, contents: &str| {
            std::fs::read_to_string(dir.join(file)).is_ok_and(|found| found == contents)
        };
        same("ca.crt", &self.ca_pem)
            && same("tls.crt", &self.cert_pem)
            && same("tls.key", &self.key_pem)
    }

    /// Writes `ca.crt`, `tls.crt` and `tls.key` into `dir` (created if
    /// missing), the key readable by its owner only.
    ///
    /// # Errors
    /// A [`CertError`](crate::CertError) naming the file that could not be written.
    pub fn write(&self, dir: &Path) -> Result<CertFiles, CertError> {
        std::fs::create_dir_all(dir).map_err(|error| CertError::Write {
            path: dir.to_path_buf(),
            error,
        })?;
        let files = CertFiles {
            ca: dir.join("ca.crt"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        write_file(&files.ca, &self.ca_pem, 0o644)?;
        write_file(&files.key, &self.key_pem, 0o600)?;
        write_file(&files.cert, &self.cert_pem, 0o644)?;
        Ok(files)
    }
}

/// Writes via a temporary file and a rename, so a reader never sees half a file.
fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), CertError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let fail = |error| CertError::Write {
        path: path.to_path_buf(),
        error,
    };
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&temporary)
        .map_err(fail)?;
    file.write_all(contents.as_bytes()).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    std::fs::rename(&temporary, path).map_err(fail)
}
