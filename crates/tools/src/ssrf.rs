//! Which addresses `web_fetch` may reach: never the machine itself, its
//! private network, link-local (cloud metadata at 169.254.169.254), CGNAT,
//! multicast or unspecified addresses, in any spelling, unless config allows
//! them. URL hosts are normalised by the WHATWG URL parser first, so
//! `2130706433`, `0x7f.1`, `127.1` and `0177.0.0.1` are all `127.0.0.1`.
//!
//! ```
//! use ferroclaw_tools::ssrf::forbidden_address;
//! assert!(forbidden_address("169.254.169.254".parse().unwrap()).is_some());
//! assert!(forbidden_address("93.184.216.34".parse().unwrap()).is_none());
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why an address is off limits, or `None` for a public address.
pub fn forbidden_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b) {
        (127, _) => "a loopback address (this machine)",
        (0, _) => "an unspecified address (this machine)",
        (10, _) | (192, 168) => "a private network address",
        (172, 16..=31) => "a private network address",
        (169, 254) if ip == Ipv4Addr::new(169, 254, 169, 254) => "the cloud metadata service",
        (169, 254) => "a link-local address",
        (100, 64..=127) => "a carrier-grade NAT address",
        (192, 0) if c == 0 => "an IETF protocol address (metadata services live there)",
        (198, 18..=19) => "a benchmarking network address",
        (224..=239, _) => "a multicast address",
        (240..=255, _) => "a reserved or broadcast address",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_loopback() {
        return Some("a loopback address (this machine)");
    }
    if ip.is_unspecified() {
        return Some("an unspecified address (this machine)");
    }
    let s = ip.segments();
    // Addresses that carry an IPv4 address: mapped (::ffff:a.b.c.d),
    // compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::).
    let embedded = if let Some(v4) = ip.to_ipv4_mapped() {
        Some(v4)
    } else if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        Some(Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8))
    } else if s[0] == 0x2002 {
        Some(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8))
    } else {
        None
    };
    if let Some(v4) = embedded {
        return forbidden_v4(v4);
    }
    Some(match s[0] {
        0xfc00..=0xfdff => "a unique-local (private) address",
        0xfe80..=0xfebf => "a link-local address",
        0xfec0..=0xfeff => "a site-local address",
        0xff00..=0xffff => "a multicast address",
        _ => return None,
    })
}

/// A refused destination; the text says which and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (allow it with [web_fetch] allow_private = [...] in config if you mean it)",
            self.0
        )
    }
}

impl std::error::Error for Refused {}

/// Private destinations config allows: IPs, CIDR ranges and host names.
#[derive(Debug, Default, Clone)]
pub struct PrivateAllowList {
    nets: Vec<(IpAddr, u8)>,
    hosts: Vec<String>,
}

