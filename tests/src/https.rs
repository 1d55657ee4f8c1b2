//! A real HTTPS client for the webhook tests: tokio-rustls + hyper's client
//! connection, one TCP connection per [`HttpsClient`], so tests control
//! keep-alive, ALPN and client certificates and can see the server's certificate.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;

/// How to connect.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// PEM of the CA to trust.
    pub ca_pem: String,
    /// Offer only `h2` in ALPN (otherwise only `http/1.1`).
    pub http2: bool,
    /// A client certificate and key (PEM) to present.
    pub client_identity: Option<(String, String)>,
    /// The name to verify the server's certificate against (default `localhost`).
    pub server_name: Option<String>,
}

/// One HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// `Content-Type`, if any.
    pub content_type: Option<String>,
    /// Body as text.
    pub body: String,
}

enum Sender {
    Http1(http1::SendRequest<Full<Bytes>>),
    Http2(http2::SendRequest<Full<Bytes>>),
}

/// One TLS connection to the server.
pub struct HttpsClient {
    sender: Sender,
    /// DER of the certificate the server presented.
    pub server_certificate: Vec<u8>,
    /// The protocol ALPN settled on.
    pub alpn: Option<Vec<u8>>,
}

/// Connects to `addr` as `localhost`, trusting `ca_pem`, over HTTP/1.1.
///
/// # Errors
/// A description of what failed (TLS handshake, TCP connect).
pub async fn connect(addr: SocketAddr, ca_pem: &str) -> Result<HttpsClient, String> {
    connect_with(
        addr,
        &Options {
            ca_pem: ca_pem.to_string(),
            ..Options::default()
        },
    )
    .await
}

/// Connects to `addr` as `localhost` with `options`.
///
/// # Errors
/// A description of what failed (TLS handshake, TCP connect).
pub async fn connect_with(addr: SocketAddr, options: &Options) -> Result<HttpsClient, String> {
    let tls = tls_stream(addr, options).await?;
    let (_, session) = tls.get_ref();
    let server_certificate = session
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| cert.as_ref().to_vec())
        .unwrap_or_default();
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    let io = TokioIo::new(tls);
    let sender = if options.http2 {
        let (sender, connection) = http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
        tokio::spawn(connection);
        Sender::Http2(sender)
    } else {
        let (sender, connection) = http1::handshake(io)
            .await
            .map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
        tokio::spawn(connection);
        Sender::Http1(sender)
    };
    Ok(HttpsClient {
        sender,
        server_certificate,
        alpn,
    })
}

/// A TLS connection to `addr` as `localhost` with `options`, for tests that
/// write raw bytes (slow or vanishing clients).
///
/// # Errors
/// A description of what failed (TLS handshake, TCP connect).
pub async fn tls_stream(
    addr: SocketAddr,
    options: &Options,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(options.ca_pem.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match &options.client_identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| e.to_string())?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
    };
    config.alpn_protocols = vec![if options.http2 {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let name = options
        .server_name
        .as_deref()
        .unwrap_or("localhost")
        .to_string();
    let name = ServerName::try_from(name).map_err(|e| e.to_string())?;
    connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))
}

impl HttpsClient {
    /// POSTs `body` as JSON to `path`.
    ///
    /// # Errors
    /// A description of what failed.
    pub async fn post(&mut self, path: &str, body: impl Into<Bytes>) -> Result<Answer, String> {
        let request = hyper::Request::post(format!("https://localhost{path}"))
            .header("content-type", "application/json")
            .body(Full::new(body.into()))
            .map_err(|e| e.to_string())?;
        self.send(request).await
    }

    /// GETs `path`.
    ///
    /// # Errors
    /// A description of what failed.
    pub async fn get(&mut self, path: &str) -> Result<Answer, String> {
        let request = hyper::Request::get(format!("https://localhost{path}"))
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        self.send(request).await
    }

    async fn send(&mut self, request: hyper::Request<Full<Bytes>>) -> Result<Answer, String> {
        let response = match &mut self.sender {
            Sender::Http1(sender) => sender.send_request(request).await,
            Sender::Http2(sender) => sender.send_request(request).await,
        }
        .map_err(|e| format!("request: {e}"))?;
        answer(response).await
    }
}

async fn answer(response: hyper::Response<hyper::body::Incoming>) -> Result<Answer, String> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok(Answer {
        status,
        content_type,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// GETs `path` from `addr` over plain HTTP/1.1 (the metrics port).
///
/// # Errors
/// A description of what failed.
pub async fn http_get(addr: SocketAddr, path: &str) -> Result<Answer, String> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut sender, connection) = http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(connection);
    let request = hyper::Request::get(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    answer(response).await
}
