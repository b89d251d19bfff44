//! Which addresses a webhook may reach: every range of the IANA IPv4 and IPv6 special-purpose
//! address registries that is not globally reachable (loopback, private, link-local with cloud
//! metadata, shared, documentation, benchmarking, ...), multicast, reserved space, and IPv6
//! addresses that carry such an IPv4 address to a translator or relay (NAT64, 6to4) is refused
//! unless the operator allowlists it. Checked when a job is created and again at connect time, so
//! a hostname that later resolves to an internal address is still refused.
//!
//! A node in development mode (no API keys, listening on loopback only) also allows this host's
//! loopback addresses ([`TargetPolicy::allowing_loopback`]), so that a local receiver works
//! without configuration; a node with API keys allows them only when allowlisted.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use hourglass_core::ValidationError;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use url::Url;

#[derive(Debug, Clone, Default)]
pub struct TargetPolicy {
    allow: Arc<Vec<IpNet>>,
    /// Development mode: 127.0.0.0/8 and ::1 (as dialled) are allowed besides the allowlist.
    loopback: bool,
}

/// Why an address is refused: its class in words, and the whole range refused for that reason,
/// which is what an operator would allowlist to allow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub class: &'static str,
    pub range: IpNet,
}

impl TargetPolicy {
    pub fn new(allow: Vec<IpNet>) -> Self {
        Self {
            allow: Arc::new(allow),
            loopback: false,
        }
    }

    /// Also allows this host's loopback addresses: 127.0.0.0/8 and ::1, and their IPv4-mapped
    /// spelling (the same destination), but not loopback reached through a NAT64 translator or
    /// a 6to4 relay, nor the deprecated IPv4-compatible `::127.0.0.1`. For development mode,
    /// where the node itself is reachable only from this host.
    pub fn allowing_loopback(mut self) -> Self {
        self.loopback = true;
        self
    }

    /// Whether loopback targets are allowed without being allowlisted (development mode).
    pub fn allows_loopback(&self) -> bool {
        self.loopback
    }

    pub fn allowlist(&self) -> &[IpNet] {
        &self.allow
    }

