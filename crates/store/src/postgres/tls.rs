//! TLS to PostgreSQL, asked for in the database URL the way libpq reads it: `sslmode` and
//! `sslrootcert`. tokio-postgres parses neither `verify-ca`/`verify-full` nor root certificates,
//! so both are taken out of the URL here, and the rest goes to tokio-postgres as before.
//!
//! | `sslmode` | encrypted | server certificate checked |
//! |---|---|---|
//! | absent, `disable` | no | — |
//! | `prefer` | when the server offers TLS | no |
//! | `require` | yes | no |
//! | `verify-ca` | yes | signed by a trusted root |
//! | `verify-full` | yes | signed by a trusted root, and names the host connected to |
//!
//! Trusted roots are the certificates in the `sslrootcert` PEM file, or the system's
//! (`sslrootcert=system`, and the default). An absent `sslmode` means no TLS, unlike libpq's
//! `prefer`: encryption without a checked certificate stops only a passive eavesdropper, so we
//! make the choice explicit, and warn about an unencrypted connection to another machine.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::{Host, SslMode as WireMode};
use tokio_postgres_rustls::MakeRustlsConnect;

/// What the URL asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode {other:?} is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                ));
            }
        })
    }

    /// What tokio-postgres is told: whether to ask the server for TLS, and whether to insist.
    pub(super) fn wire(self) -> WireMode {
        match self {
            SslMode::Disable => WireMode::Disable,
            SslMode::Prefer => WireMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => WireMode::Require,
        }
    }

    pub(super) fn encrypts(self) -> bool {
        self != SslMode::Disable
    }
}

/// The database URL without its TLS settings, and those settings.
#[derive(Debug, PartialEq)]
pub(super) struct Split {
    pub url: String,
    pub mode: SslMode,
    pub root_cert: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of a `postgres://` URL's query, or out of a
/// `key=value` connection string (there, their own values unquoted; the rest stays byte for byte).
pub(super) fn split_url(url: &str) -> Result<Split, String> {
    let mut mode = None;
    let mut root_cert = None;
    let mut take = |key: &str, value: String| -> Result<bool, String> {
        match key {
            "sslmode" => mode = Some(SslMode::parse(&value)?),
            "sslrootcert" => root_cert = Some(value),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if !take(key, percent_decode(value)?)? {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        // Cut the taken tokens out and leave every other byte as it was: a quoted value (a
        // password with spaces) must not be re-spaced.
        let mut rest = String::with_capacity(url.len());
        let mut from = 0;
        for token in url.split_whitespace() {
            let taken = match token.split_once('=') {
                Some((key, value)) => take(key, value.to_owned())?,
                None => false,
            };
            if taken {
                let start = token.as_ptr() as usize - url.as_ptr() as usize;
                rest.push_str(&url[from..start]);
                from = start + token.len();
            }
        }
        rest.push_str(&url[from..]);
        rest.trim().to_owned()
    };
    Ok(Split {
        url: rest,
        mode: mode.unwrap_or(SslMode::Disable),
        root_cert,
    })
}

fn percent_decode(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("invalid percent-encoding in {value:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{value:?} does not decode to UTF-8"))
}

/// The rustls connector for `mode`. With `disable` tokio-postgres never asks for it; it gets the
/// `require` one, so that the pool and the LISTEN connection have one connector type.
pub(super) fn connector(
    mode: SslMode,
    root_cert: Option<&str>,
) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?;
    let relaxed = |chain| {
        let verifier = Relaxed {
            chain,
            provider: provider.clone(),
        };
        Arc::new(verifier)
    };
    let config = match mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(relaxed(None))
            .with_no_client_auth(),
        SslMode::VerifyCa => {
            let chain = WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(root_cert)?),
                provider.clone(),
            )
            .build()
            .map_err(|e| format!("tls: {e}"))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(relaxed(Some(chain)))
                .with_no_client_auth()
        }
        SslMode::VerifyFull => builder
            .with_root_certificates(roots(root_cert)?)
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// Whether every host of `config` is this machine (a Unix socket, `localhost`, a loopback
/// address): an unencrypted connection there crosses no network.
pub(super) fn all_local(config: &tokio_postgres::Config) -> bool {
    config.get_hosts().iter().all(|host| match host {
        Host::Tcp(name) => {
            name == "localhost"
                || name
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        #[cfg(unix)]
        Host::Unix(_) => true,
    })
}

/// The trusted roots: the PEM file's certificates, or the system's.
fn roots(root_cert: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match root_cert {
        Some(path) if path != "system" => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("sslrootcert {path:?}: {e}"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("sslrootcert {path:?}: {e}"))?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("sslrootcert {path:?} holds no usable certificate"));
            }
        }
        _ => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(
                    "no trusted root certificates on this system: set sslrootcert to a PEM file"
                        .into(),
                );
            }
        }
    }
    Ok(store)
}

