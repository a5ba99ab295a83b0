//! Docker backend start-up and footprint, measured against the engine on this machine:
//! - `docker run --rm --network none cordon-minimal true` (the engine's own floor);
//! - a cold session: create + start + agent handshake;
//! - a warm-pool claim: workspace injection + agent start + handshake;
//! - idle memory per session (PSS of the container's processes) and how many fit.
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
    for _ in 0..RUNS {
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
    for i in 0..RUNS {
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
    for i in 0..RUNS {
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
    for i in 0..5 {
        let sid = format!("bench-idle-{i}");
        live.push(
            cold.start_cold(&SandboxSpec::new(&sid, ws.path()))
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..5 {
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
    Ok(())
}

fn main() {
    let rt = match tokio::runtime::Runtime::new() {
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
