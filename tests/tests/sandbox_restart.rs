//! A sandbox that dies mid-session, as a user of `cordon run` meets it: the model's command
//! kills the sandbox's agent (on Docker that stops the container). The call that was
//! running returns an error saying the sandbox stopped; the next call runs in a fresh
//! sandbox on the same workspace, which still holds what was written before; the session
//! ends normally and leaves no container behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cordon_tests::agent::{run_json_ok, tool_results};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, backend_ready};
use serde_json::json;

async fn a_killed_agent_is_replaced_on_the_next_call(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let ws = Workspace::new();
    let kept = ws.join("kept.txt").display().to_string();
    let turns = vec![
        Turn::tool_use(
            "b1",
            "Bash",
            // $PPID of the command's shell is the agent itself.
            json!({"command": "echo before > kept.txt && kill -9 $PPID; sleep 30"}),
        ),
        Turn::tool_use("r1", "Read", json!({"file_path": kept})),
        Turn::tool_use("b2", "Bash", json!({"command": "echo after >> kept.txt"})),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let (out, result) = run_json_ok(
        &model,
        home.path(),
        ws.path(),
        &[
            "--sandbox",
            backend.name(),
            "--permission-mode",
            "bypassPermissions",
            "-p",
        ],
        "survive",
    )
    .await;
    assert_eq!(result["result"], "done", "{}", out.stdout);

    let requests = model.requests();
    assert_eq!(requests.len(), 4, "model calls");
    let killed = &tool_results(&requests[1].body)[0];
    assert!(
        killed.2,
        "the call whose sandbox died is an error: {killed:?}"
    );
    assert!(
        killed.1.contains("sandbox stopped during this call"),
        "{killed:?}"
    );
    let read = &tool_results(&requests[2].body)[0];
    assert!(!read.2, "{read:?}");
    assert!(read.1.contains("before"), "the workspace is kept: {read:?}");
    assert!(
        read.1.contains("fresh sandbox"),
        "the model is told: {read:?}"
    );
    let again = &tool_results(&requests[3].body)[0];
    assert!(!again.2, "{again:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("kept.txt")).unwrap(),
        "before\nafter\n"
    );

    if backend == Backend::Docker {
        let session = result["session_id"].as_str().unwrap();
        let left = std::process::Command::new("docker")
            .args(["ps", "-aq", "--filter"])
            .arg(format!("label=cordon.session={session}"))
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&left.stdout).trim().is_empty(),
            "containers left behind: {}",
            String::from_utf8_lossy(&left.stdout)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_a_killed_agent_is_replaced_on_the_next_call() {
    a_killed_agent_is_replaced_on_the_next_call(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_a_killed_agent_is_replaced_on_the_next_call() {
    a_killed_agent_is_replaced_on_the_next_call(Backend::Docker).await;
}