    /// `Err` names the class of a refused address. The allowlist is matched against the address
    /// as dialled (an IPv4-mapped address as its IPv4 address, the same destination). An IPv4
    /// address inside a NAT64 or 6to4 address is not matched against it: allowing 127.0.0.0/8
    /// means this host's loopback, while `64:ff9b::7f00:1` asks a translator for its own; such
    /// an address is allowed only by allowlisting the IPv6 range itself.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), &'static str> {
        match self.refusal(ip) {
            Some(refusal) => Err(refusal.class),
            None => Ok(()),
        }
    }

    /// Why `ip` is refused, or `None` when it is allowed.
    pub fn refusal(&self, ip: IpAddr) -> Option<Refusal> {
        let ip = canonical(ip);
        if self.allow.iter().any(|net| net.contains(&ip)) {
            return None;
        }
        if self.loopback && ip.is_loopback() {
            return None;
        }
        forbidden(ip)
    }

    /// The `forbidden_target` error for a refused address: it names the setting and the value
    /// that would allow it, the allowlist as it is plus the refused range.
    fn refused(&self, field: &str, what: &str, refusal: Refusal) -> ValidationError {
        let list = self
            .allow
            .iter()
            .map(ToString::to_string)
            .chain(std::iter::once(refusal.range.to_string()))
            .collect::<Vec<_>>()
            .join(",");
        ValidationError::new(
            "forbidden_target",
            field,
            format!(
                "{what} a {class} address ({range}), which webhooks may not reach unless the operator allows it: restart the node with --allow-targets {list} (config file: allow_targets)",
                class = refusal.class,
                range = refusal.range,
            ),
        )
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
        let check = |ip: IpAddr| match self.refusal(ip) {
            Some(refusal) => Err(self.refused(field, "webhook url points at", refusal)),
            None => Ok(()),
        };
        match url.host() {
            None => Err(ValidationError::new(
                "invalid_url",
                field,
                "webhook url has no host",
            )),
            Some(url::Host::Ipv4(v4)) => check(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => check(IpAddr::V6(v6)),
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if name == "localhost" || name.ends_with(".localhost") {
                    check(IpAddr::V4(Ipv4Addr::LOCALHOST))?;
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
            if let Some(refusal) = self.refusal(addr.ip()) {
                return Err(self.refused(field, "webhook host resolves to", refusal));
            }
        }
        Ok(())
    }

    pub(crate) fn filter(&self, addrs: impl Iterator<Item = SocketAddr>) -> Vec<SocketAddr> {
        addrs.filter(|a| self.check_ip(a.ip()).is_ok()).collect()
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is the IPv4 address itself: a dual-stack socket
/// dialling it reaches the same host, so it is judged, and allowlisted, as that address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

fn forbidden(ip: IpAddr) -> Option<Refusal> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4).map(|(class, range)| Refusal {
            class,
            range: IpNet::V4(range),
        }),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

const fn v6(segments: [u16; 8]) -> u128 {
    let mut out = 0u128;
    let mut i = 0;
    while i < 8 {
        out = (out << 16) | segments[i] as u128;
        i += 1;
    }
    out
}

/// Whether `addr` lies in `base/len`; a prefix length of 0 matches everything.
fn in_v4(addr: u32, base: u32, len: u32) -> bool {
    let shift = 32u32.saturating_sub(len);
    addr.checked_shr(shift).unwrap_or(0) == base.checked_shr(shift).unwrap_or(0)
}

fn in_v6(addr: u128, base: u128, len: u32) -> bool {
    let shift = 128u32.saturating_sub(len);
    addr.checked_shr(shift).unwrap_or(0) == base.checked_shr(shift).unwrap_or(0)
}

/// The IPv4 ranges of the IANA special-purpose address registry that are not globally
/// reachable, plus multicast and the reserved 240/4. The globally reachable entries (AS112
/// 192.31.196/24 and 192.175.48/24, AMT 192.52.193/24) stay allowed. 192.0.0.0/24 is refused
/// whole, its two global anycast addresses (192.0.0.9 PCP, 192.0.0.10 TURN) included: they are
/// no webhook receivers.
const V4_DENIED: &[(u32, u32, &str)] = &[
    (v4(0, 0, 0, 0), 8, "unspecified (\"this network\")"),
    (v4(10, 0, 0, 0), 8, "private"),
    (v4(100, 64, 0, 0), 10, "shared (carrier-grade NAT)"),
    (v4(127, 0, 0, 0), 8, "loopback"),
    (v4(169, 254, 0, 0), 16, "link-local or metadata"),
    (v4(172, 16, 0, 0), 12, "private"),
    (v4(192, 0, 0, 0), 24, "IETF protocol assignment"),
    (v4(192, 0, 2, 0), 24, "documentation"),
    (v4(192, 88, 99, 0), 24, "deprecated 6to4 relay anycast"),
    (v4(192, 168, 0, 0), 16, "private"),
    (v4(198, 18, 0, 0), 15, "benchmarking"),
    (v4(198, 51, 100, 0), 24, "documentation"),
    (v4(203, 0, 113, 0), 24, "documentation"),
    (v4(224, 0, 0, 0), 4, "multicast"),
    // Reserved for future use, with the limited broadcast 255.255.255.255 at its end.
    (v4(240, 0, 0, 0), 4, "reserved or broadcast"),
];

fn forbidden_v4(ip: Ipv4Addr) -> Option<(&'static str, Ipv4Net)> {
    let addr = u32::from(ip);
    V4_DENIED
        .iter()
        .find(|(base, len, _)| in_v4(addr, *base, *len))
        .map(|(base, len, class)| (*class, net4(*base, *len)))
}

fn net4(base: u32, len: u32) -> Ipv4Net {
    let base = Ipv4Addr::from(base);
    u8::try_from(len)
        .ok()
        .and_then(|len| Ipv4Net::new(base, len).ok())
        .unwrap_or_else(|| Ipv4Net::from(base))
}

fn net6(base: u128, len: u32) -> IpNet {
    let base = Ipv6Addr::from(base);
    IpNet::V6(
        u8::try_from(len)
            .ok()
            .and_then(|len| Ipv6Net::new(base, len).ok())
            .unwrap_or_else(|| Ipv6Net::from(base)),
    )
}

/// An IPv4 range carried inside an IPv6 prefix at bit `shift` from the right: the IPv6 range a
/// translator (NAT64) or relay (6to4) forwards to that IPv4 range.
fn embedded(prefix: u128, prefix_len: u32, shift: u32, range: Ipv4Net) -> IpNet {
    let v4 = u128::from(u32::from(range.network()));
    net6(
        prefix | v4.checked_shl(shift).unwrap_or(0),
        prefix_len + u32::from(range.prefix_len()),
    )
}

/// The IPv6 ranges refused whole. The IANA special-purpose registry's ranges that are not
/// globally reachable, and the unallocated space the registry leaves reserved (checked after
/// these, in [`forbidden_v6`]). 2001::/23 is refused whole: its globally reachable exceptions
/// (PCP and TURN anycast, AMT, AS112, ORCHIDv2, DRIP) are no webhook receivers, and Teredo
/// (2001::/32) is a defunct tunnel whose relays would carry a request to whatever IPv4 address
/// its bits name.
const V6_DENIED: &[(u128, u32, &str)] = &[
    (v6([0, 0, 0, 0, 0, 0, 0, 0]), 128, "unspecified"),
    (v6([0, 0, 0, 0, 0, 0, 0, 1]), 128, "loopback"),
    (
        v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0]),
        48,
        "local-use IPv4/IPv6 translation",
    ),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0]), 64, "discard-only"),
    (v6([0x100, 0, 0, 1, 0, 0, 0, 0]), 64, "dummy (example)"),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0]),
        23,
        "IETF protocol assignment or Teredo",
    ),
    (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]), 32, "documentation"),
    (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0]), 20, "documentation"),
    (
        v6([0x5f00, 0, 0, 0, 0, 0, 0, 0]),
        16,
        "segment routing (SRv6 SID)",
    ),
    (
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0]),
        7,
        "private (unique local)",
    ),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0]), 10, "link-local"),
    (
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0]),
        10,
        "site-local (deprecated)",
    ),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0]), 8, "multicast"),
];

