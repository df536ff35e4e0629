//! TLS for the OpenFlow channels (`pssl:` listeners, `ssl:` controllers)
//! with rustls over the same blocking sockets as `ptcp:`.
//!
//! Both ends present a certificate and both are verified, as Open
//! vSwitch's SSL does: a peer is trusted when its certificate chains to
//! the configured CA certificate. Names are not checked (a controller is
//! dialled by address, and Open vSwitch's PKI puts an id, not a host name,
//! in its certificates); the chain, validity dates and key usage are.
//!
//! A connection is read by its own thread and written by two (replies and
//! packet-ins), so a [`TlsStream`] is a socket plus the TLS state under a
//! lock. The lock is never held across a blocking read: the reader takes
//! raw bytes off the socket first, then feeds them in. Writes encrypt and
//! send under the lock, so records leave in order.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore,
    ServerConfig, ServerConnection, SignatureScheme,
};

use crate::config::SslConfig;

/// The loaded keys and certificates, as a server's and a client's
/// configuration.
#[derive(Clone)]
pub struct TlsSettings {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsSettings")
    }
}

fn certs(path: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow::anyhow!("openflow.ssl.{what} = {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("openflow.ssl.{what} = {}: {e}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!(
            "openflow.ssl.{what} = {}: no PEM CERTIFICATE in the file",
            path.display()
        );
    }
    Ok(certs)
}

impl TlsSettings {
    /// Reads the key and certificates of `cfg`; an error names the file
    /// and what is wrong with it.
    pub fn load(cfg: &SslConfig) -> anyhow::Result<TlsSettings> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certs(&cfg.certificate, "certificate")?;
        let key = PrivateKeyDer::from_pem_file(&cfg.private_key).map_err(|e| {
            anyhow::anyhow!(
                "openflow.ssl.private_key = {}: {e}",
                cfg.private_key.display()
            )
        })?;
        let mut roots = RootCertStore::empty();
        for c in certs(&cfg.ca_cert, "ca_cert")? {
            roots
                .add(c)
                .with_context(|| format!("openflow.ssl.ca_cert = {}", cfg.ca_cert.display()))?;
        }
        let roots = Arc::new(roots);
        let verify_clients =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .context("openflow.ssl.ca_cert")?;
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_client_cert_verifier(verify_clients)
            .with_single_cert(chain.clone(), key.clone_key())
            .context("openflow.ssl: the private key does not go with the certificate")?;
        let verify_servers = ChainOnly(
            WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
                .build()
                .context("openflow.ssl.ca_cert")?,
        );
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verify_servers))
            .with_client_auth_cert(chain, key)
            .context("openflow.ssl: the private key does not go with the certificate")?;
        Ok(TlsSettings {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// The server side of a connection a `pssl:` listener accepted.
    pub fn accept(&self, sock: TcpStream) -> std::io::Result<TlsStream> {
        let conn = ServerConnection::new(Arc::clone(&self.server)).map_err(tls_error)?;
        Ok(TlsStream::new(sock, conn.into()))
    }

    /// The client side of a connection to an `ssl:` controller.
    pub fn connect(&self, sock: TcpStream) -> std::io::Result<TlsStream> {
        let name = ServerName::IpAddress(sock.peer_addr()?.ip().into());
        let conn = ClientConnection::new(Arc::clone(&self.client), name).map_err(tls_error)?;
        Ok(TlsStream::new(sock, conn.into()))
    }
}

/// A controller's certificate must chain to the CA; its names are not
/// checked (see the module's documentation). The webpki verifier checks
/// the name last, after the chain, dates and usage: a name mismatch from
/// it means everything else held.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn tls_error(e: rustls::Error) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, format!("TLS: {e}"))
}

/// One TLS connection over a blocking socket; clones share the TLS state.
pub struct TlsStream {
    sock: TcpStream,
    tls: Arc<Mutex<rustls::Connection>>,
    /// Bytes read off the socket and not yet taken by rustls (its
    /// plaintext buffer was full). Only the reading clone has any.
    raw: Vec<u8>,
}

impl TlsStream {
    fn new(sock: TcpStream, tls: rustls::Connection) -> TlsStream {
        TlsStream {
            sock,
            tls: Arc::new(Mutex::new(tls)),
            raw: Vec::new(),
        }
    }

    pub fn sock(&self) -> &TcpStream {
        &self.sock
    }

    pub fn try_clone(&self) -> std::io::Result<TlsStream> {
        Ok(TlsStream {
            sock: self.sock.try_clone()?,
            tls: Arc::clone(&self.tls),
            raw: Vec::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, rustls::Connection> {
        self.tls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends every TLS record waiting (handshake messages, alerts,
    /// encrypted data).
    fn flush_tls(mut sock: &TcpStream, tls: &mut rustls::Connection) -> std::io::Result<()> {
        while tls.wants_write() {
            tls.write_tls(&mut sock)?;
        }
        Ok(())
    }

    /// Starts the handshake (a client's first flight) without waiting.
    pub fn start(&self) -> std::io::Result<()> {
        Self::flush_tls(&self.sock, &mut self.lock())
    }
}

impl Read for TlsStream {
    /// Plaintext; a socket timeout comes back as its error (the caller's
    /// tick), a TLS failure (a refused certificate, a bad record) as
    /// `InvalidData` naming it, after the alert is sent.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let TlsStream { sock, tls, raw } = self;
        loop {
            {
                let mut tls = tls.lock().unwrap_or_else(|p| p.into_inner());
                let (fed, failed) = feed(&mut tls, raw);
                // Handshake replies and alerts go out now.
                let sent = Self::flush_tls(sock, &mut tls);
                if let Some(e) = failed {
                    return Err(e);
                }
                sent?;
                match tls.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    // The peer's socket closed without close_notify.
                    Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                    Err(e) => return Err(e),
                }
                if fed > 0 && !raw.is_empty() {
                    continue;
                }
            }
            // Straight into the buffer rustls is fed from.
            let start = raw.len();
            raw.resize(start + 16 * 1024, 0);
            let got = (&*sock).read(&mut raw[start..]);
            raw.truncate(start + *got.as_ref().unwrap_or(&0));
            if got? == 0 {
                return Ok(0);
            }
        }
    }
}

/// Feeds `raw` to rustls until it is all taken, rustls's plaintext buffer
/// is full, or a record fails; drops what was taken. Returns how many
/// bytes were taken and the failure (as `InvalidData`), if one.
fn feed(tls: &mut rustls::Connection, raw: &mut Vec<u8>) -> (usize, Option<std::io::Error>) {
    let mut fed = 0;
    let mut failed = None;
    while fed < raw.len() {
        match tls.read_tls(&mut &raw[fed..]) {
            Ok(0) => break,
            Ok(n) => fed += n,
            // Its plaintext buffer is full: that is read first.
            Err(e) if e.kind() == ErrorKind::Other => break,
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        if let Err(e) = tls.process_new_packets() {
            failed = Some(tls_error(e));
            break;
        }
    }
    raw.drain(..fed);
    (fed, failed)
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut tls = self.lock();
        let n = tls.writer().write(buf)?;
        Self::flush_tls(&self.sock, &mut tls)?;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Self::flush_tls(&self.sock, &mut self.lock())
    }
}
