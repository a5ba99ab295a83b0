//! Which hosts and ports a session may reach: Claude Code's `sandbox.network` keys.
//!
//! - `allowedDomains`: `example.com` (that host), `*.example.com` (its subdomains, not the
//!   apex), `*` (every name, never an IP literal), each with an optional `:port`
//!   (`example.com:443`); an IP address (`203.0.113.7`, `[2001:db8::1]:443`) names that
//!   address only.
//! - `deniedDomains`: the same patterns; a deny always wins over an allow. A denied domain
//!   also covers its subdomains (`evil.com` denies `a.evil.com`).
//! - `WebFetch(domain:x)` allow and deny rules add `x` to the allow and deny lists.
//! - An empty allow list means no egress at all.
//!
//! [`NetworkPolicy::decide`] names the rule that decided, for the connection record;
//! [`NetworkPolicy::name_may_resolve`] is what the sandbox's DNS stub answers by. The
//! orchestrator builds the policy from its settings and hands it to the agent (it travels
//! as the entries' text, parsed again on arrival).

use std::net::IpAddr;

/// What a pattern matches of a host.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// Exactly this name (lowercase, no trailing dot).
    Name(String),
    /// Any name strictly below this one (`*.example.com` holds `example.com`).
    Below(String),
    /// Every name (`*`); never an IP literal.
    AnyName,
    /// Exactly this address.
    Ip(IpAddr),
}

/// One entry of an allow or deny list, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "RawRule", into = "RawRule")]
pub struct DomainRule {
    host: HostPattern,
    port: Option<u16>,
    /// The entry as written.
    text: String,
    /// Where it came from (`managed: allowedDomains example.com`).
    pub origin: String,
    /// Written by the operator or the user (the managed or the user's own settings): only
    /// such an IP entry may name a refused address (loopback, private, metadata; see
    /// [`NetworkPolicy::may_reach_refused`]). False for a repository's entries and the
    /// command line's, where a server session's request settings sit.
    operator: bool,
}

/// A [`DomainRule`] on the wire.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    entry: String,
    origin: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    operator: bool,
}

impl TryFrom<RawRule> for DomainRule {
    type Error = DomainError;
    fn try_from(raw: RawRule) -> Result<Self, Self::Error> {
        let rule = DomainRule::parse(&raw.entry, raw.origin)?;
        Ok(if raw.operator {
            rule.from_operator()
        } else {
            rule
        })
    }
}

impl From<DomainRule> for RawRule {
    fn from(rule: DomainRule) -> RawRule {
        RawRule {
            entry: rule.text,
            origin: rule.origin,
            operator: rule.operator,
        }
    }
}

/// Why a domain entry is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid domain entry {text:?}: {problem}")]
pub struct DomainError {
    pub text: String,
    pub problem: &'static str,
}

/// A host name as the policy compares it: lowercase, without a trailing dot.
pub fn normalize_host(host: &str) -> String {
    let host = host.trim().trim_end_matches('.');
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.to_ascii_lowercase()
}

impl DomainRule {
    /// The entry as written (`*.example.com:443`).
    pub fn entry(&self) -> &str {
        &self.text
    }

    /// Whether this entry, read as an allow entry, covers `host` (a name or an IP literal)
    /// on `port`: how a brokered credential's domain is matched.
    pub fn covers(&self, host: &str, port: u16) -> bool {
        let host = normalize_host(host);
        let ip = host.parse::<IpAddr>().ok();
        self.allows(&host, ip, port)
    }

    /// Whether the entry is `*` (every name), with or without a port.
    pub fn names_every_host(&self) -> bool {
        self.host == HostPattern::AnyName
    }
}

impl DomainRule {
    /// Parses `host`, `*.host`, `*`, `host:port`, an IP address or `[v6]:port`.
    pub fn parse(text: &str, origin: impl Into<String>) -> Result<DomainRule, DomainError> {
        let bad = |problem| DomainError {
            text: text.to_string(),
            problem,
        };
        let trimmed = text.trim();
        let (host, port) = split_port(trimmed).ok_or_else(|| bad("a port must be 1 to 65535"))?;
        let pattern = if let Some(base) = host.trim().strip_prefix("*.") {
            let base = normalize_host(base);
            check_name(&base).ok_or_else(|| bad("expected a domain name after *."))?;
            HostPattern::Below(base)
        } else if let Ok(ip) = normalize_host(host).parse::<IpAddr>() {
            HostPattern::Ip(ip)
        } else if host.trim() == "*" {
            HostPattern::AnyName
        } else {
            let host = normalize_host(host);
            check_name(&host)
                .ok_or_else(|| bad("expected a domain name, *.domain, * or an IP address"))?;
            HostPattern::Name(host)
        };
        Ok(DomainRule {
            host: pattern,
            port,
            text: trimmed.to_string(),
            origin: origin.into(),
            operator: false,
        })
    }

    /// The same entry, marked as the operator's or the user's own (see `operator`).
    #[must_use]
    pub fn from_operator(mut self) -> DomainRule {
        self.operator = true;
        self
    }

