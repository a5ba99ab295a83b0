//! The agent loop's own cost, measured side by side with the tool time it excludes:
//! a 20-tool-call scenario (one call per turn: Read, Glob, Grep, Bash `true` in rotation)
//! against the zero-latency scripted model, on the local sandbox.
//! - harness overhead per turn = (wall time of the run − time inside tools) / model calls;
//!   target ≤ 2 ms per turn. "Time inside tools" is measured by a gate wrapped around
//!   every call (from just before the tool runs to just after it returns).
//! - peak RSS of the whole `cordon run` process for the same scenario (release binary).
//!
//! Run: `cargo build --release --bins && cargo bench -p cordon-tests --bench loop_overhead`.
#![allow(clippy::cast_possible_truncation)] // statistics over small sample counts
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cordon::agent::{AgentLoop, GateVerdict, LoopConfig, RulesGate, ToolCallInfo, ToolGate};
use cordon::model::{Credentials, ModelClient, ModelConfig};
use cordon::permissions::{Engine, PermissionMode};
use cordon::sandbox::local::LocalBackend;
use cordon::sandbox::{Backend, SandboxSpec};
use cordon::session::SessionStore;
use cordon::tools::{ToolContext, ToolOutput, ToolRegistry};
use cordon_tests::scripted_model::{Options, ScriptedModel, Turn};
use serde_json::json;

const TOOL_CALLS: usize = 20;

/// Times every tool call, from the end of its permission check (the tool starts right
/// after, since each turn has one call) to the moment its output is back.
struct TimingGate {
    inner: RulesGate,
    started: Mutex<HashMap<String, Instant>>,
    total: Mutex<Duration>,
}

#[tonic::async_trait]
impl ToolGate for TimingGate {
    async fn before(&self, call: &ToolCallInfo) -> GateVerdict {
        let verdict = self.inner.before(call).await;
        // One call per turn: the tool starts right after planning.
        self.started
            .lock()
            .unwrap()
            .insert(call.tool_use_id.clone(), Instant::now());
        verdict
    }

    async fn after(&self, call: &ToolCallInfo, output: ToolOutput) -> ToolOutput {
        if let Some(start) = self.started.lock().unwrap().remove(&call.tool_use_id) {
            *self.total.lock().unwrap() += start.elapsed();
        }
        output
    }
}

fn scenario(ws: &Path) -> Vec<Turn> {
    let file = ws.join("src/lib.rs").display().to_string();
    let mut turns = Vec::new();
    for i in 0..TOOL_CALLS {
        let id = format!("t{i}");
        turns.push(match i % 4 {
            0 => Turn::tool_use(id, "Read", json!({"file_path": file})),
            1 => Turn::tool_use(id, "Glob", json!({"pattern": "**/*.rs"})),
            2 => Turn::tool_use(
                id,
                "Grep",
                json!({"pattern": "fn ", "output_mode": "content"}),
            ),
            _ => Turn::tool_use(id, "Bash", json!({"command": "true"})),
        });
    }
    turns.push(Turn::text("done"));
    turns
}

fn make_workspace(root: &Path) -> tempfile::TempDir {
    let ws = tempfile::tempdir_in(root).unwrap();
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    let body: String = (0..200)
        .map(|i| format!("pub fn f{i}() -> u32 {{ {i} }}\n"))
        .collect();
    std::fs::write(ws.path().join("src/lib.rs"), body).unwrap();
    ws
}

