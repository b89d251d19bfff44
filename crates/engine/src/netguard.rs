//! Which addresses a webhook may reach. Loopback, private, link-local (cloud metadata included),
//! shared, multicast and unspecified addresses are refused unless the operator allowlists a range.
//! Checked when a job is created and again at connect time, so a hostname that later resolves to
//! an internal address is still refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use hourglass_core::ValidationError;
use ipnet::IpNet;
use url::Url;

#[derive(Debug, Clone, Default)]
pub struct TargetPolicy {
    allow: Arc<Vec<IpNet>>,
}

impl TargetPolicy {
    pub fn new(allow: Vec<IpNet>) -> Self {
        Self {
            allow: Arc::new(allow),
        }
    }

    pub fn allowlist(&self) -> &[IpNet] {
        &self.allow
    }

    /// `Err` names the class of a refused address.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), &'static str> {
        let ip = canonical(ip);
        if self.allow.iter().any(|net| net.contains(&ip)) {
            return Ok(());
        }
        match forbidden_class(ip) {
            Some(class) => Err(class),
            None => Ok(()),
        }
    }

    /// Syntactic checks plus the address check for IP literals and `localhost`. Hostnames are
    /// resolved by [`TargetPolicy::check_resolved`].
    pub fn check_url(&self, url: &Url, field: &str) -> Result<(), ValidationError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ValidationError::new(
                "invalid_url",
                field,
                "webhook url must use http or https",
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ValidationError::new(
                "invalid_url",
                field,
                "webhook url must not carry credentials; use target headers",
            ));
        }
        let forbidden = |class: &str| {
            ValidationError::new(
                "forbidden_target",
                field,
                format!(
                    "webhook url points at a {class} address; the operator can allow it with --allow-targets"
                ),
            )
        };
        match url.host() {
            None => Err(ValidationError::new(
                "invalid_url",
                field,
                "webhook url has no host",
            )),
            Some(url::Host::Ipv4(v4)) => self.check_ip(IpAddr::V4(v4)).map_err(forbidden),
            Some(url::Host::Ipv6(v6)) => self.check_ip(IpAddr::V6(v6)).map_err(forbidden),
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if name == "localhost" || name.ends_with(".localhost") {
                    self.check_ip(IpAddr::V4(Ipv4Addr::LOCALHOST))
                        .map_err(forbidden)?;
                }
                Ok(())
            }
        }
    }

    /// Resolves a hostname and refuses it if any address is forbidden. A name that does not
    /// resolve now is accepted: DNS can be briefly unavailable, and delivery checks again.
    pub async fn check_resolved(&self, url: &Url, field: &str) -> Result<(), ValidationError> {
        let Some(url::Host::Domain(name)) = url.host() else {
            return Ok(());
        };
        let port = url.port_or_known_default().unwrap_or(443);
        let lookup = tokio::net::lookup_host((name.to_string(), port));
        let Ok(Ok(addrs)) = tokio::time::timeout(std::time::Duration::from_secs(2), lookup).await
        else {
            return Ok(());
        };
        for addr in addrs {
            if let Err(class) = self.check_ip(addr.ip()) {
                return Err(ValidationError::new(
                    "forbidden_target",
                    field,
                    format!(
                        "webhook host resolves to a {class} address; the operator can allow it with --allow-targets"
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn filter(&self, addrs: impl Iterator<Item = SocketAddr>) -> Vec<SocketAddr> {
        addrs.filter(|a| self.check_ip(a.ip()).is_ok()).collect()
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

fn forbidden_class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local or metadata")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("multicast or reserved")
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        Some("IETF protocol assignment")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if first & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if let Some(v4) = ip.to_ipv4() {
        // IPv4-compatible and NAT64-style embeddings are judged by the embedded address.
        forbidden_v4(v4).filter(|_| first == 0)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_refused_unless_allowlisted() {
        let strict = TargetPolicy::default();
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(strict.check_ip(ip.parse().unwrap()).is_err(), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1", "8.8.8.8"] {
            assert!(strict.check_ip(ip.parse().unwrap()).is_ok(), "{ip}");
        }
        let open = TargetPolicy::new(vec!["127.0.0.0/8".parse().unwrap()]);
        assert!(open.check_ip("127.0.0.1".parse().unwrap()).is_ok());
        assert!(open.check_ip("::ffff:127.0.0.1".parse().unwrap()).is_ok());
        assert!(open.check_ip("10.0.0.1".parse().unwrap()).is_err());
    }

    #[test]
    fn urls_are_checked_for_scheme_credentials_and_literal_hosts() {
        let strict = TargetPolicy::default();
        let check = |u: &str| strict.check_url(&u.parse().unwrap(), "target.webhook.url");
        assert_eq!(
            check("ftp://example.com/x").unwrap_err().code,
            "invalid_url"
        );
        assert_eq!(
            check("http://user:pw@example.com/").unwrap_err().code,
            "invalid_url"
        );
        assert_eq!(
            check("http://127.0.0.1:8080/").unwrap_err().code,
            "forbidden_target"
        );
        assert_eq!(
            check("http://localhost/").unwrap_err().code,
            "forbidden_target"
        );
        assert_eq!(
            check("http://[::1]/").unwrap_err().field,
            "target.webhook.url"
        );
        assert!(check("https://example.com/hook").is_ok());
    }
}
