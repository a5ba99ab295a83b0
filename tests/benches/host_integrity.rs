//! Host-integrity passes over a workspace of ~50,000 files, each beside its baseline in one
//! run (release build, warm page cache):
//! 1. the teardown sweep of setuid/setgid bits (`hostside::privbits::sweep`, 20 files to
//!    strip each time) vs `find WS -type f -perm /6000` (a whole process, finding only);
//! 2. the start-up scan for files hard-linked outside (`hostside::hardlinks`), with none
//!    and with as many such files as the cap allows (1,000);
//! 3. what a session pays for both: `cordon sandbox -- true`, whole process, on an empty
//!    workspace, on the 50k workspace, and on it with 1,000 linked files (1,000 read-only
//!    file binds at start).
//!
//! Run: `cargo build --release --bins && cargo bench -p cordon-tests --bench host_integrity`.
#![allow(clippy::cast_possible_truncation)] // statistics over small sample counts
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandbox_agent::hostside::{hardlinks, privbits};

const DIRS: usize = 500;
const FILES_PER_DIR: usize = 100;
const SETUID_FILES: usize = 20;
/// As many linked files as a session accepts.
const LINKED: usize = hardlinks::DEFAULT_CAP;
const RUNS: usize = 10;

fn summary(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let p50 = samples[samples.len() / 2];
    println!(
        "{name:<58} n={:<3} p50={:>9.1?} min={:>9.1?} max={:>9.1?}",
        samples.len(),
        p50,
        samples[0],
        samples[samples.len() - 1]
    );
    p50
}

fn time(mut f: impl FnMut()) -> Vec<Duration> {
    (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect()
}

/// DIRS directories of FILES_PER_DIR small files, two levels deep like a source tree.
fn make_tree(ws: &Path) {
    for d in 0..DIRS {
        let dir = ws.join(format!("pkg{}/mod{d}", d % 20));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(dir.join(format!("file{f}.rs")), "fn main() {}\n").unwrap();
        }
    }
}

fn set_bits(ws: &Path) {
    for i in 0..SETUID_FILES {
        let p = ws.join(format!("pkg{}/mod{i}/file0.rs", i % 20));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
    }
}

fn cordon_sandbox_true(ws: &Path, home: &Path) -> Vec<Duration> {
    let cordon = cordon_tests::bin_dir().join("cordon");
    time(|| {
        let status = Command::new(&cordon)
            .args(["sandbox", "--backend", "local", "--workspace"])
            .arg(ws)
            .args(["--", "true"])
            .env("CORDON_HOME", home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    })
}

fn main() {
    let base = tempfile::tempdir_in(cordon_tests::bin_dir()).unwrap();
    let ws = base.path().join("ws");
    let outside = base.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    make_tree(&ws);
    let files = privbits::sweep(&ws, privbits::Keep::Nothing)
        .unwrap()
        .counts;
    println!("workspace: {} files in {} dirs", files.files, files.dirs);

    let sweep = summary(
        "privbits::sweep (20 files stripped each run)",
        (0..RUNS)
            .map(|_| {
                set_bits(&ws);
                let start = Instant::now();
                let s = privbits::sweep(&ws, privbits::Keep::Nothing).unwrap();
                let took = start.elapsed();
                assert_eq!(s.stripped.len(), SETUID_FILES);
                took
            })
            .collect(),
    );
    set_bits(&ws);
    let find = summary(
        "baseline: find WS -type f -perm /6000 (finds only)",
        time(|| {
            let out = Command::new("find")
                .arg(&ws)
                .args(["-type", "f", "-perm", "/6000"])
                .output()
                .unwrap();
            assert_eq!(out.stdout.split(|b| *b == b'\n').count(), SETUID_FILES + 1);
        }),
    );
    println!("  sweep / find = {:.2}", ratio(sweep, find));
    privbits::sweep(&ws, privbits::Keep::Nothing).unwrap();

    summary(
        "hardlinks::linked_outside, no links",
        time(|| assert!(hardlinks::linked_outside(&ws, &[]).unwrap().is_empty())),
    );
    let home = base.path().join("home");
    let empty = base.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let empty_ws = summary(
        "cordon sandbox -- true, empty workspace",
        cordon_sandbox_true(&empty, &home),
    );
    let big_ws = summary(
        "cordon sandbox -- true, 50k-file workspace",
        cordon_sandbox_true(&ws, &home),
    );
    println!(
        "  walks at start and teardown cost {:.1?}",
        big_ws.saturating_sub(empty_ws)
    );

    std::fs::create_dir_all(ws.join("linked")).unwrap();
    for i in 0..LINKED {
        let src = outside.join(format!("f{i}"));
        std::fs::write(&src, "x").unwrap();
        std::fs::hard_link(&src, ws.join(format!("linked/f{i}"))).unwrap();
    }
    summary(
        "hardlinks::linked_outside, 1,000 linked files",
        time(|| assert_eq!(hardlinks::linked_outside(&ws, &[]).unwrap().len(), LINKED)),
    );
    let linked_ws = summary(
        "cordon sandbox -- true, 50k files + 1,000 linked (binds)",
        cordon_sandbox_true(&ws, &home),
    );
    let per_bind = linked_ws.saturating_sub(big_ws) / LINKED as u32;
    println!(
        "  {LINKED} read-only file binds cost {:.1?} ({per_bind:.1?} each)",
        linked_ws.saturating_sub(big_ws)
    );
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}
