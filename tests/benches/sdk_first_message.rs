//! Agent SDK session start to first assistant message, side by side in one run: the
//! pinned claude-agent-sdk (tests/sdk/setup.sh) drives
//! 1. `cordon` (local sandbox) as its CLI, and
//! 2. baseline: the Claude Code CLI bundled in the same SDK wheel,
//!
//! both against the scripted model (text replies, so the first assistant message is the
//! first model answer). Each run is a fresh session: connect() (spawning the CLI, the
//! initialize handshake), one prompt, until the first AssistantMessage. Timed inside the
//! Python process (tests/sdk/bench_first_message.py); p50 / p90 / min over the runs.
//!
//! Run: `cargo bench -p cordon-tests --bench sdk_first_message` (with
//! `cargo build --release --bins` first; the SDK's venv is made by its setup script).
//! `SDK_BENCH_RUNS` sets the runs per CLI (default 15).
#![allow(clippy::cast_possible_truncation)] // statistics over small sample counts
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::sdk::{sdk_python, sdk_venv};
use cordon_tests::{Workspace, cordon_bin, repo_root};

/// The Claude Code binary the SDK wheel bundles, if it does.
fn bundled_claude() -> Option<PathBuf> {
    let lib = sdk_venv().join("lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|py| {
        let cli = py
            .path()
            .join("site-packages/claude_agent_sdk/_bundled/claude");
        cli.is_file().then_some(cli)
    })
}

/// Runs `runs` sessions with `cli`; the milliseconds of each, or why it could not run.
fn measure(
    python: &Path,
    cli: &Path,
    runs: usize,
    model: &ScriptedModel,
    env: &[(&str, &Path)],
) -> Result<Vec<f64>, String> {
    let ws = Workspace::new();
    let mut cmd = Command::new(python);
    cmd.arg(repo_root().join("tests/sdk/bench_first_message.py"))
        .arg(cli)
        .arg(runs.to_string())
        .current_dir(ws.path())
        .env("SDK_WORKSPACE", ws.path())
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        // Offline: no update checks, telemetry or other traffic beside the model's.
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null());
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        return Err(format!(
            "{:?}; stderr ended with:\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    Ok(stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["ms"].as_f64())
        .collect())
}

fn report(name: &str, mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name:<44} n={:<3} p50={:>7.0} ms  p90={:>7.0} ms  min={:>7.0} ms",
        ms.len(),
        at(0.5),
        at(0.9),
        ms[0]
    );
    at(0.5)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(python) = sdk_python() else {
        return;
    };
    let runs: usize = std::env::var("SDK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    // Plenty of text turns: a CLI may make side requests of its own; each gets one.
    let turns = || (0..runs * 8).map(|i| Turn::text(format!("hello {i}")));
    let model = ScriptedModel::start(turns().collect()).await.unwrap();

    let cordon_home = tempfile::tempdir().unwrap();
    // One warm-up session each (page cache, Python imports), not counted.
    let cordon_env = [("CORDON_HOME", cordon_home.path())];
    measure(&python, &cordon_bin(), 1, &model, &cordon_env).expect("cordon warm-up");
    let cordon = measure(&python, &cordon_bin(), runs, &model, &cordon_env).expect("cordon");
    let cordon_p50 = report("cordon (local sandbox)", cordon);

    match bundled_claude() {
        None => println!("baseline: the SDK wheel bundles no Claude Code CLI; Cordon alone"),
        Some(claude) => {
            let home = tempfile::tempdir().unwrap();
            let env = [("HOME", home.path())];
            model.push_turns(turns());
            match measure(&python, &claude, 1, &model, &env)
                .and_then(|_| measure(&python, &claude, runs, &model, &env))
            {
                Ok(ms) if !ms.is_empty() => {
                    let claude_p50 = report("claude (bundled in the SDK wheel)", ms);
                    println!("cordon / claude at p50: {:.2}x", cordon_p50 / claude_p50);
                }
                Ok(_) => println!("baseline: the bundled CLI printed no timings"),
                Err(why) => {
                    println!("baseline: the bundled CLI could not run here: {why}");
                }
            }
        }
    }
    model.shutdown().await;
}