/// IPv4-mapped (`::ffff:0:0/96`): the IPv4 address itself.
const MAPPED: u128 = v6([0, 0, 0, 0, 0, 0xffff, 0, 0]);
/// IPv4-compatible (`::/96`, deprecated by RFC 4291).
const COMPATIBLE: u128 = 0;
/// The NAT64 well-known prefix (`64:ff9b::/96`, RFC 6052): a translator forwards to the IPv4
/// address in the last 32 bits.
const NAT64: u128 = v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]);
/// 6to4 (`2002::/16`, RFC 3056): a relay forwards to the IPv4 address in bits 16 to 48.
const SIX_TO_FOUR: u128 = v6([0x2002, 0, 0, 0, 0, 0, 0, 0]);
/// Global unicast (`2000::/3`): the only IPv6 space IANA allocates to the public internet.
const GLOBAL_UNICAST: u128 = v6([0x2000, 0, 0, 0, 0, 0, 0, 0]);

fn forbidden_v6(ip: Ipv6Addr) -> Option<Refusal> {
    let addr = u128::from(ip);
    let low_v4 = Ipv4Addr::from(addr as u32);
    let refusal = |class, range| Some(Refusal { class, range });
    if let Some((base, len, class)) = V6_DENIED
        .iter()
        .find(|(base, len, _)| in_v6(addr, *base, *len))
    {
        refusal(class, net6(*base, *len))
    } else if in_v6(addr, MAPPED, 96) {
        // Allowlisted as the IPv4 address it is (see `canonical`).
        forbidden_v4(low_v4).and_then(|(class, range)| refusal(class, IpNet::V4(range)))
    } else if in_v6(addr, COMPATIBLE, 96) {
        // Deprecated and outside global unicast: refused whatever it embeds, named after the
        // embedded address when that one is forbidden too.
        match forbidden_v4(low_v4) {
            Some((class, range)) => refusal(class, embedded(COMPATIBLE, 96, 0, range)),
            None => refusal("deprecated IPv4-compatible", net6(COMPATIBLE, 96)),
        }
    } else if in_v6(addr, NAT64, 96) {
        forbidden_v4(low_v4)
            .and_then(|(class, range)| refusal(class, embedded(NAT64, 96, 0, range)))
    } else if in_v6(addr, SIX_TO_FOUR, 16) {
        forbidden_v4(Ipv4Addr::from((addr >> 80) as u32))
            .and_then(|(class, range)| refusal(class, embedded(SIX_TO_FOUR, 16, 80, range)))
    } else if !in_v6(addr, GLOBAL_UNICAST, 3) {
        // The unallocated space is no single registry entry: name the address itself.
        refusal("reserved (not global unicast)", net6(addr, 128))
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

    /// Each denied range's first and last address, and the addresses just outside it, with the
    /// class the policy must give (`None`: allowed). Written from the IANA registries, not from
    /// the tables above, so a wrong table entry shows here.
    const EDGES: &[(&str, Option<&str>)] = &[
        // 0.0.0.0/8
        ("0.0.0.0", Some("unspecified (\"this network\")")),
        ("0.255.255.255", Some("unspecified (\"this network\")")),
        ("1.0.0.0", None),
        // 10.0.0.0/8
        ("9.255.255.255", None),
        ("10.0.0.0", Some("private")),
        ("10.255.255.255", Some("private")),
        ("11.0.0.0", None),
        // 100.64.0.0/10
        ("100.63.255.255", None),
        ("100.64.0.0", Some("shared (carrier-grade NAT)")),
        ("100.127.255.255", Some("shared (carrier-grade NAT)")),
        ("100.128.0.0", None),
        // 127.0.0.0/8
        ("126.255.255.255", None),
        ("127.0.0.0", Some("loopback")),
        ("127.255.255.255", Some("loopback")),
        ("128.0.0.0", None),
        // 169.254.0.0/16
        ("169.253.255.255", None),
        ("169.254.0.0", Some("link-local or metadata")),
        ("169.254.169.254", Some("link-local or metadata")),
        ("169.254.255.255", Some("link-local or metadata")),
        ("169.255.0.0", None),
        // 172.16.0.0/12
        ("172.15.255.255", None),
        ("172.16.0.0", Some("private")),
        ("172.31.255.255", Some("private")),
        ("172.32.0.0", None),
        // 192.0.0.0/24, whole (192.0.0.9 and 192.0.0.10 included, see V4_DENIED)
        ("191.255.255.255", None),
        ("192.0.0.0", Some("IETF protocol assignment")),
        ("192.0.0.9", Some("IETF protocol assignment")),
        ("192.0.0.10", Some("IETF protocol assignment")),
        ("192.0.0.255", Some("IETF protocol assignment")),
        ("192.0.1.0", None),
        // 192.0.2.0/24 (TEST-NET-1)
        ("192.0.2.0", Some("documentation")),
        ("192.0.2.255", Some("documentation")),
        ("192.0.3.0", None),
        // Globally reachable entries of the registry stay allowed.
        ("192.31.196.1", None),
        ("192.52.193.1", None),
        ("192.175.48.1", None),
        // 192.88.99.0/24
        ("192.88.98.255", None),
        ("192.88.99.0", Some("deprecated 6to4 relay anycast")),
        ("192.88.99.255", Some("deprecated 6to4 relay anycast")),
        ("192.88.100.0", None),
        // 192.168.0.0/16
        ("192.167.255.255", None),
        ("192.168.0.0", Some("private")),
        ("192.168.255.255", Some("private")),
        ("192.169.0.0", None),
        // 198.18.0.0/15
        ("198.17.255.255", None),
        ("198.18.0.0", Some("benchmarking")),
        ("198.19.255.255", Some("benchmarking")),
        ("198.20.0.0", None),
        // 198.51.100.0/24 (TEST-NET-2)
        ("198.51.99.255", None),
        ("198.51.100.0", Some("documentation")),
        ("198.51.100.255", Some("documentation")),
        ("198.51.101.0", None),
        // 203.0.113.0/24 (TEST-NET-3)
        ("203.0.112.255", None),
        ("203.0.113.0", Some("documentation")),
        ("203.0.113.255", Some("documentation")),
        ("203.0.114.0", None),
        // 224.0.0.0/4, then 240.0.0.0/4 up to the limited broadcast
        ("223.255.255.255", None),
        ("224.0.0.0", Some("multicast")),
        ("239.255.255.255", Some("multicast")),
        ("240.0.0.0", Some("reserved or broadcast")),
        ("255.255.255.255", Some("reserved or broadcast")),
        ("8.8.8.8", None),
        ("93.184.216.34", None),
        // ::/128, ::1/128, and the rest of IPv4-compatible ::/96
        ("::", Some("unspecified")),
        ("::1", Some("loopback")),
        ("::2", Some("unspecified (\"this network\")")),
        ("::127.0.0.1", Some("loopback")),
        ("::8.8.8.8", Some("deprecated IPv4-compatible")),
        ("::255.255.255.255", Some("reserved or broadcast")),
        ("::1:0:0", Some("reserved (not global unicast)")),
        // ::ffff:0:0/96, judged as the IPv4 address
        ("::ffff:0.0.0.0", Some("unspecified (\"this network\")")),
        ("::ffff:127.0.0.1", Some("loopback")),
        ("::ffff:8.8.8.8", None),
        ("::ffff:255.255.255.255", Some("reserved or broadcast")),
        ("::1:0:0:0", Some("reserved (not global unicast)")),
        // 64:ff9b::/96 (NAT64), judged by the embedded IPv4 address
        (
            "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("reserved (not global unicast)"),
        ),
        ("64:ff9b::", Some("unspecified (\"this network\")")),
        ("64:ff9b::7f00:1", Some("loopback")),
        ("64:ff9b::a9fe:a9fe", Some("link-local or metadata")),
        ("64:ff9b::c612:1", Some("benchmarking")),
        ("64:ff9b::808:808", None),
        ("64:ff9b::ffff:ffff", Some("reserved or broadcast")),
        ("64:ff9b::1:0:0", Some("reserved (not global unicast)")),
        // 64:ff9b:1::/48, local-use translation, refused whole
        (
            "64:ff9b:0:ffff:ffff:ffff:ffff:ffff",
            Some("reserved (not global unicast)"),
        ),
        ("64:ff9b:1::", Some("local-use IPv4/IPv6 translation")),
        ("64:ff9b:1::7f00:1", Some("local-use IPv4/IPv6 translation")),
        (
            "64:ff9b:1::808:808",
            Some("local-use IPv4/IPv6 translation"),
        ),
        (
            "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
            Some("local-use IPv4/IPv6 translation"),
        ),
        ("64:ff9b:2::", Some("reserved (not global unicast)")),
        // 100::/64 and 100:0:0:1::/64
        ("100::", Some("discard-only")),
        ("100::ffff:ffff:ffff:ffff", Some("discard-only")),
        ("100:0:0:1::", Some("dummy (example)")),
        ("100:0:0:1:ffff:ffff:ffff:ffff", Some("dummy (example)")),
        ("100:0:0:2::", Some("reserved (not global unicast)")),
        // 2000::/3 starts
        (
            "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("reserved (not global unicast)"),
        ),
        ("2000::", None),
        // 2001::/23, Teredo 2001::/32 included
        ("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
        ("2001::", Some("IETF protocol assignment or Teredo")),
        (
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            Some("IETF protocol assignment or Teredo"),
        ),
        ("2001:1::1", Some("IETF protocol assignment or Teredo")),
        (
            "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("IETF protocol assignment or Teredo"),
        ),
        ("2001:200::", None),
        // 2001:db8::/32
        ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", None),
        ("2001:db8::", Some("documentation")),
        (
            "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("documentation"),
        ),
        ("2001:db9::", None),
        // 2002::/16 (6to4), judged by the IPv4 address in bits 16 to 48
        ("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
        ("2002::", Some("unspecified (\"this network\")")),
        ("2002:7f00:1::", Some("loopback")),
        ("2002:a00:1::1", Some("private")),
        ("2002:c0a8:101::", Some("private")),
        ("2002:808:808::", None),
        ("2002:808:808:ffff:ffff:ffff:ffff:ffff", None),
        (
            "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("reserved or broadcast"),
        ),
        ("2003::", None),
        // 3fff::/20
        ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
        ("3fff::", Some("documentation")),
        (
            "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("documentation"),
        ),
        ("3fff:1000::", None),
        ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
        ("4000::", Some("reserved (not global unicast)")),
        // 5f00::/16
        (
            "5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("reserved (not global unicast)"),
        ),
        ("5f00::", Some("segment routing (SRv6 SID)")),
        (
            "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("segment routing (SRv6 SID)"),
        ),
        ("5f01::", Some("reserved (not global unicast)")),
        // fc00::/7
        (
            "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("reserved (not global unicast)"),
        ),
        ("fc00::", Some("private (unique local)")),
        ("fd00:ec2::254", Some("private (unique local)")),
        (
            "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("private (unique local)"),
        ),
        ("fe00::", Some("reserved (not global unicast)")),
        // fe80::/10, fec0::/10, ff00::/8
        (
            "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("reserved (not global unicast)"),
        ),
        ("fe80::", Some("link-local")),
        (
            "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("link-local"),
        ),
        ("fec0::", Some("site-local (deprecated)")),
        (
            "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Some("site-local (deprecated)"),
        ),
        ("ff00::", Some("multicast")),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some("multicast")),
        ("2606:2800:220:1::1", None),
        ("2620:4f:8000::1", None),
    ];

    #[test]
    fn special_purpose_ranges_are_refused_at_their_edges() {
        let strict = TargetPolicy::default();
        let mut wrong = Vec::new();
        for (text, want) in EDGES {
            let ip: IpAddr = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            let got = strict.check_ip(ip).err();
            if got != *want {
                wrong.push(format!("{text}: {got:?}, expected {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// Issue 12, defect 7: loopback inside NAT64 and 6to4, and the benchmarking range, were
    /// accepted.
    #[test]
    fn loopback_in_nat64_and_6to4_and_benchmarking_are_refused() {
        let strict = TargetPolicy::default();
        for ip in [
            "64:ff9b::7f00:1",
            "64:ff9b:1::7f00:1",
            "2002:7f00:1::",
            "198.18.0.1",
            "198.19.0.1",
        ] {
            assert!(strict.check_ip(ip.parse().unwrap()).is_err(), "{ip}");
        }
        let check = |u: &str| strict.check_url(&u.parse().unwrap(), "target.webhook.url");
        for u in [
            "http://[64:ff9b::7f00:1]/",
            "http://[2002:7f00:1::]:8080/",
            "http://198.18.0.1/",
        ] {
            assert_eq!(check(u).unwrap_err().code, "forbidden_target", "{u}");
        }
    }

    /// An allowlisted IPv4 range covers its IPv4-mapped spelling (the same destination) but not
    /// the IPv4 address inside a NAT64 or 6to4 address (a translator's or relay's); those are
    /// allowed by allowlisting the IPv6 range itself.
    #[test]
    fn allowlists_match_the_address_as_dialled() {
        let loopback = TargetPolicy::new(vec!["127.0.0.0/8".parse().unwrap()]);
        assert!(
            loopback
                .check_ip("::ffff:127.0.0.1".parse().unwrap())
                .is_ok()
        );
        assert!(
            loopback
                .check_ip("64:ff9b::7f00:1".parse().unwrap())
                .is_err()
        );
        assert!(loopback.check_ip("2002:7f00:1::".parse().unwrap()).is_err());
        let translator = TargetPolicy::new(vec!["64:ff9b::a00:0/104".parse().unwrap()]);
        assert!(
            translator
                .check_ip("64:ff9b::a00:1".parse().unwrap())
                .is_ok()
        );
        assert!(
            translator
                .check_ip("64:ff9b::7f00:1".parse().unwrap())
                .is_err()
        );
        assert!(translator.check_ip("10.0.0.1".parse().unwrap()).is_err());
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

    /// Development mode allows this host's loopback as dialled, and nothing else it would not
    /// allow anyway: not loopback behind a translator or relay, not private ranges.
    #[test]
    fn development_mode_allows_loopback_only() {
        let dev = TargetPolicy::default().allowing_loopback();
        for ip in ["127.0.0.1", "127.255.255.254", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(dev.check_ip(ip.parse().unwrap()), Ok(()), "{ip}");
        }
        for ip in [
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "10.0.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "::",
        ] {
            assert!(dev.check_ip(ip.parse().unwrap()).is_err(), "{ip}");
        }
        let check = |u: &str| dev.check_url(&u.parse().unwrap(), "target.webhook.url");
        for u in [
            "http://127.0.0.1:9000/hook",
            "http://localhost/",
            "http://[::1]/",
        ] {
            assert!(check(u).is_ok(), "{u}");
        }
        assert!(!TargetPolicy::default().allows_loopback());
        assert!(dev.allows_loopback());
    }

    /// A refusal names the whole range refused for that reason: allowlisting it allows the
    /// address, also for addresses carried inside NAT64 and 6to4 addresses.
    #[test]
    fn refusals_name_the_range_that_would_allow_them() {
        let strict = TargetPolicy::default();
        for (ip, range) in [
            ("127.0.0.1", "127.0.0.0/8"),
            ("::ffff:127.0.0.1", "127.0.0.0/8"),
            ("10.1.2.3", "10.0.0.0/8"),
            ("169.254.169.254", "169.254.0.0/16"),
            ("::1", "::1/128"),
            ("fd00:ec2::254", "fc00::/7"),
            ("64:ff9b::7f00:1", "64:ff9b::7f00:0/104"),
            ("2002:7f00:1::", "2002:7f00::/24"),
            ("::127.0.0.1", "::7f00:0/104"),
            ("::8.8.8.8", "::/96"),
            ("4000::1", "4000::1/128"),
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            let refusal = strict.refusal(ip).unwrap_or_else(|| panic!("{ip} refused"));
            assert_eq!(refusal.range.to_string(), range, "{ip}");
            let allowed = TargetPolicy::new(vec![refusal.range]);
            assert_eq!(allowed.check_ip(ip), Ok(()), "{ip} allowed by {range}");
        }
    }

    #[test]
    fn the_forbidden_target_message_names_the_setting_and_value() {
        let strict = TargetPolicy::default();
        let err = strict
            .check_url(
                &"http://127.0.0.1:9000/".parse().unwrap(),
                "target.webhook.url",
            )
            .unwrap_err();
        assert_eq!(err.code, "forbidden_target");
        assert!(
            err.message
                .contains("restart the node with --allow-targets 127.0.0.0/8 "),
            "{}",
            err.message
        );
        // An allowlist already set is kept in the value to use.
        let some = TargetPolicy::new(vec!["10.20.0.0/16".parse().unwrap()]);
        let err = some
            .check_url(&"http://[::1]/".parse().unwrap(), "target.webhook.url")
            .unwrap_err();
        assert!(
            err.message
                .contains("--allow-targets 10.20.0.0/16,::1/128 "),
            "{}",
            err.message
        );
    }
}
