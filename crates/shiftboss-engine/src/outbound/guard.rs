//! The SSRF guard: which addresses an outbound call may reach.
//!
//! A definition names URLs, and definitions may come from people who must not reach the engine's
//! own network (the database, the cloud's metadata service at 169.254.169.254, an admin port on
//! loopback). So every address a call would connect to is checked against the classes below
//! and refused unless the deployment's allow-list opens it. Names are checked on the addresses they
//! resolve to, inside the HTTP client's resolver ([`GuardedResolver`]), so the connection goes to
//! an address that was checked: a name that answers a public address to a first lookup and
//! 127.0.0.1 to a second gets nothing. Literal addresses in a URL never reach a resolver, so
//! [`Guard::check_url`] checks them before every request and every redirect.

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The class of address a refusal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Loopback,
    Private,
    /// 169.254.0.0/16 and fe80::/10, where cloud metadata services answer.
    LinkLocal,
    UniqueLocal,
    Multicast,
    Unspecified,
    Broadcast,
    /// 100.64.0.0/10, the carrier-grade NAT range, private in practice.
    SharedAddressSpace,
    /// Documentation, benchmarking, protocol-assignment and future-use ranges: nothing real lives
    /// there, and some networks route them internally.
    Reserved,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Loopback => "loopback",
            Rule::Private => "private",
            Rule::LinkLocal => "link-local",
            Rule::UniqueLocal => "unique-local",
            Rule::Multicast => "multicast",
            Rule::Unspecified => "unspecified",
            Rule::Broadcast => "broadcast",
            Rule::SharedAddressSpace => "shared address space",
            Rule::Reserved => "reserved",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A call the guard refused: the host, the address and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "outbound call refused: {host} is {addr}, a {rule} address (the SSRF guard; open it with the outbound allow-list)"
)]
pub struct Refusal {
    pub host: String,
    pub addr: IpAddr,
    pub rule: Rule,
}

/// The class an address belongs to, if it is one the guard refuses.
pub fn classify(ip: IpAddr) -> Option<Rule> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Rule> {
    let [a, b, c, _] = ip.octets();
    if ip.is_unspecified() || a == 0 {
        return Some(Rule::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Rule::Loopback);
    }
    if ip.is_private() {
        return Some(Rule::Private);
    }
    if ip.is_link_local() {
        return Some(Rule::LinkLocal);
    }
    if ip.is_multicast() {
        return Some(Rule::Multicast);
    }
    if ip.is_broadcast() {
        return Some(Rule::Broadcast);
    }
    if a == 100 && (64..128).contains(&b) {
        return Some(Rule::SharedAddressSpace);
    }
    let reserved = (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 240;
    reserved.then_some(Rule::Reserved)
}

fn classify_v6(ip: Ipv6Addr) -> Option<Rule> {
    // An IPv4 address written as IPv6 reaches the IPv4 host: judge that.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a gateway may reach.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return classify_v4(Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8));
    }
    if s[0] == 0x2002 {
        let inner = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        if let Some(rule) = classify_v4(inner) {
            return Some(rule);
        }
    }
    if ip.is_unspecified() {
        return Some(Rule::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Rule::Loopback);
    }
    if ip.is_multicast() {
        return Some(Rule::Multicast);
    }
    if (s[0] & 0xffc0) == 0xfe80 {
        return Some(Rule::LinkLocal);
    }
    if (s[0] & 0xfe00) == 0xfc00 {
        return Some(Rule::UniqueLocal);
    }
    // fec0::/10 (the old site-local), ::/96 (IPv4-compatible, deprecated) and 2001:db8::/32.
    if (s[0] & 0xffc0) == 0xfec0 || s[0..6] == [0, 0, 0, 0, 0, 0] || (s[0] == 0x2001 && s[1] == 0x0db8) {
        return Some(Rule::Reserved);
    }
    None
}

/// An address range of the allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.addr, ip) {
            // An allowed IPv4 range also opens the same addresses written as IPv4-mapped IPv6.
            (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => return false,
            },
            _ => ip,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.prefix),
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.prefix),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let full = usize::from(prefix / 8);
    let rest = prefix % 8;
    if a[..full] != b[..full] {
        return false;
    }
    rest == 0 || (a[full] ^ b[full]) >> (8 - rest) == 0
}

