//! Docker backend start-up and footprint, measured against the engine on this machine:
//! - `docker run --rm --network none cordon-minimal true` (the engine's own floor);
//! - a cold session: create + start + agent handshake;
//! - a warm-pool claim: workspace injection + agent start + handshake;
//! - idle memory per session (PSS of the container's processes) and how many fit;
//! - tool round trips through the agent (Read of a 4 KiB file, `true` through exec, by
//!   name and by path) vs `docker exec CONTAINER true`, the engine's own way into a
//!   running container, and the floor neither can go below: `/bin/true` started by a
//!   shell's loop inside the container;
//! - holding `CORDON_BENCH_SESSIONS` (default 200) idle sessions at once, every one of them
//!   answering a Read, and the rate they were started at.
//!
//! `cargo bench -p cordon-tests --bench docker_ready` (needs Docker and the static agent:
//! images/build-agent.sh). Prints one line per measure; asserts nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed test step panics with its message

use std::process::Command;
use std::time::{Duration, Instant};

use cordon::sandbox::docker::{self, DockerBackend, DockerConfig, ImageSet};
use cordon::sandbox::{Backend, SandboxSpec};

const RUNS: usize = 15;

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Sum of PSS (KiB) of every process in the container's memory cgroup (cgroup v1,
/// cgroupfs driver), read from /proc/<pid>/smaps_rollup.
fn container_pss_kib(name: &str) -> Option<u64> {
    let out = Command::new("docker")
        .args(["inspect", "-f", "{{.Id}}", name])
        .output()
        .ok()?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let procs =
        std::fs::read_to_string(format!("/sys/fs/cgroup/memory/docker/{id}/cgroup.procs")).ok()?;
    let mut total = 0;
    for pid in procs.lines() {
        let rollup =
            std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        for line in rollup.lines() {
            if let Some(rest) = line.strip_prefix("Pss:") {
                total += rest
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0);
            }
        }
    }
    Some(total)
}

