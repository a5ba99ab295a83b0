//! What host integrity costs the Docker backend, side by side in one run:
//! - exec of `true` through the agent, each command in a cgroup of its own (the default
//!   when Cordon runs as root, `orchestrator/src/sandbox/docker/exec_cgroup.rs`);
//! - the same with `DockerConfig::exec_cgroups` off (the agent's namespace sweep instead);
//! - `docker exec CONTAINER true`, the engine's own way in (the baseline);
//! - a session to ready with and without making the per-command parent;
//! - a session to ready on a workspace holding the hard-link cap's worth of files linked
//!   outside it (one read-only bind each, injected) against the same workspace without.
//!
//! The sessions alternate in rounds, so load shifts hit both alike.
//! `cargo bench -p cordon-tests --bench docker_integrity` (needs Docker, root and the
//! static agent: images/build-agent.sh). Prints one line per measure; asserts nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed bench step panics with its message

use std::process::Command;
use std::time::{Duration, Instant};

use cordon::sandbox::docker::{self, DockerBackend, DockerConfig, ImageSet};
use cordon::sandbox::{Sandbox, SandboxSpec};
use sandbox_agent::proto::ExecRequest;

const ROUNDS: usize = 6;
const EXECS_PER_ROUND: usize = 40;
const STARTS: usize = 8;

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn backend(root: &std::path::Path, exec_cgroups: bool) -> DockerBackend {
    DockerBackend::new(DockerConfig {
        pool_size: 0,
        run_root: root.to_path_buf(),
        exec_cgroups,
        ..DockerConfig::default()
    })
    .await
    .expect("docker backend")
}

async fn execs(sandbox: &Sandbox, round: usize, into: &mut Vec<Duration>) {
    let mut client = sandbox.client.clone();
    for i in 0..EXECS_PER_ROUND {
        let req = ExecRequest {
            exec_id: format!("r{round}-{i}"),
            argv: vec!["true".into()],
            ..Default::default()
        };
        let t = Instant::now();
        let (_, status) = client.exec_collect(req).await.expect("exec");
        assert_eq!(status.code, Some(0), "{status:?}");
        // The first round warms both sessions up.
        if round > 0 {
            into.push(t.elapsed());
        }
    }
}

async fn run() {
    if !docker::probe().await.reachable {
        println!("docker_integrity: SKIPPED, docker unreachable");
        return;
    }
    docker::build_images(ImageSet::Minimal, |_| {})
        .await
        .expect("build cordon-minimal");
    let root = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir_in("/var/tmp").unwrap();
    let with = backend(&root.path().join("with"), true).await;
    let without = backend(&root.path().join("without"), false).await;

    let (mut start_with, mut start_without) = (Vec::new(), Vec::new());
    for i in 0..STARTS {
        for (b, into, name) in [
            (&with, &mut start_with, "w"),
            (&without, &mut start_without, "o"),
        ] {
            let t = Instant::now();
            let s = b
                .start_cold(&SandboxSpec::new(format!("kill-{name}{i}"), ws.path()))
                .await
                .expect("start");
            into.push(t.elapsed());
            s.destroy().await.expect("destroy");
        }
    }

    let a = with
        .start_cold(&SandboxSpec::new("kill-with", ws.path()))
        .await
        .expect("start");
    let b = without
        .start_cold(&SandboxSpec::new("kill-without", ws.path()))
        .await
        .expect("start");
    let (mut slot_execs, mut sweep_execs, mut docker_exec) = (Vec::new(), Vec::new(), Vec::new());
    let name = docker::container::container_name("kill-with");
    for round in 0..ROUNDS {
        execs(&a, round, &mut slot_execs).await;
        execs(&b, round, &mut sweep_execs).await;
        for _ in 0..3 {
            let t = Instant::now();
            let ok = Command::new("docker")
                .args(["exec", &name, "true"])
                .status()
                .expect("docker exec")
                .success();
            assert!(ok, "docker exec failed");
            docker_exec.push(t.elapsed());
        }
    }
    let (slot, sweep, base) = (p50(slot_execs), p50(sweep_execs), p50(docker_exec));
    println!("exec `true`, per-command cgroup         p50 {}", ms(slot));
    println!("exec `true`, namespace sweep instead    p50 {}", ms(sweep));
    println!("baseline: docker exec CONTAINER true    p50 {}", ms(base));
    println!(
        "   speed-up over docker exec: {:.0}x with cgroups, {:.0}x without (target >= 50x)",
        base.as_secs_f64() / slot.as_secs_f64(),
        base.as_secs_f64() / sweep.as_secs_f64()
    );
    println!(
        "session to ready: {} with the per-command parent, {} without",
        ms(p50(start_with)),
        ms(p50(start_without))
    );
    a.destroy().await.expect("destroy");
    b.destroy().await.expect("destroy");
    linked_starts(&with).await;
}

/// A session to ready on a workspace with the cap's worth of files linked outside it,
/// against an empty workspace, alternated.
async fn linked_starts(backend: &DockerBackend) {
    let cap = sandbox_agent::hostside::hardlinks::DEFAULT_CAP;
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    let (store, linked, plain) = (
        base.path().join("store"),
        base.path().join("linked"),
        base.path().join("plain"),
    );
    for d in [&store, &linked, &plain] {
        std::fs::create_dir(d).unwrap();
    }
    for i in 0..cap {
        let src = store.join(format!("f{i}"));
        std::fs::write(&src, "x").unwrap();
        std::fs::hard_link(&src, linked.join(format!("f{i:05}"))).unwrap();
    }
    let (mut with_links, mut without) = (Vec::new(), Vec::new());
    for i in 0..STARTS {
        for (ws, into) in [(&linked, &mut with_links), (&plain, &mut without)] {
            let t = Instant::now();
            let s = backend
                .start_cold(&SandboxSpec::new(format!("links-{i}"), ws))
                .await
                .expect("start");
            into.push(t.elapsed());
            s.destroy().await.expect("destroy");
        }
    }
    let (w, o) = (p50(with_links), p50(without));
    println!(
        "session to ready: {} with {cap} hard-linked files (read-only binds), {} without \
         (+{:.0} us per bind)",
        ms(w),
        ms(o),
        w.saturating_sub(o).as_secs_f64() * 1e6 / f64::from(u32::try_from(cap).unwrap_or(u32::MAX))
    );
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(run());
}
