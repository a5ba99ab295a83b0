//! Bounded sessions through `cordon run` (issue 8, items 6 and 7), both backends, with
//! small limits in the user's settings (`sandbox.limits`) so each case is quick and
//! harmless: a pid hopper and a double-forked daemon started by one Bash call are gone,
//! seen from the host, once the next call runs; an allocation past the memory limit fails
//! while the session goes on; the process count is capped, and a fork bomb leaves the
//! host responsive and dies with its call. Every marker is a file in the test's own
//! workspace.

use std::path::Path;
use std::time::Duration;

use cordon_tests::agent::{Output, run_command, tool_results};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, backend_ready, host_processes_matching};
use serde_json::json;
use tokio::task::JoinHandle;

/// Limits small enough to reach at once: 64 MiB, 64 processes, half a CPU.
fn small_limits() -> serde_json::Value {
    json!({"memory": "64m", "pids": 64, "cpus": 0.5})
}

/// A marker no other process on the host carries.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}{}x{nanos}", std::process::id())
}

fn bash(id: &str, command: &str) -> Turn {
    Turn::tool_use(id, "Bash", json!({"command": command}))
}

/// A `cordon run` on `backend` under the small limits, running in the background so the
/// test can look at the host while a call runs.
struct Session {
    model: ScriptedModel,
    run: JoinHandle<Output>,
    _state: tempfile::TempDir,
}

impl Session {
    async fn start(backend: Backend, ws: &Path, turns: Vec<Turn>) -> Session {
        let state = tempfile::tempdir().unwrap();
        let settings = state.path().join("settings.json");
        let body = json!({"sandbox": {"limits": small_limits()}});
        std::fs::write(&settings, body.to_string()).unwrap();
        let model = ScriptedModel::start(turns).await.unwrap();
        let home = state.path().join("home");
        let args = [
            "--sandbox",
            backend.name(),
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
        ];
        let mut cmd = run_command(&model, &home, ws, &args);
        cmd.env("CORDON_USER_SETTINGS", &settings)
            .env("CORDON_MANAGED_SETTINGS", state.path().join("none.json"))
            .args(["-p", "go"]);
        let run = tokio::spawn(Output::of(cmd));
        Session {
            model,
            run,
            _state: state,
        }
    }

