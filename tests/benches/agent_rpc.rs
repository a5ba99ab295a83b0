//! Foundation figures, each measured side by side with its baseline in one run:
//! 1. Read of a 4 KiB file through the client over the socket, confinement on (local
//!    backend: namespaces, Landlock, seccomp), p50 / p99; baseline: std::fs::read.
//! 2. exec of `true` through the agent vs plain fork/exec on the host, p50.
//!    Both on the runtime `cordon run` serves a session with (pinned), and on the same
//!    runtime unpinned.
//! 3. `cordon sandbox -- true`, whole process (the one-shot path, and `--via-agent`), vs
//!    `bwrap --unshare-all --ro-bind / / true`.
//! 4. start, exec `true` and teardown through the library, with and without the
//!    session's cgroups (limits and per-command slots), alternating.
//!
//! Run: `cargo bench -p cordon-tests --bench agent_rpc` (builds release binaries first:
//! `cargo build --release --bins`).
#![allow(clippy::cast_possible_truncation)] // statistics over small sample counts
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cordon::sandbox::local::LocalBackend;
use cordon::sandbox::{Backend, SandboxSpec};
use sandbox_agent::proto::ExecRequest;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn summary(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let p50 = percentile(&samples, 0.50);
    let p99 = percentile(&samples, 0.99);
    println!(
        "{name:<48} n={:<6} p50={:>9.1?} p99={:>9.1?} min={:>9.1?}",
        samples.len(),
        p50,
        p99,
        samples[0]
    );
    p50
}

fn time_command(n: usize, mut make: impl FnMut() -> Command) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let mut cmd = make();
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let start = Instant::now();
            let status = cmd.status().expect("spawn");
            let took = start.elapsed();
            assert!(status.success(), "{cmd:?} failed: {status}");
            took
        })
        .collect()
}

/// Sections 1 and 2 on `rt` (named `label`): a sandbox of its own, started and destroyed
/// there, its client's connection served by that runtime.
fn rpc_figures(label: &str, rt: &tokio::runtime::Runtime, ws: &Path, file: &Path, len: usize) {
    rt.block_on(async {
        let backend = LocalBackend::from_env().expect("local backend");
        let sandbox = backend
            .start(&SandboxSpec::new("bench", ws))
            .await
            .expect("start sandbox");
        let mut client = sandbox.client.clone();
        let path = file.display().to_string();

        println!("== 1. Read of a 4 KiB file (target: p50 <= 150us, p99 <= 500us), on {label}");
        for _ in 0..200 {
            client.read(&path, 0, 0).await.unwrap();
        }
        let reads: Vec<Duration> = {
            let mut v = Vec::with_capacity(5000);
            for _ in 0..5000 {
                let start = Instant::now();
                let r = client.read(&path, 0, 0).await.unwrap();
                v.push(start.elapsed());
                assert!(r.lines_returned > 0);
            }
            v
        };
        summary("agent Read over the socket (confined)", reads);
        // The transport alone, for reading the figure above: a call the agent answers
        // without touching the filesystem.
        let mut pings = Vec::with_capacity(5000);
        for _ in 0..5000 {
            let start = Instant::now();
            client.cancel("no-such-exec").await.unwrap();
            pings.push(start.elapsed());
        }
        summary("trivial RPC (Cancel of an unknown id)", pings);
        let local: Vec<Duration> = (0..5000)
            .map(|_| {
                let start = Instant::now();
                let b = std::fs::read(file).unwrap();
                let t = start.elapsed();
                assert_eq!(b.len(), len);
                t
            })
            .collect();
        summary("baseline: std::fs::read on the host", local);
        // For reading the gap between the two lines above: the agent's Read work alone
        // (resolve beneath the root, type checks, digest, numbering), in this process.
        let resolver = sandbox_agent::fsops::Resolver::new(&[ws.to_path_buf()]).unwrap();
        let req = sandbox_agent::proto::ReadRequest {
            path: file.display().to_string(),
            ..Default::default()
        };
        let work: Vec<Duration> = (0..5000)
            .map(|_| {
                let start = Instant::now();
                let r = sandbox_agent::fsops::read(&resolver, &req).unwrap();
                let t = start.elapsed();
                assert!(r.lines_returned > 0);
                t
            })
            .collect();
        summary("the Read work alone, in-process (no RPC)", work);

        println!("== 2. exec `true` (target: <= 1 ms extra at p50), on {label}");
        let mut execs = Vec::new();
        for i in 0..520 {
            let req = ExecRequest {
                exec_id: format!("b{i}"),
                argv: vec!["true".into()],
                ..Default::default()
            };
            let start = Instant::now();
            let (_, status) = client.exec_collect(req).await.unwrap();
            let t = start.elapsed();
            assert_eq!(status.code, Some(0));
            if i >= 20 {
                execs.push(t);
            }
        }
        let agent_p50 = summary("agent exec of `true` (confined)", execs);
        let host_p50 = summary(
            "baseline: fork/exec `true` on the host",
            time_command(500, || Command::new("true")),
        );
        println!("   extra at p50: {:?}", agent_p50.saturating_sub(host_p50));
        sandbox.destroy().await.unwrap();
    });
}

