//! Real tools through the proxy: `pip install` of a wheel the test builds, from a package
//! index the test serves over HTTPS, and `git clone` over HTTPS (the dumb protocol, a bare
//! repository served as files) from the same server ([`ToolServers`]); its certificate is
//! signed by a CA of the test's own that only the sandboxed commands are told to trust
//! (`PIP_CERT`, `GIT_SSL_CAINFO`). Then the same tools ignoring the proxy variables, which
//! must get nowhere.
//!
//! - Local backend: `cordon sandbox`, Debian's python and the host's git, names resolved
//!   by the test's DNS server.
//! - Docker backend: the same script in a container of [`host_tools_image`] (the host's
//!   own python, pip and git, seconds to build, where `cordon-dev` takes minutes), the
//!   proxy in this process with a resolver table, so its record can be read.
//!
//! A pyenv shim would do as well as Debian's python (tests/tests/toolchains.rs tries it),
//! but this test is about egress, not the user's toolchains.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use cordon::network::EgressSpec;
use cordon::network::proxy::dial::StaticResolver;
use cordon::network::proxy::record::MemoryLog;
use cordon::sandbox::docker::{DockerBackend, DockerConfig};
use cordon::sandbox::{Backend, SandboxSpec};
use cordon_tests::net::{self, DNS, SERVER};
use cordon_tests::tool_servers::{NAMES, ToolServers};
use cordon_tests::{Workspace, cordon_bin, docker_ready, host_tools_image};
use sandbox_agent::proto::ExecRequest;

#[test]
fn pip_install_and_git_clone_go_through_the_proxy() {
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), || async {
        let _asked = net::dns_server(IpAddr::V4(DNS), ToolServers::names()).await;
        let servers = ToolServers::start().await;
        let ws = Workspace::new();
        let script = servers.script(ws.path());
        let out = tokio::process::Command::new(cordon_bin())
            .args(["sandbox", "--workspace"])
            .arg(ws.path())
            .args(["--allow-domain", NAMES[0], "--allow-domain", NAMES[1]])
            .args(["--", "sh", "-c", &script])
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        servers.assert_served(&stdout, &stderr);
    });
}

#[test]
fn pip_install_and_git_clone_go_through_the_proxy_on_docker() {
    if let Err(why) = docker_ready() {
        eprintln!("\n!!!!! SKIPPING docker tools test: {why} !!!!!\n");
        return;
    }
    let image = host_tools_image::ensure();
    eprintln!(
        "{}: {} in {:?} ({} MB)",
        image.image,
        if image.rebuilt { "built" } else { "up to date" },
        image.took,
        image.bytes >> 20
    );
    let home = tempfile::tempdir().unwrap();
    let run_root = home.path().join("run");
    // No mount namespace of the test's own (see [`net::enter`]); the proxy's resolver is a
    // table, so no DNS server either.
    net::run(&[IpAddr::V4(SERVER)], None, move || async move {
        let servers = ToolServers::start().await;
        let backend = DockerBackend::new(DockerConfig {
            pool_size: 0,
            default_image: image.image.clone(),
            run_root,
            ..DockerConfig::default()
        })
        .await
        .unwrap();
        let ws = Workspace::new();
        let log = Arc::new(MemoryLog::default());
        let mut egress = EgressSpec::new(net::policy(&NAMES, &[]));
        egress.log = log.clone();
        egress.resolver = Arc::new(StaticResolver(
            NAMES
                .iter()
                .map(|n| (n.to_string(), vec![IpAddr::V4(SERVER)]))
                .collect(),
        ));
        let spec = SandboxSpec::new("net-docker-tools", ws.path()).with_egress(egress);
        let started = Instant::now();
        let sandbox = backend.start(&spec).await.unwrap();
        let up = started.elapsed();
        let req = ExecRequest {
            exec_id: "docker-tools".into(),
            command: servers.script(ws.path()),
            timeout_ms: 300_000,
            ..ExecRequest::default()
        };
        let ran = Instant::now();
        let result = sandbox.client.clone().exec_collect(req).await;
        let took = ran.elapsed();
        sandbox.destroy().await.unwrap();
        backend.shutdown().await;
        let (out, status) = result.unwrap();
        let out = String::from_utf8_lossy(&out).into_owned();
        eprintln!("docker tools: sandbox up in {up:?}, script in {took:?}");
        assert_eq!(status.code, Some(0), "{out}");
        servers.assert_served(&out, "");
        // The proxy's record: both names, allowed, bytes back; nothing else was asked of it
        // (the ways around it never reached it).
        let records = log.records();
        for name in NAMES {
            assert!(
                records
                    .iter()
                    .any(|r| r.host == name && r.port == 443 && r.allowed && r.bytes_down > 0),
                "{name}: {records:?}"
            );
        }
        assert!(
            records.iter().all(|r| NAMES.contains(&r.host.as_str())),
            "{records:?}"
        );
    });
}