    /// Waits until `path` exists; the session's output if it ended first.
    async fn wait_for(&mut self, path: &Path) {
        while !path.exists() {
            if self.run.is_finished() {
                let out = (&mut self.run).await.unwrap();
                panic!("the session ended before {path:?} appeared: {out:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the end (exit 0 asserted); each Bash call's (text, is_error), in order.
    async fn finish(self) -> Vec<(String, bool)> {
        let out = self.run.await.unwrap();
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        let requests = self.model.requests();
        requests[1..]
            .iter()
            .map(|r| {
                let (_, text, is_error) = tool_results(&r.body).remove(0);
                (text, is_error)
            })
            .collect()
    }
}

async fn a_hopper_and_a_daemon_are_gone_before_the_next_call(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let ws = Workspace::new();
    let tag = unique("hop");
    // Each copy of the hopper starts the next and exits: never the same pid twice.
    std::fs::write(ws.join(&format!("{tag}.sh")), "sh \"$0\" &\n").unwrap();
    let first = format!(
        "(setsid sh -c 'while :; do sleep 1; done' {tag}-daemon &); \
         env -i setsid sh ./{tag}.sh & echo started"
    );
    // The next call carries no marker; it waits for the test to have looked.
    let second = "echo > next-started; while [ ! -e next-go ]; do sleep 0.05; done; echo next";
    let turns = vec![bash("b1", &first), bash("b2", second), Turn::text("done")];
    let mut session = Session::start(backend, ws.path(), turns).await;
    session.wait_for(&ws.join("next-started")).await;
    // While the next call runs, seen from the host: nothing of the first call's.
    for _ in 0..20 {
        let left = host_processes_matching(&tag);
        assert!(
            left.is_empty(),
            "the first call's processes live on: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    std::fs::write(ws.join("next-go"), "").unwrap();
    let results = session.finish().await;
    assert!(results[0].0.contains("started"), "{results:?}");
    assert!(
        results[1].0.contains("next") && !results[1].1,
        "{results:?}"
    );
    assert!(host_processes_matching(&tag).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pid_hopper_and_a_daemon_from_one_bash_call_are_gone_before_the_next() {
    a_hopper_and_a_daemon_are_gone_before_the_next_call(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_a_pid_hopper_and_a_daemon_from_one_bash_call_are_gone_before_the_next() {
    a_hopper_and_a_daemon_are_gone_before_the_next_call(Backend::Docker).await;
}

async fn allocation_past_the_limit_fails(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let ws = Workspace::new();
    let probe = ws.with_probe();
    let p = probe.display();
    let turns = vec![
        // Well inside the limit: allowed, so the limit is not "nothing works".
        bash("b1", &format!("{p} alloc 8")),
        // Four times the limit: killed before it can say it got there.
        bash("b2", &format!("{p} alloc 256; echo \"exit $?\"")),
        bash("b3", "echo still-here"),
        Turn::text("done"),
    ];
    let results = Session::start(backend, ws.path(), turns)
        .await
        .finish()
        .await;
    assert!(results[0].0.contains("RESULT alloc allowed"), "{results:?}");
    let (past, _) = &results[1];
    assert!(
        !past.contains("ALLOCATED"),
        "allocated past the limit: {past}"
    );
    assert!(past.contains("exit 137"), "not killed: {past}");
    assert!(results[2].0.contains("still-here"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocation_past_the_session_memory_limit_fails() {
    allocation_past_the_limit_fails(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_an_allocation_past_the_session_memory_limit_fails() {
    allocation_past_the_limit_fails(Backend::Docker).await;
}

async fn a_fork_bomb_is_capped(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let ws = Workspace::new();
    let probe = ws.with_probe();
    let marker = unique("bomb");
    // The bomb forks until the pids limit stops it; the call's shell forks it once, up
    // front, then uses builtins only: says it started and waits for the test.
    let bomb = format!(
        "{marker}() {{ {marker} | {marker} & }}; ({marker}) >/dev/null 2>&1 & \
         : > started-{marker}; while [ ! -e stop-{marker} ]; do :; done; echo survived"
    );
    let turns = vec![
        bash("b1", &format!("{} fork-count 200", probe.display())),
        bash("b2", &bomb),
        bash("b3", "echo still-here"),
        Turn::text("done"),
    ];
    let mut session = Session::start(backend, ws.path(), turns).await;
    session
        .wait_for(&ws.join(&format!("started-{marker}")))
        .await;
    // The host still starts processes, bomb and all.
    let host = tokio::process::Command::new("sh")
        .args(["-c", "echo host-ok"])
        .output()
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&host.stdout), "host-ok\n");
    std::fs::write(ws.join(&format!("stop-{marker}")), "").unwrap();
    let results = session.finish().await;
    let forked: usize = results[0]
        .0
        .lines()
        .find_map(|l| l.strip_prefix("FORKED "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count: {results:?}"));
    assert!(forked < 64, "{forked} processes under a limit of 64");
    assert!(results[1].0.contains("survived"), "{results:?}");
    assert!(results[2].0.contains("still-here"), "{results:?}");
    let left = host_processes_matching(&marker);
    assert!(left.is_empty(), "the bomb outlived its call: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_count_is_capped_and_a_fork_bomb_leaves_the_host_responsive() {
    a_fork_bomb_is_capped(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_the_process_count_is_capped_and_a_fork_bomb_leaves_the_host_responsive() {
    a_fork_bomb_is_capped(Backend::Docker).await;
}