fn main() {
    let release = cordon_tests::bin_dir();
    let cordon_bin = release.join("cordon");
    assert!(
        cordon_bin.exists(),
        "build release binaries first: cargo build --release --bins"
    );
    let root = release.join("bench-workspaces");
    std::fs::create_dir_all(&root).unwrap();
    let ws = tempfile::tempdir_in(&root).unwrap();
    let file = ws.path().join("four-k.txt");
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    std::fs::write(&file, line.repeat(4096 / line.len())).unwrap();

    // Sections 1 and 2 on the runtime `cordon run` serves a session with (its async
    // threads and the agent's serving thread pinned to one CPU), then on the same runtime
    // unpinned, built and driven from a thread that keeps every CPU (as before the pin).
    let session_rt = cordon::runtime::for_one_session().unwrap();
    let len = 4096 / line.len() * line.len();
    for round in 0..2 {
        println!("-- round {round}");
        rpc_figures(
            "the session runtime (pinned)",
            &session_rt,
            ws.path(),
            &file,
            len,
        );
        let (w, f) = (ws.path().to_path_buf(), file.clone());
        std::thread::spawn(move || {
            sandbox_agent::affinity::unpin_current_thread();
            let free = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .on_thread_start(sandbox_agent::affinity::unpin_current_thread)
                .build()
                .unwrap();
            rpc_figures("baseline: the same runtime, unpinned", &free, &w, &f, len);
        })
        .join()
        .unwrap();
    }
    let rt = session_rt;
    rt.block_on(async {
        let backend = LocalBackend::from_env().expect("local backend");

        println!("== 4. a sandbox's start, exec `true` and teardown, with and without its cgroups");
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for i in 0..80 {
            // Alternating, so both sides see the same machine load.
            let limited = i % 2 == 0;
            let mut spec = SandboxSpec::new(format!("bench-cg-{i}"), ws.path());
            if !limited {
                spec.limits = None;
            }
            let start = Instant::now();
            let sandbox = backend.start(&spec).await.expect("start sandbox");
            let req = ExecRequest {
                exec_id: "t".into(),
                argv: vec!["true".into()],
                ..Default::default()
            };
            let (_, status) = sandbox.client.clone().exec_collect(req).await.unwrap();
            sandbox.destroy().await.unwrap();
            assert_eq!(status.code, Some(0));
            if limited { &mut with } else { &mut without }.push(start.elapsed());
        }
        let with = summary("with the session cgroup and per-command slots", with);
        let without = summary("baseline: the same without cgroups", without);
        println!(
            "   cgroup set-up at p50: {:?}",
            with.saturating_sub(without)
        );
    });

    // The processes below start on every CPU, as from a user's shell.
    drop(rt);
    sandbox_agent::affinity::unpin_current_thread();
    println!("== 3. whole process `cordon sandbox -- true` (target: <= 1.5x bwrap)");
    let ws_path = ws.path().to_path_buf();
    // The default path (the one-shot init runs the command) and the agent's (`--via-agent`:
    // the agent server, the RPC handshake and an exec request), side by side.
    let sandbox_cmd = |via_agent: bool| {
        let mut c = Command::new(&cordon_bin);
        c.arg("sandbox").arg("--workspace").arg(&ws_path);
        if via_agent {
            c.arg("--via-agent");
        }
        c.args(["--", "true"]);
        c
    };
    let cordon_cmd = || sandbox_cmd(false);
    let via_agent_cmd = || sandbox_cmd(true);
    if !Path::new("/usr/bin/bwrap").exists() {
        summary(
            "cordon sandbox --workspace WS -- true",
            time_command(60, cordon_cmd),
        );
        println!("   bwrap is not installed (apt-get install bubblewrap): no baseline");
        return;
    }
    let bwrap_cmd = || {
        let mut c = Command::new("bwrap");
        c.args(["--unshare-all", "--ro-bind", "/", "/", "true"]);
        c
    };
    // Alternating, one of each per round, so both sides see the same machine load.
    let (mut ours, mut agent, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..80 {
        ours.extend(time_command(1, cordon_cmd));
        agent.extend(time_command(1, via_agent_cmd));
        theirs.extend(time_command(1, bwrap_cmd));
    }
    let cordon = summary("cordon sandbox --workspace WS -- true (one-shot)", ours);
    let via = summary("cordon sandbox --via-agent --workspace WS -- true", agent);
    let bwrap = summary("baseline: bwrap --unshare-all --ro-bind / / true", theirs);
    println!(
        "   ratio cordon/bwrap at p50: {:.2} (via the agent: {:.2})",
        cordon.as_secs_f64() / bwrap.as_secs_f64(),
        via.as_secs_f64() / bwrap.as_secs_f64()
    );
}