/// `prefer` and `require` (no chain given: any certificate is accepted) and `verify-ca` (the
/// chain is checked, whatever name the certificate carries). The handshake's signatures are
/// checked either way, so the session is encrypted with whoever holds the certificate's key.
#[derive(Debug)]
struct Relaxed {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
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
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> Split {
        split_url(url).unwrap()
    }

    #[test]
    fn tls_settings_leave_the_url_and_the_rest_stays() {
        assert_eq!(
            split("postgres://u@db.example.com:5432/app?sslmode=verify-full&application_name=x"),
            Split {
                url: "postgres://u@db.example.com:5432/app?application_name=x".into(),
                mode: SslMode::VerifyFull,
                root_cert: None,
            }
        );
        assert_eq!(
            split("postgresql://db/app?sslrootcert=%2Fetc%2Fca.pem&sslmode=verify-ca"),
            Split {
                url: "postgresql://db/app".into(),
                mode: SslMode::VerifyCa,
                root_cert: Some("/etc/ca.pem".into()),
            }
        );
        assert_eq!(
            split("host=db user=u sslmode=require dbname=app"),
            Split {
                url: "host=db user=u  dbname=app".into(),
                mode: SslMode::Require,
                root_cert: None,
            }
        );
        let quoted = split("host=db password='a  b' sslmode=require user=u").url;
        assert_eq!(
            quoted, "host=db password='a  b'  user=u",
            "only the taken token goes; a quoted value keeps its spaces"
        );
        let config: tokio_postgres::Config = quoted.parse().unwrap();
        assert_eq!(config.get_password(), Some(&b"a  b"[..]));
        assert_eq!(config.get_user(), Some("u"));
        let plain = split("postgres://u@127.0.0.1/test");
        assert_eq!(
            (plain.url.as_str(), plain.mode),
            ("postgres://u@127.0.0.1/test", SslMode::Disable)
        );
    }

    #[test]
    fn an_unknown_mode_or_a_broken_escape_is_refused_by_name() {
        let err = split_url("postgres://db/app?sslmode=verify").unwrap_err();
        assert!(err.contains("sslmode \"verify\""), "{err}");
        let err = split_url("postgres://db/app?sslrootcert=%zz").unwrap_err();
        assert!(err.contains("percent-encoding"), "{err}");
    }

    #[test]
    fn modes_map_to_what_tokio_postgres_asks_the_server() {
        assert!(matches!(SslMode::Disable.wire(), WireMode::Disable));
        assert!(matches!(SslMode::Prefer.wire(), WireMode::Prefer));
        for mode in [SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull] {
            assert!(matches!(mode.wire(), WireMode::Require));
        }
        let err = connector(SslMode::VerifyFull, Some("/nonexistent/ca.pem"))
            .err()
            .expect("a missing root file is an error");
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    }

    #[test]
    fn only_loopback_and_socket_hosts_count_as_local() {
        let local = |url: &str| all_local(&url.parse().unwrap());
        assert!(local("postgres://u@127.0.0.1:5432/test"));
        assert!(local("postgres://u@localhost/test"));
        assert!(local("host=/var/run/postgresql user=u"));
        assert!(!local("postgres://u@db.example.com/test"));
        assert!(!local("postgres://u@10.0.0.5/test"));
    }
}
