use serde_json::json;

use super::*;
use crate::network::policy::NetworkPolicy;
use crate::settings::{LoadedFile, Source};

fn allowed(p: &NetworkPolicy, host: &str, port: u16) -> bool {
    p.decide(host, port).allowed
}

fn file(source: Source, value: serde_json::Value) -> LoadedFile {
    LoadedFile {
        source,
        origin: format!("{source}.json"),
        value,
    }
}

#[test]
fn layers_merge_allows_and_denies_and_webfetch_rules() {
    let files = vec![
        file(
            Source::Managed,
            json!({"sandbox": {"network": {"deniedDomains": ["evil.com"]}}}),
        ),
        file(
            Source::User,
            json!({
                "sandbox": {"network": {"allowedDomains": ["pypi.org"], "allowLocalBinding": true}},
                "permissions": {"allow": ["WebFetch(domain:docs.rs)", "Bash"], "deny": ["WebFetch(domain:bad.rs)"]}
            }),
        ),
    ];
    let r = from_files(&files, false).unwrap();
    let p = &r.policy;
    assert!(allowed(p, "pypi.org", 443));
    assert!(allowed(p, "docs.rs", 443));
    assert!(!allowed(p, "bad.rs", 443));
    assert!(!allowed(p, "evil.com", 443));
    assert!(p.allow_local_binding);
    assert_eq!(
        p.decide("docs.rs", 443).rule,
        "allowed by user: permissions.allow WebFetch(domain:docs.rs)"
    );
}

#[test]
fn the_managed_lock_keeps_other_layers_from_widening() {
    let files = vec![
        file(
            Source::Managed,
            json!({"sandbox": {"network": {"allowManagedDomainsOnly": true, "allowedDomains": ["pypi.org"]}}}),
        ),
        file(
            Source::Cli,
            json!({"sandbox": {"network": {"allowedDomains": ["*"], "deniedDomains": ["x.org"], "allowLocalBinding": true}},
                   "permissions": {"allow": ["WebFetch(domain:docs.rs)"]}}),
        ),
    ];
    let r = from_files(&files, false).unwrap();
    assert!(r.managed_only);
    assert!(allowed(&r.policy, "pypi.org", 443));
    assert!(!allowed(&r.policy, "example.com", 443));
    assert!(!allowed(&r.policy, "docs.rs", 443));
    assert!(!r.policy.allow_local_binding);
    // Narrowing still counts.
    assert_eq!(r.policy.denied.len(), 1);
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
}

#[test]
fn the_lock_counts_only_from_the_managed_settings() {
    let files = vec![file(
        Source::User,
        json!({"sandbox": {"network": {"allowManagedDomainsOnly": true, "allowedDomains": ["a.org"]}}}),
    )];
    let r = from_files(&files, false).unwrap();
    assert!(!r.managed_only);
    assert!(allowed(&r.policy, "a.org", 443));
    assert!(r.warnings[0].contains("honoured only in the managed"));
}

#[test]
fn settings_validation_checks_the_network_object() {
    assert!(
        check(&json!({"allowedDomains": ["ok.org", "*.ok.org:443"]}))
            .unwrap()
            .is_empty()
    );
    assert!(check(&json!({"allowedDomains": "ok.org"})).is_err());
    assert!(check(&json!({"allowedDomains": ["bad domain"]})).is_err());
    assert!(check(&json!({"allowLocalBinding": "yes"})).is_err());
    assert_eq!(check(&json!({"httpProxyPort": 1})).unwrap().len(), 1);
}

#[test]
fn the_summary_says_no_network_or_which_domains() {
    let none = from_files(&[file(Source::User, json!({}))], false).unwrap();
    assert_eq!(none.summary()["egress"], "none");
    assert!(
        none.describe().starts_with("no network"),
        "{}",
        none.describe()
    );
    let files = vec![
        file(
            Source::Managed,
            json!({"sandbox": {"network": {"deniedDomains": ["evil.test"]}}}),
        ),
        file(
            Source::User,
            json!({"sandbox": {"network": {"allowedDomains": ["*.pypi.test:443"]}}}),
        ),
    ];
    let some = from_files(&files, false).unwrap();
    let s = some.summary();
    assert_eq!(s["egress"], "proxy");
    assert_eq!(s["allowedDomains"][0]["entry"], "*.pypi.test:443");
    assert_eq!(
        s["allowedDomains"][0]["origin"],
        "user: allowedDomains *.pypi.test:443"
    );
    assert_eq!(s["deniedDomains"][0]["entry"], "evil.test");
    assert_eq!(s["allowLocalBinding"], false);
    assert_eq!(
        some.describe(),
        "egress through the session's proxy to *.pypi.test:443; denied: evil.test"
    );
}