impl PrivateAllowList {
    /// Parses `127.0.0.1`, `10.0.0.0/8`, `::1`, `[::1]`, `localhost`.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut list = Self::default();
        for entry in entries {
            let text = entry.trim().trim_start_matches('[').trim_end_matches(']');
            let (addr, bits) = match text.split_once('/') {
                Some((a, b)) => (a, Some(b)),
                None => (text, None),
            };
            match addr.parse::<IpAddr>() {
                Ok(ip) => {
                    let max = if ip.is_ipv4() { 32 } else { 128 };
                    let bits = match bits {
                        None => max,
                        Some(b) => b.parse::<u8>().ok().filter(|b| *b <= max).ok_or_else(|| {
                            format!("web_fetch allow_private: bad prefix length in {entry:?}")
                        })?,
                    };
                    list.nets.push((ip, bits));
                }
                Err(_) if bits.is_none() && !text.is_empty() && !text.contains(['/', ' ']) => {
                    list.hosts.push(text.to_ascii_lowercase());
                }
                Err(_) => {
                    return Err(format!(
                        "web_fetch allow_private: {entry:?} is not an IP, CIDR range or host name"
                    ));
                }
            }
        }
        Ok(list)
    }

    /// True when config allows `ip` although it is private.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.nets.iter().any(|(net, bits)| in_net(ip, canonical(*net), *bits))
    }

    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    /// Why `ip` may not be reached, or `None`.
    pub fn check_ip(&self, ip: IpAddr) -> Option<&'static str> {
        forbidden_address(ip).filter(|_| !self.allows_ip(ip))
    }

    /// Checks a URL whose host is an address (names are checked when they
    /// are resolved, by [`CheckedResolver`]).
    pub fn check_url(&self, url: &Url) -> Option<Refused> {
        let ip = match url.host()? {
            url::Host::Ipv4(v4) => IpAddr::V4(v4),
            url::Host::Ipv6(v6) => IpAddr::V6(v6),
            url::Host::Domain(d) => {
                let d = d.trim_end_matches('.').to_ascii_lowercase();
                let local = d == "localhost" || d.ends_with(".localhost");
                if local && !self.allows_host(&d) {
                    return Some(Refused(format!("{d} is this machine")));
                }
                return None;
            }
        };
        self.check_ip(ip).map(|why| Refused(format!("{ip} is {why}")))
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`, so allow entries match either spelling.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if bits == 0 { 0 } else { u32::MAX << (32 - u32::from(bits)) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if bits == 0 { 0 } else { u128::MAX << (128 - u32::from(bits)) };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// The DNS resolver of `web_fetch`: resolves with the system, refuses names
/// with any forbidden address, and hands the client exactly the addresses it
/// checked, so the connection cannot go anywhere else.
#[derive(Debug, Clone)]
pub struct CheckedResolver {
    allow: Arc<PrivateAllowList>,
}

impl CheckedResolver {
    /// A resolver that allows the private destinations in `allow`.
    pub fn new(allow: Arc<PrivateAllowList>) -> Self {
        Self { allow }
    }
}

impl PrivateAllowList {
    /// Why `host`, resolving to `addrs`, may not be reached, or `None`.
    pub fn check_addrs(&self, host: &str, addrs: &[IpAddr]) -> Option<Refused> {
        if self.allows_host(host) {
            return None;
        }
        addrs.iter().find_map(|ip| {
            self.check_ip(*ip).map(|why| Refused(format!("{host} resolves to {ip}, {why}")))
        })
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?
                .collect();
            let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
            if let Some(refused) = allow.check_addrs(&host, &ips) {
                return Err(Box::new(refused) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The host a fetch of `url` connects to, lowercased and without a trailing
/// dot, read by the same (WHATWG) parser web_fetch uses: `\\` is a `/` there,
/// `%65` is `e` and tabs are dropped, so `https://evil.example\\@docs.rs/`
/// names `evil.example`. `None` for text web_fetch would refuse as a URL.
pub fn url_host(url: &str) -> Option<String> {
    let parsed = Url::parse(url.trim()).ok()?;
    let host = match parsed.host()? {
        url::Host::Domain(d) => d.trim_end_matches('.').to_string(),
        url::Host::Ipv4(v4) => v4.to_string(),
        url::Host::Ipv6(v6) => format!("[{v6}]"),
    };
    (!host.is_empty()).then_some(host)
}

/// Why a fetch of `url` would be refused before any DNS look-up (bad URL,
/// scheme, or a forbidden address literal), for checks outside the tool.
pub fn check_url_text(url: &str, allow: &PrivateAllowList) -> Result<(), String> {
    let parsed = Url::parse(url.trim()).map_err(|e| format!("not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("scheme {} is not http(s)", parsed.scheme()));
    }
    match allow.check_url(&parsed) {
        Some(refused) => Err(refused.to_string()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> bool {
        check_url_text(url, &PrivateAllowList::default()).is_err()
    }

    #[test]
    fn loopback_in_every_spelling_is_refused() {
        for url in [
            "http://127.0.0.1/",
            "http://localhost:8080/",
            "http://[::1]/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://0.0.0.0/",
            "http://[::ffff:127.0.0.1]/",
            "http://0177.0.0.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[fd00::1]/",
            "http://10.1.2.3/",
            "http://100.64.0.1/",
            "http://224.0.0.1/",
        ] {
            assert!(refused(url), "{url} should be refused");
        }
    }

    #[test]
    fn public_addresses_and_names_pass_the_literal_check() {
        assert!(!refused("https://93.184.216.34/"));
        assert!(!refused("https://example.com/"));
        assert!(!refused("http://[2606:4700::1111]/"));
    }

    #[test]
    fn config_can_allow_a_private_address_or_range() {
        let allow = PrivateAllowList::parse(&["127.0.0.1".into(), "10.0.0.0/8".into()]).unwrap();
        assert!(check_url_text("http://127.0.0.1:9/", &allow).is_ok());
        assert!(check_url_text("http://10.9.9.9/", &allow).is_ok());
        assert!(check_url_text("http://[::1]/", &allow).is_err());
        assert!(PrivateAllowList::parse(&["10.0.0.0/99".into()]).is_err());
    }
}
