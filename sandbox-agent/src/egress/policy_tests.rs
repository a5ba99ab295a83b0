use std::net::IpAddr;

use super::*;

fn policy(allowed: &[&str], denied: &[&str]) -> NetworkPolicy {
    NetworkPolicy {
        allowed: allowed
            .iter()
            .map(|d| DomainRule::parse(d, format!("allow {d}")).unwrap())
            .collect(),
        denied: denied
            .iter()
            .map(|d| DomainRule::parse(d, format!("deny {d}")).unwrap())
            .collect(),
        allow_local_binding: false,
        allow_encrypted_client_hello: false,
    }
}

fn allowed(p: &NetworkPolicy, host: &str, port: u16) -> bool {
    p.decide(host, port).allowed
}

#[test]
fn an_empty_allow_list_is_no_egress() {
    let p = policy(&[], &[]);
    assert!(!p.grants_egress());
    let d = p.decide("example.com", 443);
    assert!(!d.allowed);
    assert!(d.rule.contains("no egress"), "{}", d.rule);
}

#[test]
fn exact_names_match_case_and_trailing_dot_insensitively() {
    let p = policy(&["Example.com"], &[]);
    assert!(allowed(&p, "example.com", 443));
    assert!(allowed(&p, "EXAMPLE.COM.", 80));
    assert!(!allowed(&p, "www.example.com", 443));
    assert!(!allowed(&p, "example.com.evil.net", 443));
    assert!(!allowed(&p, "badexample.com", 443));
}

#[test]
fn wildcards_cover_subdomains_not_the_apex() {
    let p = policy(&["*.pypi.org"], &[]);
    assert!(allowed(&p, "files.pypi.org", 443));
    assert!(allowed(&p, "a.b.pypi.org", 443));
    assert!(!allowed(&p, "pypi.org", 443));
    assert!(!allowed(&p, "evilpypi.org", 443));
}

#[test]
fn ports_restrict_an_entry() {
    let p = policy(&["example.com:443", "[2001:db8::1]:8443"], &[]);
    assert!(allowed(&p, "example.com", 443));
    assert!(!allowed(&p, "example.com", 80));
    assert!(allowed(&p, "2001:db8::1", 8443));
    assert!(allowed(&p, "[2001:db8::1]", 8443));
    assert!(!allowed(&p, "2001:db8::1", 443));
}

#[test]
fn deny_wins_over_allow_and_covers_subdomains() {
    let p = policy(
        &["*", "*.example.com"],
        &["evil.com", "secret.example.com:443"],
    );
    assert!(!allowed(&p, "evil.com", 443));
    assert!(!allowed(&p, "cdn.evil.com", 443));
    let d = p.decide("secret.example.com", 443);
    assert!(!d.allowed);
    assert_eq!(d.rule, "denied by deny secret.example.com:443");
    assert!(allowed(&p, "secret.example.com", 80));
    assert!(allowed(&p, "other.org", 443));
}

#[test]
fn ip_literals_pass_only_an_entry_naming_them() {
    let p = policy(&["*", "203.0.113.7"], &[]);
    assert!(allowed(&p, "203.0.113.7", 443));
    let d = p.decide("203.0.113.8", 443);
    assert!(!d.allowed);
    assert!(d.rule.contains("IP address"), "{}", d.rule);
    assert!(!allowed(&p, "::1", 443));
    assert!(!allowed(&policy(&["*.0.113.7"], &[]), "203.0.113.7", 443));
}

#[test]
fn only_the_operators_ip_entries_open_refused_addresses() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    // A repository's or a tenant's entries name the address: the policy lets it pass,
    // but it opens no refused range.
    let theirs = policy(&["169.254.169.254", "127.0.0.1:8420"], &[]);
    assert!(allowed(&theirs, "169.254.169.254", 80));
    assert!(!theirs.may_reach_refused(ip("169.254.169.254"), 80));
    assert!(!theirs.may_reach_refused(ip("127.0.0.1"), 8420));
    let ours = NetworkPolicy {
        allowed: vec![
            DomainRule::parse("127.0.0.1:8420", "user")
                .unwrap()
                .from_operator(),
            DomainRule::parse("*", "user").unwrap().from_operator(),
        ],
        ..NetworkPolicy::default()
    };
    assert!(ours.may_reach_refused(ip("127.0.0.1"), 8420));
    assert!(
        !ours.may_reach_refused(ip("127.0.0.1"), 8421),
        "its port only"
    );
    assert!(
        !ours.may_reach_refused(ip("127.0.0.2"), 8420),
        "that address only"
    );
    // The mark travels with the policy; an entry without it arrives unmarked.
    let back: NetworkPolicy = serde_json::from_str(&serde_json::to_string(&ours).unwrap()).unwrap();
    assert_eq!(back, ours);
    assert!(back.may_reach_refused(ip("127.0.0.1"), 8420));
    let plain = serde_json::to_string(&theirs).unwrap();
    assert!(!plain.contains("operator"), "{plain}");
}

#[test]
fn numbers_the_resolver_reads_as_addresses_are_not_names() {
    let p = policy(&["*"], &["203.0.113.7"]);
    for host in [
        "3405803783",
        "0xcb.0x71.7",
        "203.113.7",
        "0313.0161.0.07",
        "127.1",
        "0x7f000001",
    ] {
        let d = p.decide(host, 443);
        assert!(!d.allowed, "{host}: {d:?}");
        assert!(!p.name_may_resolve(host), "{host}");
    }
    assert!(
        allowed(&p, "1-2-3-4.nip.example", 443),
        "a real name with digits"
    );
    assert!(allowed(&p, "a.b0x7", 443));
}

#[test]
fn invalid_entries_are_refused() {
    for bad in [
        "",
        "*.",
        "a..b",
        "ex ample.com",
        "example.com:0",
        "example.com:99999",
        "*.*.x",
    ] {
        assert!(DomainRule::parse(bad, "t").is_err(), "{bad:?}");
    }
}

#[test]
fn the_dns_stub_answers_allowed_names_only() {
    let p = policy(&["pypi.org:443", "*.crates.io"], &["bad.crates.io"]);
    assert!(p.name_may_resolve("pypi.org"));
    assert!(p.name_may_resolve("static.crates.io."));
    assert!(!p.name_may_resolve("bad.crates.io"));
    assert!(!p.name_may_resolve("x.bad.crates.io"));
    assert!(!p.name_may_resolve("crates.io"));
    assert!(!p.name_may_resolve("evil.org"));
    assert!(!p.name_may_resolve("1.2.3.4"));
    assert!(!policy(&["*"], &[]).name_may_resolve("exfil data.evil.org"));
}

#[test]
fn the_policy_travels_as_its_entries() {
    let p = policy(&["pypi.org:443", "*"], &["[::1]:22"]);
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains("\"entry\":\"pypi.org:443\""), "{json}");
    let back: NetworkPolicy = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);
    // The proxy's ECH key travels only when set: an agent from an older image, which
    // refuses unknown fields, reads what a newer orchestrator sends it.
    assert!(!json.contains("allow_encrypted_client_hello"), "{json}");
    let bad =
        r#"{"allowed":[{"entry":"a b","origin":"x"}],"denied":[],"allow_local_binding":false}"#;
    assert!(serde_json::from_str::<NetworkPolicy>(bad).is_err());
}
