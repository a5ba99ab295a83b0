//! Brokered credentials: the proxy adds a host secret to requests for chosen domains,
//! terminating TLS for those only, and the secret never enters the sandbox.
//!
//! First the proxy in this process, against an HTTPS server of the test's internet whose
//! certificate a test CA signs ([`TestCa`]; the broker is told to trust it, as an operator
//! adds a private root): the header arrives, SNI and Host are checked, a server that does
//! not verify gets nothing, other domains stay plain tunnels. Then `cordon run` and
//! `cordon sandbox` end to end on the local backend, the test CA given to Cordon's own
//! process through `SSL_CERT_FILE`.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use cordon::network::broker::{Broker, Credential};
use cordon::network::policy::DomainRule;
use cordon::network::proxy::dial::StaticResolver;
use cordon::network::proxy::record::MemoryLog;
use cordon::network::proxy::{ConnectionRecord, Proxy};
use cordon_tests::Workspace;
use cordon_tests::net::{self, DNS, SERVER};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::tls::{TestCa, roots};
use sandbox_agent::egress::ca as ca_bundle;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

const NAMES: [&str; 3] = ["api.test", "files.test", "plain.test"];

/// An HTTPS server on SERVER:443 for [`NAMES`] that answers each request with what it
/// received (head and body, the body read by its Content-Length or chunked framing), and
/// keeps every request head.
async fn echo_https(ca: &TestCa) -> Arc<Mutex<Vec<String>>> {
    let listener = TcpListener::bind(SocketAddr::new(IpAddr::V4(SERVER), 443))
        .await
        .unwrap();
    let tls = ca.acceptor();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let (tls, seen) = (tls.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(mut s) = tls.accept(s).await else {
                    return;
                };
                let head = net::read_head(&mut s).await;
                let text = String::from_utf8_lossy(&head).into_owned();
                seen.lock().unwrap().push(text.clone());
                let body = read_body(&mut s, &text).await;
                let reply = format!("{text}{}", String::from_utf8_lossy(&body));
                let out = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = s.write_all(out.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    heads
}

async fn read_body<S: AsyncReadExt + Unpin>(s: &mut S, head: &str) -> Vec<u8> {
    let lower = head.to_ascii_lowercase();
    let mut body = Vec::new();
    if let Some(len) = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
    {
        body.resize(len.trim().parse().unwrap(), 0);
        s.read_exact(&mut body).await.unwrap();
    } else if lower.contains("transfer-encoding: chunked") {
        while !body.ends_with(b"0\r\n\r\n") {
            let mut b = [0u8; 1];
            if s.read(&mut b).await.unwrap_or(0) == 0 {
                break;
            }
            body.push(b[0]);
        }
    }
    body
}

/// A proxy on 127.0.0.1 brokering `Authorization: Bearer host-secret` for api.test, its
/// upstreams verified against `upstream_roots`; its log.
async fn broker_proxy(upstream_roots: RootCertStore) -> (SocketAddr, Arc<Broker>, Arc<MemoryLog>) {
    let cred = Credential::new(
        DomainRule::parse("api.test", "test: brokeredCredentials").unwrap(),
        "Authorization",
        "Bearer host-secret".into(),
        "env TEST_TOKEN",
    );
    let broker = Arc::new(Broker::new("s1", vec![cred], upstream_roots).unwrap());
    let names = NAMES
        .iter()
        .map(|n| (n.to_string(), vec![IpAddr::V4(SERVER)]))
        .collect();
    let log = Arc::new(MemoryLog::default());
    let proxy = Proxy::new(
        "s1",
        net::policy(&NAMES, &[]),
        Arc::new(StaticResolver(names)),
        log.clone(),
    )
    .with_broker(broker.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(proxy.serve_tcp(listener, std::future::pending()));
    (addr, broker, log)
}

/// A TLS connection through the proxy's tunnel to `target` (port 443), the ClientHello
/// naming `sni`, the server verified against `trust`.
async fn through(
    proxy: SocketAddr,
    target: &str,
    sni: &str,
    trust: RootCertStore,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut s = TcpStream::connect(proxy).await?;
    s.write_all(format!("CONNECT {target}:443 HTTP/1.1\r\nHost: {target}:443\r\n\r\n").as_bytes())
        .await?;
    let head = net::read_head(&mut s).await;
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    let provider = tokio_rustls::rustls::crypto::aws_lc_rs::default_provider();
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(trust)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(sni.to_string()).unwrap(), s)
        .await
}

/// Sends `request` and reads the answer to its end (the proxy closes after one).
async fn ask(mut s: tokio_rustls::client::TlsStream<TcpStream>, request: &str) -> String {
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits for the proxy to log `n` records.
async fn records(log: &MemoryLog, n: usize) -> Vec<ConnectionRecord> {
    loop {
        let r = log.records();
        if r.len() >= n {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[test]
fn the_proxy_adds_the_credential_over_verified_tls_only_for_its_domain() {
    net::run(&[IpAddr::V4(SERVER)], None, || async {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new(dir.path(), &NAMES);
        let heads = echo_https(&ca).await;
        let test_ca = std::fs::read(&ca.ca_pem).unwrap();
        let (proxy, broker, log) = broker_proxy(roots(&test_ca)).await;
        let session_ca = roots(broker.ca_pem().as_bytes());

        // Brokered: the client trusts the session CA; its own Authorization is replaced,
        // and a chunked body arrives whole, the request ending where its body does.
        let s = through(proxy, "api.test", "api.test", session_ca.clone())
            .await
            .unwrap();
        assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        let answer = ask(
            s,
            "POST /upload HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer sandbox-guess\r\n\
             Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n\
             5\r\nhello\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("Connection: close\r\n"), "{answer}");
        assert!(!answer.contains("keep-alive"), "{answer}");
        assert!(
            answer.contains("Authorization: Bearer host-secret\r\n"),
            "{answer}"
        );
        assert!(!answer.contains("sandbox-guess"), "{answer}");
        assert!(answer.ends_with("5\r\nhello\r\n0\r\n\r\n"), "{answer}");
        let r = records(&log, 1).await.remove(0);
        assert!(r.allowed, "{r:?}");
        let used = r
            .credential
            .clone()
            .expect("the record says a credential was added");
        assert_eq!(
            (used.header.as_str(), used.from.as_str()),
            ("Authorization", "env TEST_TOKEN")
        );
        assert!(!format!("{r:?}").contains("host-secret"), "{r:?}");
        assert!(r.bytes_up > 0 && r.bytes_down > 0, "{r:?}");

        // A ClientHello naming another host: cut before any handshake or request.
        let err = through(proxy, "api.test", "plain.test", session_ca.clone()).await;
        assert!(err.is_err(), "a fronted handshake completed");
        let r = records(&log, 2).await.remove(1);
        assert!(
            !r.allowed && r.rule.contains("TLS server name \"plain.test\""),
            "{r:?}"
        );
        assert_eq!(r.credential, None);

        // A Host header naming another host: refused over TLS, nothing forwarded.
        let s = through(proxy, "api.test", "api.test", session_ca.clone())
            .await
            .unwrap();
        let answer = ask(s, "GET /fronted HTTP/1.1\r\nHost: plain.test\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        let r = records(&log, 3).await.remove(2);
        assert!(!r.allowed && r.rule.contains("Host header"), "{r:?}");

        // Not brokered: the client's own TLS reaches the server (the test CA verifies it,
        // the session CA would not), and no credential goes with it.
        let s = through(proxy, "plain.test", "plain.test", roots(&test_ca))
            .await
            .unwrap();
        let answer = ask(
            s,
            "GET /plain HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(!answer.contains("host-secret"), "{answer}");
        assert!(
            through(proxy, "plain.test", "plain.test", session_ca.clone())
                .await
                .is_err()
        );
        let r = records(&log, 5).await;
        assert!(r[3..].iter().all(|r| r.credential.is_none()), "{r:?}");

        let heads = heads.lock().unwrap().clone();
        assert!(
            !heads
                .iter()
                .any(|h| h.contains("/smuggled") || h.contains("/fronted")),
            "{heads:?}"
        );
        assert_eq!(heads.len(), 2, "{heads:?}");
    });
}

#[test]
fn a_server_that_does_not_verify_never_gets_the_credential() {
    net::run(&[IpAddr::V4(SERVER)], None, || async {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new(dir.path(), &NAMES);
        let heads = echo_https(&ca).await;
        // The broker trusts another CA only: the server's certificate does not verify.
        let other = tempfile::tempdir().unwrap();
        let unrelated = TestCa::new(other.path(), &["unrelated.test"]);
        let (proxy, broker, log) =
            broker_proxy(roots(&std::fs::read(&unrelated.ca_pem).unwrap())).await;
        let session_ca = roots(broker.ca_pem().as_bytes());
        let s = through(proxy, "api.test", "api.test", session_ca)
            .await
            .unwrap();
        let answer = ask(s, "GET /x HTTP/1.1\r\nHost: api.test\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(answer.contains("certificate"), "{answer}");
        let r = records(&log, 1).await.remove(0);
        assert!(!r.allowed && r.credential.is_none(), "{r:?}");
        assert!(heads.lock().unwrap().is_empty());
    });
}

/// A canary value: the same in no two runs, never written whole in a script.
fn canary(tag: &str) -> (String, String) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    (
        format!("cordon-{tag}-"),
        format!("canary-{}-{nanos}", std::process::id()),
    )
}

/// The checks the sandboxed command runs (after [`net::CHECK_PRELUDE`]); `c` and `f` are
/// the canaries, written in two quoted halves so no text of the command holds them whole;
/// `ctl` is a control the file search must find (the session CA's line in the system
/// bundle), so a search that read nothing cannot pass. The search starts at every mount
/// point the sandbox has (Landlock refuses listing `/` itself; every file lies beneath one)
/// but /proc, /sys and /dev.
const BROKER_CHECKS: &str = r#"
grep_env() { env | grep -c -e "$c" -e "$f"; }
grep_environ() { e=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'); echo "$e" | grep -c -e "$c" -e "$f"; echo "$e" | grep -c '^SSL_CERT_FILE='; }
grep_files() { awk '{print $5}' /proc/self/mountinfo | grep -v -e '^/proc' -e '^/sys' -e '^/dev' | xargs grep -rlIs -e "$c" -e "$f" -e "$ctl" | sort -u; }
check brokered curl -sS https://api.test/whoami
check file_brokered curl -sS https://files.test/whoami
check replaced curl -sS -H 'Authorization: Bearer sandbox-guess' https://api.test/replace
check socks curl -sS --proxy socks5h://127.0.0.1:3128 https://api.test/socks
check plain curl -sS --cacert "$WS/ca.pem" https://plain.test/plain
check plain_session_ca code https://plain.test/plain-session-ca
check host_mismatch code -H 'Host: plain.test' https://api.test/mismatch
check sni_mismatch curl -sS --cacert "$WS/ca.pem" --connect-to plain.test:443:api.test:443 https://plain.test/sni
check system_store grep -c 'Cordon session CA' /etc/ssl/certs/ca-certificates.crt
check env grep_env
check ssl_cert_file printenv SSL_CERT_FILE
check environ grep_environ
check files grep_files
"#;

/// The test's DNS server naming [`NAMES`], and its HTTPS server on SERVER:443 answering
/// `paths` with `served` (404 else), its certificate from a new test CA; the CA's dir,
/// the CA, the request heads the server gets.
async fn site(paths: &[&str]) -> (tempfile::TempDir, TestCa, Arc<Mutex<Vec<String>>>) {
    let names: HashMap<String, Ipv4Addr> = NAMES.iter().map(|n| (n.to_string(), SERVER)).collect();
    // The DNS server lives on in its task; what it was asked is not looked at here.
    let _asked = net::dns_server(IpAddr::V4(DNS), names).await;
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path(), &NAMES);
    let files = paths
        .iter()
        .map(|p| (p.to_string(), b"served".to_vec()))
        .collect();
    let tls = Some(ca.acceptor());
    let heads = net::file_server(SocketAddr::new(IpAddr::V4(SERVER), 443), files, tls).await;
    (certs, ca, heads)
}

/// Brokered settings for the user's file: api.test from a variable, files.test from a
/// file, all three domains allowed.
fn user_settings(secret_file: &Path) -> Value {
    json!({
        "permissions": {"allow": ["Bash"]},
        "sandbox": {"network": {
            "allowedDomains": NAMES,
            "brokeredCredentials": [
                {"domain": "api.test", "header": "Authorization", "valuePrefix": "Bearer ",
                 "valueFromEnv": "CORDON_TEST_BROKER_TOKEN"},
                {"domain": "files.test:443", "header": "X-Api-Key", "valueFromFile": secret_file}
            ]
        }}
    })
}

/// `cordon run` whose Bash command curls the brokered domains and hunts for the secrets
/// inside: the server gets them, the sandbox, the model and the records never do.
#[test]
fn cordon_run_brokers_a_host_secret_that_never_enters_the_sandbox() {
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), || async {
        let (_certs, ca, heads) = site(&["/whoami", "/replace", "/socks", "/plain"]).await;

        let (env_a, env_b) = canary("env");
        let (file_a, file_b) = canary("file");
        let (env_secret, file_secret) = (format!("{env_a}{env_b}"), format!("{file_a}{file_b}"));
        let home = tempfile::tempdir().unwrap();
        let secret_file = home.path().join("api-key");
        std::fs::write(&secret_file, format!("{file_secret}\n")).unwrap();
        std::fs::write(
            home.path().join("user.json"),
            user_settings(&secret_file).to_string(),
        )
        .unwrap();
        let ws = Workspace::new();
        std::fs::copy(&ca.ca_pem, ws.join("ca.pem")).unwrap();
        let script = format!(
            "WS={}\nc='{env_a}''{env_b}'\nf='{file_a}''{file_b}'\nctl='the Cordon sess''ion CA of'\n{}{BROKER_CHECKS}",
            ws.path().display(),
            net::CHECK_PRELUDE
        );
        let turns = vec![
            Turn::tool_use("b1", "Bash", json!({"command": script, "timeout": 600_000})),
            Turn::text("done"),
        ];
        let model = ScriptedModel::start(turns).await.unwrap();
        // An MCP entry that asks for the brokered variable (`${VAR}` expands from Cordon's
        // environment) would carry it into a process inside: it is withheld, so the
        // server is refused for a missing variable and never starts.
        let leak = ws.join("mcp-leak");
        let mcp = json!({"mcpServers": {"leak": {
            "command": "sh",
            "args": ["-c", format!("printf %s \"$T\" > {}", leak.display())],
            "env": {"T": "${CORDON_TEST_BROKER_TOKEN}"},
        }}})
        .to_string();
        let mut cmd = cordon_tests::agent::run_command(
            &model,
            home.path(),
            ws.path(),
            &[
                "--output-format",
                "stream-json",
                "--max-turns",
                "3",
                "--mcp-config",
                &mcp,
            ],
        );
        cmd.env("CORDON_USER_SETTINGS", home.path().join("user.json"))
            .env("CORDON_MANAGED_SETTINGS", home.path().join("managed.json"))
            .env("CORDON_TEST_BROKER_TOKEN", &env_secret)
            // The test CA as a private root of the host: the proxy verifies the server by it.
            .env("SSL_CERT_FILE", &ca.ca_pem)
            .arg("go");
        let out = cmd.output().await.unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(!leak.exists(), "an MCP entry read the brokered variable");
        let init: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
        assert_eq!(
            init["network"]["brokeredCredentials"][0]["domain"], "api.test",
            "{init}"
        );
        // Refused (its variable is withheld), not started and failed.
        assert!(
            init["mcp_servers"]
                .as_array()
                .unwrap()
                .contains(&json!({"name": "leak", "status": "disabled"})),
            "{init}"
        );
        assert_eq!(
            init["network"]["brokeredCredentials"][1]["from"],
            format!("file {}", secret_file.display())
        );

        let bodies = cordon_tests::agent::message_bodies(&model);
        assert_eq!(bodies.len(), 2, "{stdout}");
        let results = cordon_tests::agent::tool_results(&bodies[1]);
        let checks = net::parse_checks(&results[0].1);
        let get = |name: &str| {
            checks
                .get(name)
                .cloned()
                .unwrap_or_else(|| panic!("{name}: {}\n{stderr}", results[0].1))
        };
        for served in ["brokered", "file_brokered", "replaced", "socks", "plain"] {
            assert_eq!(get(served), (0, "served".into()), "{served}");
        }
        assert_eq!(get("host_mismatch"), (0, "403".into()));
        assert_ne!(
            get("plain_session_ca").0,
            0,
            "plain.test is not terminated: {:?}",
            get("plain_session_ca")
        );
        assert_ne!(get("sni_mismatch").0, 0, "{:?}", get("sni_mismatch"));
        assert_eq!(get("system_store"), (0, "1".into()));
        // The secrets are in no variable, no process's environment, no readable file.
        assert_eq!(get("env"), (1, "0".into()));
        // Each process's environment was read (the variable every command has is there).
        let (_, environ) = get("environ");
        let counts: Vec<u32> = environ.split(' ').map(|n| n.parse().unwrap()).collect();
        assert!(counts[0] == 0 && counts[1] >= 1, "{environ}");
        assert_eq!(get("ssl_cert_file"), (0, ca_bundle::LOCAL_BUNDLE.into()));
        let (_, found) = get("files");
        assert_eq!(found, ca_bundle::SYSTEM_BUNDLE, "only the control is found");

        // The server got each secret where the settings said, the client's guess replaced.
        let heads = heads.lock().unwrap().clone();
        let head = |host: &str, path: &str| {
            heads
                .iter()
                .find(|h| {
                    h.starts_with(&format!("GET {path} "))
                        && h.contains(&format!("\r\nHost: {host}\r\n"))
                })
                .cloned()
                .unwrap_or_else(|| panic!("{host}{path}: {heads:?}"))
        };
        let api = head("api.test", "/whoami");
        assert!(
            api.contains(&format!("Authorization: Bearer {env_secret}\r\n")),
            "{api}"
        );
        let file = head("files.test", "/whoami");
        assert!(
            file.contains(&format!("X-Api-Key: {file_secret}\r\n")),
            "{file}"
        );
        assert!(
            !api.contains("X-Api-Key") && !file.contains("Authorization"),
            "{heads:?}"
        );
        // Through SOCKS5 as through CONNECT.
        let socks = head("api.test", "/socks");
        assert!(
            socks.contains(&format!("Authorization: Bearer {env_secret}\r\n")),
            "{socks}"
        );
        let replaced = head("api.test", "/replace");
        assert_eq!(
            replaced
                .to_ascii_lowercase()
                .matches("authorization:")
                .count(),
            1,
            "{replaced}"
        );
        assert!(!replaced.contains("sandbox-guess"), "{replaced}");
        let plain = head("plain.test", "/plain");
        assert!(
            !plain.contains("Authorization") && !plain.contains("X-Api-Key"),
            "{plain}"
        );
        for never in ["/mismatch", "/sni", "/plain-session-ca"] {
            assert!(
                !heads.iter().any(|h| h.contains(never)),
                "{never}: {heads:?}"
            );
        }

        // Not in what the model was sent, the output, or any record of the session.
        for secret in [&env_secret, &file_secret] {
            assert!(
                !bodies
                    .iter()
                    .any(|b| b.to_string().contains(secret.as_str())),
                "sent to the model"
            );
            assert!(!stdout.contains(secret.as_str()) && !stderr.contains(secret.as_str()));
            let holding: Vec<_> = net::files_under(home.path())
                .into_iter()
                .filter(|p| *p != secret_file)
                .filter(|p| {
                    std::fs::read(p)
                        .is_ok_and(|b| String::from_utf8_lossy(&b).contains(secret.as_str()))
                })
                .collect();
            assert!(
                holding.is_empty(),
                "records under CORDON_HOME hold it: {holding:?}"
            );
        }
        // Every brokered request is in the egress log, with the credential named.
        let records = net::egress_records(home.path());
        let brokered: Vec<&Value> = records
            .iter()
            .filter(|r| r.get("credential").is_some())
            .collect();
        assert!(
            brokered.iter().any(|r| r["host"] == "api.test"
                && r["credential"]
                    == json!({"header": "Authorization", "from": "env CORDON_TEST_BROKER_TOKEN"})),
            "{records:?}"
        );
        assert!(
            brokered.iter().any(|r| r["host"] == "files.test"),
            "{records:?}"
        );
        assert!(
            records
                .iter()
                .any(|r| r["allowed"] == false
                    && r["rule"].as_str().unwrap().contains("Host header")),
            "{records:?}"
        );
        assert!(
            records.iter().any(|r| r["allowed"] == false
                && r["rule"].as_str().unwrap().contains("TLS server name")),
            "{records:?}"
        );
        assert!(
            records
                .iter()
                .filter(|r| r["host"] == "plain.test")
                .all(|r| r.get("credential").is_none()),
            "{records:?}"
        );
        model.shutdown().await;
    });
}

/// A broker named by a trusted repository's settings, or by `--settings`, is ignored: the
/// domain is reached as a plain tunnel (the client's own TLS, its CA the test's) and the
/// server sees no header; stderr says why.
#[test]
fn a_repository_or_command_line_broker_is_ignored() {
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), || async {
        let (_certs, ca, heads) = site(&["/repo", "/cli"]).await;
        let (a, b) = canary("repo");
        let secret = format!("{a}{b}");
        let broker = |domain: &str| json!({"domain": domain, "header": "Authorization", "valueFromEnv": "CORDON_TEST_BROKER_TOKEN"});
        let ws = Workspace::new();
        std::fs::copy(&ca.ca_pem, ws.join("ca.pem")).unwrap();
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::fs::write(
            ws.join(".claude/settings.json"),
            json!({"sandbox": {"network": {"allowedDomains": ["api.test"], "brokeredCredentials": [broker("api.test")]}}}).to_string(),
        )
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        let cordon = |args: &[&str]| {
            let mut cmd = cordon_tests::cordon_at_home(home.path(), args);
            cmd.env("CORDON_TEST_BROKER_TOKEN", &secret)
                .env("SSL_CERT_FILE", &ca.ca_pem);
            cmd
        };
        let w = ws.path().to_str().unwrap();
        let trusted = cordon(&["trust", w]).output().await.unwrap();
        assert!(trusted.status.success(), "{trusted:?}");
        let cli = json!({"sandbox": {"network": {"allowedDomains": ["files.test"], "brokeredCredentials": [broker("files.test")]}}}).to_string();
        let script = format!(
            "curl -sS --cacert {w}/ca.pem https://api.test/repo && echo && curl -sS --cacert {w}/ca.pem https://files.test/cli"
        );
        let out = cordon(&[
            "sandbox",
            "--workspace",
            w,
            "--settings",
            &cli,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .await
        .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        assert_eq!(stdout, "served\nserved", "{stderr}");
        assert!(
            stderr.contains(
                ".claude/settings.json: sandbox.network.brokeredCredentials is honoured only"
            ),
            "{stderr}"
        );
        assert!(
            stderr.contains("--settings: sandbox.network.brokeredCredentials is honoured only"),
            "{stderr}"
        );
        let heads = heads.lock().unwrap().clone();
        assert_eq!(heads.len(), 2, "{heads:?}");
        assert!(
            heads
                .iter()
                .all(|h| !h.contains("Authorization") && !h.contains(&secret)),
            "{heads:?}"
        );
    });
}