/// What the deployment opens: address ranges and host names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    cidrs: Vec<Cidr>,
    /// Lower case, without a trailing dot. A name here may resolve to any address.
    hosts: BTreeSet<String>,
}

/// An allow-list entry that is neither an address, a range nor a host name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("outbound allow-list entry {entry:?}: {problem}")]
pub struct AllowListError {
    pub entry: String,
    pub problem: String,
}

impl AllowList {
    /// Reads entries such as `10.1.0.0/16`, `127.0.0.1`, `::1`, `fd00::/8` or `stock.internal`.
    pub fn parse<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Result<AllowList, AllowListError> {
        let mut list = AllowList::default();
        for entry in entries {
            let entry = entry.as_ref().trim();
            let bad = |problem: &str| AllowListError { entry: entry.to_owned(), problem: problem.to_owned() };
            if entry.is_empty() {
                return Err(bad("empty"));
            }
            let (addr, prefix) = match entry.split_once('/') {
                Some((a, p)) => (a, Some(p)),
                None => (entry, None),
            };
            if let Ok(ip) = addr.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let prefix = match prefix {
                    None => max,
                    Some(p) => {
                        p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| bad("invalid prefix length"))?
                    }
                };
                list.cidrs.push(Cidr { addr: ip, prefix });
                continue;
            }
            if prefix.is_some() {
                return Err(bad("a range needs an IP address before the /"));
            }
            let host = entry.trim_end_matches('.').to_ascii_lowercase();
            let valid = host.len() <= 253
                && host.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                });
            if !valid {
                return Err(bad("not an IP address, a CIDR range or a host name"));
            }
            list.hosts.insert(host);
        }
        Ok(list)
    }

    pub fn is_empty(&self) -> bool {
        self.cidrs.is_empty() && self.hosts.is_empty()
    }

    fn allows_host(&self, host: &str) -> bool {
        !self.hosts.is_empty() && self.hosts.contains(&host.trim_end_matches('.').to_ascii_lowercase())
    }

    fn allows_ip(&self, ip: IpAddr) -> bool {
        self.cidrs.iter().any(|c| c.contains(ip))
    }
}

/// The guard: the refused classes, less what the allow-list opens.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    allow: AllowList,
}

impl Guard {
    pub fn new(allow: AllowList) -> Guard {
        Guard { allow }
    }

    /// Checks one address that `host` names (or is).
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), Refusal> {
        if self.allow.allows_host(host) || self.allow.allows_ip(ip) {
            return Ok(());
        }
        match classify(ip) {
            Some(rule) => Err(Refusal { host: host.to_owned(), addr: ip, rule }),
            None => Ok(()),
        }
    }

    /// Checks a URL whose host is a literal address (names are checked when they resolve).
    pub fn check_url(&self, url: &Url) -> Result<(), Refusal> {
        let Some(host) = url.host_str() else { return Ok(()) };
        match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            Ok(ip) => self.check(host, ip),
            Err(_) => Ok(()),
        }
    }
}

/// The HTTP client's resolver: resolves a name and keeps only the addresses the guard lets
/// through, so the client can connect to nothing else.
pub struct GuardedResolver {
    guard: Arc<Guard>,
    /// A lookup that takes longer fails: the system resolver has no bound of its own we control.
    timeout: Duration,
}

impl GuardedResolver {
    pub fn new(guard: Arc<Guard>, timeout: Duration) -> GuardedResolver {
        GuardedResolver { guard, timeout }
    }
}