    /// Whether this entry, as an allow entry, lets `host` (normalized) on `port` through.
    fn allows(&self, host: &str, ip: Option<IpAddr>, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, ip) {
            (HostPattern::Ip(want), Some(ip)) => *want == ip,
            (_, Some(_)) | (HostPattern::Ip(_), None) => false,
            (HostPattern::AnyName, None) => true,
            (HostPattern::Name(n), None) => n == host,
            (HostPattern::Below(base), None) => is_below(host, base),
        }
    }

    /// Whether this entry, as a deny entry, covers `host` on `port`: a denied name also
    /// covers its subdomains (security: denying `evil.com` must not leave `x.evil.com`).
    fn denies(&self, host: &str, ip: Option<IpAddr>, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, ip) {
            (HostPattern::Ip(want), Some(ip)) => *want == ip,
            (HostPattern::AnyName, _) => true,
            (HostPattern::Name(n), None) => n == host || is_below(host, n),
            (HostPattern::Below(base), None) => is_below(host, base),
            _ => false,
        }
    }
}

fn is_below(host: &str, base: &str) -> bool {
    host.len() > base.len() + 1
        && host.ends_with(base)
        && host.as_bytes()[host.len() - base.len() - 1] == b'.'
}

/// Splits an optional `:port`; `None` when the port is not a valid one.
fn split_port(text: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(p) => Some((host, Some(parse_port(p)?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    // A bare IPv6 address has several colons and no port.
    if text.matches(':').count() > 1 {
        return Some((text, None));
    }
    match text.rsplit_once(':') {
        Some((host, p)) => Some((host, Some(parse_port(p)?))),
        None => Some((text, None)),
    }
}

fn parse_port(p: &str) -> Option<u16> {
    p.parse::<u16>().ok().filter(|p| *p != 0)
}

/// `Some(())` when `name` is a plausible DNS name (labels of letters, digits, `-`, `_`).
fn check_name(name: &str) -> Option<()> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    ok.then_some(())
}

/// A name the resolver takes as a name: plausible labels, and a last label that is not
/// a number (`7`, `0x7`, `3405803783`), which no top-level domain is and which the system
/// resolver would read as (part of) an IPv4 address.
fn is_domain_name(host: &str) -> bool {
    let last = host.rsplit('.').next().unwrap_or("");
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || last
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    check_name(host).is_some() && !numeric
}

/// The outcome for one host and port.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    pub allowed: bool,
    /// The entry that decided, or why nothing did.
    pub rule: String,
}

/// A session's egress policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    pub allowed: Vec<DomainRule>,
    pub denied: Vec<DomainRule>,
    /// `allowLocalBinding`: sandboxed processes may listen on the sandbox's loopback.
    pub allow_local_binding: bool,
    /// `allowEncryptedClientHello` (the operator's only): tunnels may carry an encrypted
    /// ClientHello, whose sealed server name the proxy cannot check. The proxy's alone:
    /// the agent is never sent it (an agent from an older image refuses unknown fields).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_encrypted_client_hello: bool,
}

impl NetworkPolicy {
    /// Whether any egress is possible at all.
    pub fn grants_egress(&self) -> bool {
        !self.allowed.is_empty()
    }

    /// Whether the sandbox's DNS stub answers for `name`: some allow entry covers it on
    /// some port and no port-less deny entry covers it. IP literals are never names.
    pub fn name_may_resolve(&self, name: &str) -> bool {
        let host = normalize_host(name);
        if host.parse::<IpAddr>().is_ok() || !is_domain_name(&host) {
            return false;
        }
        let denied = self
            .denied
            .iter()
            .any(|d| d.port.is_none() && d.denies(&host, None, 0));
        let allowed = self.allowed.iter().any(|a| match a.port {
            Some(p) => a.allows(&host, None, p),
            None => a.allows(&host, None, 0),
        });
        allowed && !denied
    }

    /// Whether the IP literal `ip` may be dialled on `port` although it lies in a refused
    /// range: only when an allow entry naming exactly it was written by the operator or
    /// the user.
    ///
    /// Security: a repository's settings, or a server tenant's request settings, that
    /// name `169.254.169.254` or `127.0.0.1:8420` would otherwise hand the sandbox the
    /// cloud metadata service or the host's own loopback services. The caller has already
    /// asked [`NetworkPolicy::decide`], so a deny entry still wins.
    pub fn may_reach_refused(&self, ip: IpAddr, port: u16) -> bool {
        self.allowed.iter().any(|a| {
            a.operator && a.host == HostPattern::Ip(ip) && a.port.is_none_or(|p| p == port)
        })
    }

    /// Whether `host` (a name or an IP literal) may be reached on `port`. A deny entry
    /// wins over every allow entry; an IP literal passes only an entry naming it.
    pub fn decide(&self, host: &str, port: u16) -> Decision {
        let host = normalize_host(host);
        let ip = host.parse::<IpAddr>().ok();
        // Security: the resolver reads `3405803783`, `0xcb.0x71.7` or `203.113.7` as an
        // IPv4 address; as "names" they would pass `*` (which never matches an address)
        // and slip past a deny entry naming that address.
        if ip.is_none() && !is_domain_name(&host) {
            return Decision {
                allowed: false,
                rule: "neither an IP address nor a domain name".to_string(),
            };
        }
        if let Some(d) = self.denied.iter().find(|d| d.denies(&host, ip, port)) {
            return Decision {
                allowed: false,
                rule: format!("denied by {}", d.origin),
            };
        }
        if let Some(a) = self.allowed.iter().find(|a| a.allows(&host, ip, port)) {
            return Decision {
                allowed: true,
                rule: format!("allowed by {}", a.origin),
            };
        }
        let rule = match (self.allowed.is_empty(), ip) {
            (true, _) => "no allowedDomains: no egress".to_string(),
            (false, Some(_)) => "an IP address no allowedDomains entry names".to_string(),
            (false, None) => "no allowedDomains entry matches".to_string(),
        };
        Decision {
            allowed: false,
            rule,
        }
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