/// Brokered credentials count from the managed and the user's settings only: a
/// repository's files and the command line's settings are ignored, each with a warning.
#[test]
fn brokered_credentials_come_from_the_managed_and_user_settings_only() {
    let entry = |domain: &str| {
        json!({"sandbox": {"network": {
            "allowedDomains": [domain],
            "brokeredCredentials": [{"domain": domain, "header": "Authorization", "valueFromEnv": "TOKEN"}]
        }}})
    };
    let files = vec![
        file(Source::Managed, entry("managed.test")),
        file(Source::Cli, entry("cli.test")),
        file(Source::Local, entry("local.test")),
        file(Source::Project, entry("project.test")),
        file(Source::User, entry("user.test")),
    ];
    let r = from_files(&files, false).unwrap();
    let domains: Vec<&str> = r.credentials.iter().map(|c| c.domain.entry()).collect();
    assert_eq!(domains, ["managed.test", "user.test"]);
    for ignored in ["cli.json", "local.json", "project.json"] {
        assert!(
            r.warnings.iter().any(|w| w.starts_with(ignored)
                && w.contains("honoured only in the managed and the user's")),
            "{ignored}: {:?}",
            r.warnings
        );
    }
    let s = r.summary();
    assert_eq!(s["brokeredCredentials"][1]["from"], "env TOKEN");
    assert_eq!(
        s["brokeredCredentials"][1]["origin"],
        "user: brokeredCredentials"
    );
    assert!(
        r.describe()
            .contains("Authorization brokered for user.test (from env TOKEN)")
    );
    // A credential whose domain no allow entry lets through is kept, and warned about.
    let files = vec![file(
        Source::User,
        json!({"sandbox": {"network": {"allowedDomains": ["a.test"], "brokeredCredentials": [
            {"domain": "b.test", "header": "X-Key", "valueFromFile": "/k"}]}}}),
    )];
    let r = from_files(&files, false).unwrap();
    assert!(
        r.warnings[0].contains("no allowedDomains entry lets it through"),
        "{:?}",
        r.warnings
    );
    assert!(
        check(
            &json!({"brokeredCredentials": [{"domain": "*", "header": "X", "valueFromEnv": "T"}]})
        )
        .is_err()
    );
}

#[test]
fn encrypted_client_hellos_are_the_operators_and_the_users_to_allow() {
    let ech = |v: bool| json!({"sandbox": {"network": {"allowEncryptedClientHello": v}}});
    // A repository's settings, the local ones and the command line's cannot allow them.
    for source in [Source::Project, Source::Local, Source::Cli] {
        let r = from_files(&[file(source, ech(true))], false).unwrap();
        assert!(!r.policy.allow_encrypted_client_hello, "{source}");
        assert!(
            r.warnings[0].contains("honoured only in the managed and the user's"),
            "{:?}",
            r.warnings
        );
    }
    let user = json!({"sandbox": {"network": {
        "allowedDomains": ["pypi.org"], "allowEncryptedClientHello": true
    }}});
    let r = from_files(&[file(Source::User, user)], false).unwrap();
    assert!(r.policy.allow_encrypted_client_hello);
    assert!(
        r.describe()
            .ends_with("encrypted ClientHellos (ECH) allowed")
    );
    assert_eq!(r.summary()["allowEncryptedClientHello"], true);
    // The managed settings win over the user's, and with the lock only theirs counts.
    let files = [
        file(Source::Managed, ech(false)),
        file(Source::User, ech(true)),
    ];
    assert!(
        !from_files(&files, false)
            .unwrap()
            .policy
            .allow_encrypted_client_hello
    );
    let locked = json!({"sandbox": {"network": {"allowManagedDomainsOnly": true}}});
    let files = [file(Source::Managed, locked), file(Source::User, ech(true))];
    let r = from_files(&files, false).unwrap();
    assert!(!r.policy.allow_encrypted_client_hello);
    assert!(
        r.warnings[0].contains("allow only managed domains"),
        "{:?}",
        r.warnings
    );
    assert!(check(&json!({"allowEncryptedClientHello": "yes"})).is_err());
    assert!(
        check(&json!({"allowEncryptedClientHello": true}))
            .unwrap()
            .is_empty()
    );
}