fn mem_available_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Whether a section runs: `CORDON_BENCH_SECTIONS` (comma-separated of baseline, cold,
/// warm, pss, tools, many) picks some; unset runs all.
fn wanted(section: &str) -> bool {
    std::env::var("CORDON_BENCH_SECTIONS")
        .map(|v| v.split(',').any(|s| s.trim() == section))
        .unwrap_or(true)
}

async fn run() -> Result<(), String> {
    let report = docker::probe().await;
    if !report.reachable {
        println!(
            "docker_ready: SKIPPED, docker unreachable: {:?}",
            report.error
        );
        return Ok(());
    }
    docker::build_images(ImageSet::Minimal, |_| {})
        .await
        .map_err(|e| e.to_string())?;

    let mut baseline = Vec::new();
    for _ in 0..if wanted("baseline") { RUNS } else { 0 } {
        let t = Instant::now();
        let status = Command::new("docker")
            .args([
                "run",
                "--rm",
                "--network",
                "none",
                docker::DEFAULT_IMAGE,
                "true",
            ])
            .status()
            .map_err(|e| e.to_string())?;
        baseline.push(t.elapsed());
        if !status.success() {
            return Err(format!("docker run failed: {status}"));
        }
    }
    println!(
        "docker run --rm --network none true  p50 {}",
        ms(p50(baseline))
    );

    let run_root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ws = tempfile::tempdir_in("/var/tmp").map_err(|e| e.to_string())?;
    let cold = DockerBackend::new(DockerConfig {
        pool_size: 0,
        run_root: run_root.path().join("cold"),
        ..DockerConfig::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    for i in 0..if wanted("cold") { RUNS } else { 0 } {
        let spec = SandboxSpec::new(format!("bench-cold-{i}"), ws.path());
        let t = Instant::now();
        let sandbox = cold.start_cold(&spec).await.map_err(|e| e.to_string())?;
        times.push(t.elapsed());
        sandbox.destroy().await.map_err(|e| e.to_string())?;
    }
    println!(
        "cold session to ready (handshake)    p50 {}",
        ms(p50(times))
    );

    let warm = DockerBackend::new(DockerConfig {
        pool_size: 2,
        run_root: run_root.path().join("warm"),
        ..DockerConfig::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    let pool = warm.pool().ok_or("no pool")?;
    let mut times = Vec::new();
    for i in 0..if wanted("warm") { RUNS } else { 0 } {
        pool.wait_ready(2, Duration::from_secs(30)).await;
        let spec = SandboxSpec::new(format!("bench-warm-{i}"), ws.path());
        let t = Instant::now();
        let sandbox = warm.start(&spec).await.map_err(|e| e.to_string())?;
        times.push(t.elapsed());
        sandbox.destroy().await.map_err(|e| e.to_string())?;
    }
    println!(
        "warm-pool claim to ready             p50 {}",
        ms(p50(times))
    );
    pool.shutdown().await;

    let mut live = Vec::new();
    let mut pss = Vec::new();
    for i in 0..if wanted("pss") { 5 } else { 0 } {
        let sid = format!("bench-idle-{i}");
        live.push(
            cold.start_cold(&SandboxSpec::new(&sid, ws.path()))
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..live.len() {
        let name = docker::container::container_name(&format!("bench-idle-{i}"));
        if let Some(k) = container_pss_kib(&name) {
            pss.push(k);
        }
    }
    for s in live {
        s.destroy().await.map_err(|e| e.to_string())?;
    }
    pss.sort_unstable();
    let median = pss.get(pss.len() / 2).copied().unwrap_or(0);
    println!(
        "idle session PSS (agent + init)      p50 {median} KiB over {} sessions",
        pss.len()
    );
    let avail = mem_available_kib();
    if let Some(fit) = avail.checked_div(median) {
        println!(
            "idle sessions that fit in MemAvailable ({} MiB): ~{fit} by memory; the uid range allows {}",
            avail / 1024,
            docker::access::UID_RANGE
        );
    }
    if wanted("tools") {
        tool_round_trips(&cold, ws.path()).await?;
    }
    if wanted("many") {
        hold_many(&cold, ws.path()).await?;
    }
    Ok(())
}

/// Read and exec through the agent vs `docker exec`, on one live session.
async fn tool_round_trips(backend: &DockerBackend, ws: &std::path::Path) -> Result<(), String> {
    use sandbox_agent::proto::ExecRequest;
    let file = ws.join("four-k.txt");
    std::fs::write(&file, "x".repeat(63).repeat(64).chars().collect::<String>())
        .map_err(|e| e.to_string())?;
    let sandbox = backend
        .start_cold(&SandboxSpec::new("bench-rt", ws))
        .await
        .map_err(|e| e.to_string())?;
    let mut client = sandbox.client.clone();
    let path = file.display().to_string();
    let mut reads = Vec::new();
    for i in 0..520 {
        let t = Instant::now();
        client.read(&path, 0, 0).await.map_err(|e| e.to_string())?;
        if i >= 20 {
            reads.push(t.elapsed());
        }
    }
    let mut by_path = Vec::new();
    let mut execs = Vec::new();
    for i in 0..240 {
        // Alternating, so both see the same machine: `true` by name (as `docker exec`
        // is given it, searched in PATH) and by its path.
        let program = if i % 2 == 0 { "true" } else { "/bin/true" };
        let req = ExecRequest {
            exec_id: format!("rt{i}"),
            argv: vec![program.into()],
            ..Default::default()
        };
        let t = Instant::now();
        let (_, status) = client.exec_collect(req).await.map_err(|e| e.to_string())?;
        if status.code != Some(0) {
            return Err(format!("exec {program} failed: {status:?}"));
        }
        if i >= 40 {
            if i % 2 == 0 {
                execs.push(t.elapsed());
            } else {
                by_path.push(t.elapsed());
            }
        }
    }
    // What starting `/bin/true` costs inside this container whoever starts it: a shell's
    // loop in the container, one exec for all of it (its own start-up spread thin). No
    // way into the container can beat this floor; on fuse-overlayfs most of it is the
    // storage driver's daemon answering the exec's open.
    const LOOP: u32 = 400;
    let req = ExecRequest {
        exec_id: "floor".into(),
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("i=0; while [ $i -lt {LOOP} ]; do /bin/true; i=$((i+1)); done"),
        ],
        ..Default::default()
    };
    let t = Instant::now();
    let (_, status) = client.exec_collect(req).await.map_err(|e| e.to_string())?;
    let floor = t.elapsed() / LOOP;
    if status.code != Some(0) {
        return Err(format!("the in-container loop failed: {status:?}"));
    }
    let name = docker::container::container_name("bench-rt");
    let mut docker_exec = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let status = Command::new("docker")
            .args(["exec", &name, "true"])
            .status()
            .map_err(|e| e.to_string())?;
        docker_exec.push(t.elapsed());
        if !status.success() {
            return Err(format!("docker exec failed: {status}"));
        }
    }
    let (read, exec, baseline) = (p50(reads), p50(execs), p50(docker_exec));
    println!("tool Read (4 KiB) through the agent    p50 {read:?}");
    println!("tool exec `true` through the agent     p50 {exec:?}");
    println!(
        "tool exec `/bin/true` (by path)        p50 {:?}",
        p50(by_path)
    );
    println!(
        "baseline: docker exec CONTAINER true   p50 {}",
        ms(baseline)
    );
    println!(
        "floor: /bin/true started by a shell in the container  {:?} a command",
        floor
    );
    println!(
        "   speed-up: Read {:.0}x, exec {:.0}x (target >= 50x; at the floor {:.0}x)",
        baseline.as_secs_f64() / read.as_secs_f64(),
        baseline.as_secs_f64() / exec.as_secs_f64(),
        baseline.as_secs_f64() / floor.as_secs_f64()
    );
    sandbox.destroy().await.map_err(|e| e.to_string())
}

/// Starts many idle sessions, a few at a time, checks every one answers, then ends them.
async fn hold_many(backend: &DockerBackend, ws: &std::path::Path) -> Result<(), String> {
    let n: usize = std::env::var("CORDON_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    const AT_ONCE: usize = 8;
    let started = Instant::now();
    let mut live = Vec::with_capacity(n);
    for batch in (0..n).collect::<Vec<_>>().chunks(AT_ONCE) {
        let starts = batch.iter().map(|i| {
            let spec = SandboxSpec::new(format!("bench-many-{i}"), ws);
            async move { backend.start_cold(&spec).await }
        });
        for result in futures::future::join_all(starts).await {
            live.push(result.map_err(|e| format!("session {} failed to start: {e}", live.len()))?);
        }
    }
    let took = started.elapsed();
    let mut answering = 0;
    for sandbox in &live {
        let mut client = sandbox.client.clone();
        if client
            .read(&ws.join("four-k.txt").display().to_string(), 0, 1)
            .await
            .is_ok()
        {
            answering += 1;
        }
    }
    let avail_after = mem_available_kib();
    println!(
        "held {} idle sessions at once ({answering} answering a Read); started in {:.1} s = {:.1} sessions/s; MemAvailable now {} MiB",
        live.len(),
        took.as_secs_f64(),
        live.len() as f64 / took.as_secs_f64(),
        avail_after / 1024
    );
    for sandbox in live {
        sandbox.destroy().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn main() {
    // CORDON_BENCH_LOG=cordon=debug shows where a claim's time goes.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("CORDON_BENCH_LOG"))
        .with_writer(std::io::stderr)
        .init();
    // The runtime `cordon run` serves a session with.
    let rt = match cordon::runtime::for_one_session() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("docker_ready: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(run()) {
        eprintln!("docker_ready: {e}");
        std::process::exit(1);
    }
}