async fn one_in_process_run(root: &Path, backend: &LocalBackend) -> (Duration, Duration, u32) {
    let ws = make_workspace(root);
    let opts = Options {
        zero_latency: true,
        ..Default::default()
    };
    let model = ScriptedModel::start_with(scenario(ws.path()), opts)
        .await
        .unwrap();
    let client = ModelClient::new(ModelConfig::new(
        model.base_url(),
        Credentials::ApiKey("k".into()),
    ))
    .unwrap();
    let home = tempfile::tempdir_in(root).unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let (info, transcript) = store.create(ws.path(), "bench").unwrap();
    let sandbox = backend
        .start(&SandboxSpec::new(info.id.clone(), ws.path()))
        .await
        .unwrap();
    let (ctx, _interrupter) = ToolContext::new(sandbox.client.clone(), ws.path());
    let perms = Engine::from_lists(PermissionMode::BypassPermissions, &[], &[], ws.path()).unwrap();
    let gate = Arc::new(TimingGate {
        inner: RulesGate(Arc::new(perms)),
        started: Mutex::new(HashMap::new()),
        total: Mutex::new(Duration::ZERO),
    });
    let mut agent = AgentLoop::new(
        client,
        ToolRegistry::default_tools(),
        gate.clone(),
        ctx.clone(),
        transcript,
        LoopConfig::new("bench", ws.path()),
    );
    let mut interrupts = ctx.interrupt_signal();
    let start = Instant::now();
    let outcome = agent.run("go", &mut interrupts).await;
    let wall = start.elapsed();
    assert!(!outcome.is_error, "{}", outcome.text);
    assert_eq!(outcome.turns as usize, TOOL_CALLS + 1);
    sandbox.destroy().await.unwrap();
    model.shutdown().await;
    let tools = *gate.total.lock().unwrap();
    (wall, tools, outcome.turns)
}

fn peak_rss_of_cordon_run(root: &Path, rt: &tokio::runtime::Runtime) -> (Duration, u64) {
    let cordon = cordon_tests::bin_dir().join("cordon");
    let ws = make_workspace(root);
    let home = tempfile::tempdir_in(root).unwrap();
    let opts = Options {
        zero_latency: true,
        ..Default::default()
    };
    let model = rt
        .block_on(ScriptedModel::start_with(scenario(ws.path()), opts))
        .unwrap();
    let start = Instant::now();
    let child = std::process::Command::new(&cordon)
        .args([
            "run",
            "--output-format",
            "json",
            "--permission-mode",
            "bypassPermissions",
            "--workspace",
        ])
        .arg(ws.path())
        .arg("go")
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "k")
        .env("CORDON_HOME", home.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // wait4 gives this child's own peak RSS (ru_maxrss, KiB).
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for the kernel to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child; status and usage are valid out-pointers.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "cordon run failed: {status}"
    );
    drop(child);
    (wall, usage.ru_maxrss as u64)
}

fn main() {
    let root = cordon_tests::bin_dir().join("bench-workspaces");
    std::fs::create_dir_all(&root).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let backend = LocalBackend::from_env().expect("local backend (build sandbox-agent first)");
    println!(
        "== agent loop overhead, {TOOL_CALLS} tool calls + final answer, zero-latency scripted model, local sandbox"
    );
    let mut per_turn = Vec::new();
    for run in 0..7 {
        let (wall, tools, turns) = rt.block_on(one_in_process_run(&root, &backend));
        let overhead = wall.saturating_sub(tools) / turns;
        println!(
            "run {run}: wall {wall:>9.2?}  in tools {tools:>9.2?}  model calls {turns}  overhead/turn {overhead:>8.1?}"
        );
        if run > 0 {
            per_turn.push(overhead);
        }
    }
    per_turn.sort();
    // The transcript is fsynced at every turn boundary (the durability the loop promises):
    // measure that cost alone on the same filesystem, to read the figure above.
    let probe = tempfile::tempdir_in(&root).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(probe.path().join("t.jsonl"))
        .unwrap();
    let mut syncs: Vec<Duration> = (0..50)
        .map(|_| {
            use std::io::Write;
            let start = Instant::now();
            file.write_all(b"{\"type\":\"user\"}\n").unwrap();
            file.sync_data().unwrap();
            start.elapsed()
        })
        .collect();
    syncs.sort();
    println!(
        "baseline: one append + fdatasync on the same filesystem: median {:?}",
        syncs[syncs.len() / 2]
    );
    println!(
        "harness overhead per turn: median {:?} (target <= 2 ms)",
        per_turn[per_turn.len() / 2]
    );

    println!("== whole `cordon run` process (release), same scenario");
    let mut rss = Vec::new();
    for _ in 0..3 {
        let (wall, kib) = peak_rss_of_cordon_run(&root, &rt);
        println!("wall {wall:>9.2?}  peak RSS {:.1} MiB", kib as f64 / 1024.0);
        rss.push(kib);
    }
    rss.sort();
    println!(
        "peak RSS of cordon run: median {:.1} MiB",
        rss[1] as f64 / 1024.0
    );
}
