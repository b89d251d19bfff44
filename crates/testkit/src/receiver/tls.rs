//! TLS over a TCP listener for axum, for an `https://` receiver: a connection whose handshake
//! fails is dropped (the client sees the failure), and the listener goes on accepting.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub(super) struct Listener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl Listener {
    /// Listens on a free loopback port with this certificate chain and key (PEM files).
    pub(super) async fn bind(cert: &Path, key: &Path) -> Self {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("certificate file")
            .collect::<Result<_, _>>()
            .expect("certificate PEM");
        let key = PrivateKeyDer::from_pem_file(key).expect("key PEM");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server certificate");
        Self {
            tcp: tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a loopback port"),
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        }
    }

    pub(super) fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr().expect("the listener's address")
    }
}

impl axum::serve::Listener for Listener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, peer)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(5), self.acceptor.accept(tcp)).await
            {
                return (tls, peer);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
