//! The addresses the egress proxy never connects to: `policies/network-refused.json`,
//! compiled in and checked when first used (every range says why, and carries addresses
//! it must and must not cover).
//!
//! The check runs on the addresses a name resolved to, not on the name, so a name an
//! attacker points at `127.0.0.1` or `169.254.169.254` (DNS rebinding) is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use serde::Deserialize;

const POLICY: &str = include_str!("../../../policies/network-refused.json");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Policy {
    version: u32,
    #[allow(dead_code)]
    why: String,
    ranges: Vec<RangeEntry>,
    #[allow(dead_code)]
    embedded_ipv4: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeEntry {
    cidr: String,
    why: String,
    covers: Vec<IpAddr>,
    excludes: Vec<IpAddr>,
}

/// One refused range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text}: expected ADDRESS/PREFIX"))?;
        let addr: IpAddr = addr.parse().map_err(|e| format!("{text}: {e}"))?;
        let prefix: u8 = prefix.parse().map_err(|e| format!("{text}: {e}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(format!("{text}: prefix longer than {max}"));
        }
        Ok(Cidr { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(
                u128::from(u32::from(net)),
                u128::from(u32::from(ip)),
                32,
                self.prefix,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(u128::from(net), u128::from(ip), 128, self.prefix)
            }
            _ => false,
        }
    }
}

fn prefix_eq(a: u128, b: u128, bits: u8, prefix: u8) -> bool {
    let shift = u32::from(bits - prefix);
    a.checked_shr(shift).unwrap_or(0) == b.checked_shr(shift).unwrap_or(0)
}

/// A refused range and why it is refused.
#[derive(Debug, Clone)]
pub struct RefusedRange {
    pub cidr: Cidr,
    pub why: String,
}

fn parse(text: &str) -> Result<Vec<RefusedRange>, String> {
    let policy: Policy = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if policy.version != 1 {
        return Err(format!("unknown version {}", policy.version));
    }
    let mut out = Vec::new();
    for r in policy.ranges {
        let cidr = Cidr::parse(&r.cidr)?;
        if r.why.trim().is_empty() || r.covers.is_empty() {
            return Err(format!(
                "{}: every range needs a why and an example",
                r.cidr
            ));
        }
        if let Some(miss) = r.covers.iter().find(|ip| !cidr.contains(**ip)) {
            return Err(format!("{}: does not cover its example {miss}", r.cidr));
        }
        if let Some(hit) = r.excludes.iter().find(|ip| cidr.contains(**ip)) {
            return Err(format!(
                "{}: covers {hit}, which it says it excludes",
                r.cidr
            ));
        }
        out.push(RefusedRange { cidr, why: r.why });
    }
    Ok(out)
}

/// The compiled-in ranges. Security: should the file ever fail to parse (a test guards
/// it), every address is refused: failing closed only narrows.
fn ranges() -> &'static Result<Vec<RefusedRange>, String> {
    static RANGES: OnceLock<Result<Vec<RefusedRange>, String>> = OnceLock::new();
    RANGES.get_or_init(|| {
        let parsed = parse(POLICY);
        if let Err(e) = &parsed {
            tracing::error!("policies/network-refused.json: {e}; refusing every address");
        }
        parsed
    })
}

/// The IPv4 address an IPv6 address carries (mapped, compatible, NAT64 well-known
/// prefix), which is where a connection to it really goes.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let seg = ip.segments();
    let nat64 = seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let compatible = seg[..6] == [0; 6] && (seg[6] != 0 || seg[7] > 1);
    (nat64 || compatible).then(|| {
        let [.., a, b, c, d] = ip.octets();
        Ipv4Addr::new(a, b, c, d)
    })
}

/// Why `ip` is refused, or `None` when the proxy may connect to it.
pub fn refusal(ip: IpAddr) -> Option<String> {
    let ip = match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ranges() {
        Ok(ranges) => ranges
            .iter()
            .find(|r| r.cidr.contains(ip))
            .map(|r| format!("{ip} is refused: {}", r.why)),
        Err(e) => Some(format!("the refused-address policy is invalid ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_policy_is_valid() {
        let ranges = parse(POLICY).unwrap();
        assert!(ranges.len() > 10);
    }

    #[test]
    fn private_loopback_metadata_and_cgnat_are_refused() {
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.20.1.1",
            "192.168.0.10",
            "100.100.100.100",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "::10.0.0.1",
        ] {
            assert!(refusal(ip.parse().unwrap()).is_some(), "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "1.1.1.1",
            "93.184.216.34",
            "203.0.113.7",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(refusal(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn a_policy_whose_example_contradicts_its_range_is_refused() {
        let bad = r#"{"version":1,"why":"x","embedded_ipv4":"x","ranges":[
            {"cidr":"10.0.0.0/8","why":"x","covers":["11.0.0.1"],"excludes":[]}]}"#;
        assert!(parse(bad).unwrap_err().contains("does not cover"));
        let bad = r#"{"version":1,"why":"x","embedded_ipv4":"x","ranges":[
            {"cidr":"10.0.0.0/8","why":"x","covers":["10.0.0.1"],"excludes":["10.9.9.9"]}]}"#;
        assert!(parse(bad).unwrap_err().contains("excludes"));
    }

    #[test]
    fn cidr_edges() {
        let c = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(c.contains("8.8.8.8".parse().unwrap()));
        let c = Cidr::parse("1.2.3.4/32").unwrap();
        assert!(c.contains("1.2.3.4".parse().unwrap()));
        assert!(!c.contains("1.2.3.5".parse().unwrap()));
        assert!(Cidr::parse("1.2.3.4/33").is_err());
    }
}
