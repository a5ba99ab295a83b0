//! What showing the user's toolchains costs at start-up: `cordon sandbox -- true` with
//! `sandbox.exposeToolchains` on (this host's rustup, pyenv, ... bound read-only, secrets
//! masked, caches bound) and off, alternated in one run so both see the same machine, and
//! `bwrap --unshare-all --ro-bind / / true` as the reference the host-integrity issue names.
//!
//! Run: `cargo bench -p cordon-tests --bench toolchains` (uses the debug or release
//! `cordon` next to this bench; build it first).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed bench step panics with its message

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: usize = 40;

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(cmd: &mut Command) -> Duration {
    let start = Instant::now();
    let status = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    let took = start.elapsed();
    assert!(status.success(), "{cmd:?} failed: {status}");
    took
}

fn cordon(settings: &Path, home: &Path, ws: &Path) -> Command {
    let mut c = Command::new(cordon_tests::cordon_bin());
    c.args(["sandbox", "--workspace"])
        .arg(ws)
        .args(["--", "true"])
        .env("CORDON_HOME", home)
        .env("CORDON_USER_SETTINGS", settings);
    c
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&ws).expect("ws");
    let on = dir.path().join("on.json");
    let off = dir.path().join("off.json");
    std::fs::write(&on, r#"{"sandbox": {"exposeToolchains": true}}"#).expect("on");
    std::fs::write(&off, r#"{"sandbox": {"exposeToolchains": false}}"#).expect("off");
    let bwrap = Command::new("bwrap").arg("--version").output().is_ok();
    let (mut with, mut without, mut reference) = (Vec::new(), Vec::new(), Vec::new());
    // Warm-up: page cache, the first cgroup and cache directories.
    time(&mut cordon(&on, &home, &ws));
    time(&mut cordon(&off, &home, &ws));
    for _ in 0..ROUNDS {
        with.push(time(&mut cordon(&on, &home, &ws)));
        without.push(time(&mut cordon(&off, &home, &ws)));
        if bwrap {
            reference.push(time(Command::new("bwrap").args([
                "--unshare-all",
                "--ro-bind",
                "/",
                "/",
                "true",
            ])));
        }
    }
    let (w, wo) = (p50(with), p50(without));
    println!("cordon sandbox -- true, toolchains shown:     p50 {w:?}");
    println!("cordon sandbox -- true, toolchains not shown: p50 {wo:?}");
    println!(
        "difference: {:+.2} ms",
        (w.as_secs_f64() - wo.as_secs_f64()) * 1e3
    );
    if bwrap {
        let r = p50(reference);
        println!(
            "bwrap --unshare-all --ro-bind / / true:       p50 {r:?} (cordon with toolchains {:.1}x)",
            w.as_secs_f64() / r.as_secs_f64()
        );
    }
}