/// A lookup that found nothing, or took too long.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("looking up {0}: {1}")]
    Failed(String, std::io::Error),
    #[error("looking up {0}: no answer within {1:?}")]
    TimedOut(String, Duration),
    #[error("looking up {0}: no address")]
    Empty(String),
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found = tokio::time::timeout(timeout, tokio::net::lookup_host((host.as_str(), 0)))
                .await
                .map_err(|_| LookupError::TimedOut(host.clone(), timeout))?
                .map_err(|e| LookupError::Failed(host.clone(), e))?;
            let mut kept: Vec<SocketAddr> = Vec::new();
            let mut refused = None;
            for addr in found {
                match guard.check(&host, addr.ip()) {
                    Ok(()) => kept.push(addr),
                    Err(r) => refused = refused.or(Some(r)),
                }
            }
            if kept.is_empty() {
                return Err(match refused {
                    Some(r) => Box::new(r) as Box<dyn std::error::Error + Send + Sync>,
                    None => Box::new(LookupError::Empty(host)),
                });
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> Option<Rule> {
        classify(s.parse().unwrap())
    }

    #[test]
    fn every_refused_class_is_named() {
        for (addr, want) in [
            ("127.0.0.1", Rule::Loopback),
            ("127.255.0.9", Rule::Loopback),
            ("::1", Rule::Loopback),
            ("10.0.0.1", Rule::Private),
            ("172.16.5.4", Rule::Private),
            ("192.168.1.1", Rule::Private),
            ("169.254.169.254", Rule::LinkLocal),
            ("fe80::1", Rule::LinkLocal),
            ("fc00::1", Rule::UniqueLocal),
            ("fd12:3456::1", Rule::UniqueLocal),
            ("224.0.0.1", Rule::Multicast),
            ("ff02::1", Rule::Multicast),
            ("0.0.0.0", Rule::Unspecified),
            ("0.1.2.3", Rule::Unspecified),
            ("::", Rule::Unspecified),
            ("255.255.255.255", Rule::Broadcast),
            ("100.64.0.1", Rule::SharedAddressSpace),
            ("192.0.2.1", Rule::Reserved),
            ("240.0.0.1", Rule::Reserved),
            ("2001:db8::1", Rule::Reserved),
            // IPv4 written as IPv6 is judged as IPv4.
            ("::ffff:127.0.0.1", Rule::Loopback),
            ("::ffff:169.254.169.254", Rule::LinkLocal),
            ("64:ff9b::a00:1", Rule::Private),
            ("2002:7f00:1::", Rule::Loopback),
        ] {
            assert_eq!(rule(addr), Some(want), "{addr}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert_eq!(rule(public), None, "{public}");
        }
    }

    #[test]
    fn the_allow_list_opens_ranges_and_names() {
        let g = Guard::new(AllowList::parse(["10.1.0.0/16", "::1", "Stock.Internal."]).unwrap());
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(g.check("x", ip("10.1.200.3")).is_ok());
        assert!(g.check("x", ip("::ffff:10.1.0.1")).is_ok());
        let r = g.check("x", ip("10.2.0.1")).unwrap_err();
        assert_eq!(r.rule, Rule::Private);
        assert!(r.to_string().contains("private"), "{r}");
        assert!(g.check("x", ip("::1")).is_ok());
        assert!(g.check("x", ip("127.0.0.1")).is_err());
        assert!(g.check("stock.internal", ip("127.0.0.1")).is_ok());
        assert!(g.check("STOCK.internal.", ip("10.9.9.9")).is_ok());
        assert!(g.check("other.internal", ip("10.9.9.9")).is_err());
        let url = Url::parse("http://169.254.169.254/latest/meta-data").unwrap();
        assert_eq!(g.check_url(&url).unwrap_err().rule, Rule::LinkLocal);
        assert!(g.check_url(&Url::parse("http://[::1]:8080/").unwrap()).is_ok());
        assert!(g.check_url(&Url::parse("http://localhost/").unwrap()).is_ok(), "names wait for the resolver");
    }

    #[test]
    fn bad_entries_are_named() {
        for bad in ["", "10.0.0.0/33", "::/129", "host/8", "a b", "x..y"] {
            let e = AllowList::parse([bad]).unwrap_err();
            assert_eq!(e.entry, bad.trim());
        }
        let all = AllowList::parse(["0.0.0.0/0"]).unwrap();
        assert!(all.allows_ip("127.0.0.1".parse().unwrap()));
    }
}
