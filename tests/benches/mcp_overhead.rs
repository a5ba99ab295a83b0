//! MCP tool-call overhead, side by side in one run:
//! 1. `echo` of tests/mcp/flaky_server.py through Cordon's client: rmcp over the agent's
//!    interactive exec stream, the server confined in the local sandbox, p50 / p99;
//! 2. baseline: the same server as a plain host child, one JSON-RPC line written to its
//!    stdin and one read from its stdout per call (a direct stdio round trip), p50 / p99.
//!
//! Run: `cargo bench -p cordon-tests --bench mcp_overhead` (needs tests/mcp/setup.sh's
//! venv, which it runs, and `cargo build --release --bins`).
#![allow(clippy::cast_possible_truncation)] // statistics over small sample counts
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cordon::mcp::{McpServer, ServerConfig, Timeouts, Transport};
use cordon::sandbox::local::LocalBackend;
use cordon::sandbox::{Backend, SandboxSpec};
use cordon::tools::ToolContext;
use serde_json::json;

const CALLS: usize = 500;

fn summary(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name:<56} n={:<5} p50={:>9.1?} p99={:>9.1?}",
        samples.len(),
        at(0.5),
        at(0.99)
    );
    at(0.5)
}

fn python() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/setup.sh");
    let out = Command::new(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Direct stdio: initialize, then `echo` calls, one line out and one line back each.
fn direct(python: &Path, server: &Path) -> Vec<Duration> {
    let mut child = Command::new(python)
        .arg(server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut send = |v: serde_json::Value, answer: bool, line: &mut String| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
        if answer {
            line.clear();
            stdout.read_line(line).unwrap();
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}}),
        true,
        &mut line,
    );
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
        &mut line,
    );
    let mut out = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 20 {
        let call = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}}});
        let start = Instant::now();
        send(call, true, &mut line);
        let took = start.elapsed();
        assert!(line.contains("hi (pid"), "{line}");
        if i >= 20 {
            out.push(took);
        }
    }
    drop(stdin);
    let _ = child.wait();
    out
}

fn main() {
    let python = python();
    let release = cordon_tests::bin_dir();
    let root = release.join("bench-workspaces");
    std::fs::create_dir_all(&root).unwrap();
    let ws = tempfile::tempdir_in(&root).unwrap();
    let server = ws.path().join("flaky_server.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/flaky_server.py"),
        &server,
    )
    .unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("== MCP tool call (echo), {CALLS} calls after 20 warm-up");
    rt.block_on(async {
        let backend = LocalBackend::from_env().expect("local backend");
        let sandbox = backend
            .start(&SandboxSpec::new("bench-mcp", ws.path()))
            .await
            .expect("start sandbox");
        let (ctx, _interrupter) = ToolContext::new(sandbox.client.clone(), ws.path());
        let mcp = McpServer::new(
            ServerConfig {
                name: "flaky".into(),
                scope: "user",
                transport: Transport::Stdio {
                    command: python.display().to_string(),
                    args: vec![server.display().to_string()],
                    env: Default::default(),
                },
            },
            Timeouts::from_env(),
            None,
        );
        mcp.connect(&ctx).await.expect("connect");
        let mut samples = Vec::with_capacity(CALLS);
        for i in 0..CALLS + 20 {
            let args = json!({"text": "hi"}).as_object().cloned().unwrap();
            let start = Instant::now();
            let r = mcp.call(&ctx, "echo", args).await.unwrap();
            let took = start.elapsed();
            assert!(r.to_string().contains("hi (pid"), "{r}");
            if i >= 20 {
                samples.push(took);
            }
        }
        let cordon = summary(
            "Cordon: rmcp over the sandbox's exec stream (confined)",
            samples,
        );
        let base = summary(
            "baseline: direct stdio round trip to a host child",
            direct(&python, &server),
        );
        println!(
            "overhead at p50: {:.1?} ({:.2}x)",
            cordon.saturating_sub(base),
            cordon.as_secs_f64() / base.as_secs_f64()
        );
        mcp.stop().await;
        drop(ctx);
        let _ = sandbox.destroy().await;
    });
}
