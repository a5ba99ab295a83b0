//! Background shells end to end: Bash `run_in_background` starts a command in the
//! session's sandbox, TaskOutput reads only what is new each time, TaskStop kills it (the
//! host sees no process of it left while the session still runs), and one left running
//! ends with the session.

use std::time::Duration;

use cordon_tests::agent::{Output, run_command, tool_results};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, backend_ready};
use serde_json::json;

/// A loop printing numbered lines; `marker` makes its command line findable on the host.
fn ticker(marker: &str) -> String {
    format!("i=0; while :; do i=$((i+1)); echo \"tick $i\"; sleep 0.05; done # {marker}")
}

/// Host processes whose command line contains `marker` (every process on this kernel,
/// the sandbox's included).
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(marker) {
                found.push(format!("{}: {text}", name.to_string_lossy()));
            }
        }
    }
    found
}

/// The tick numbers in a TaskOutput result's output.
fn ticks(result: &str) -> Vec<u64> {
    result
        .lines()
        .filter_map(|l| l.strip_prefix("tick "))
        .map(|n| n.trim().parse().unwrap())
        .collect()
}

fn tag<'a>(result: &'a str, name: &str) -> &'a str {
    let open = format!("<{name}>");
    let start = result
        .find(&open)
        .unwrap_or_else(|| panic!("no {open} in {result}"))
        + open.len();
    let end = result[start..].find(&format!("</{name}>")).unwrap() + start;
    &result[start..end]
}

/// The result of the call `id` in the recorded requests, once the model has it.
async fn wait_for_result(model: &ScriptedModel, id: &str) -> (String, bool) {
    for _ in 0..1200 {
        for req in model.requests() {
            if let Some((_, text, is_error)) = tool_results(&req.body)
                .into_iter()
                .find(|(tid, _, _)| tid == id)
            {
                return (text, is_error);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no result for {id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_command_is_read_twice_stopped_and_one_left_ends_with_the_session() {
    background_shells(&[], "local").await;
}

/// The same on Docker: the same agent code path, in a `cordon-minimal` container (busybox
/// sh, no bash).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_shells_work_the_same_in_a_docker_sandbox() {
    if !backend_ready(Backend::Docker) {
        return;
    }
    background_shells(
        &["--sandbox", "docker", "--image", "cordon-minimal"],
        "docker",
    )
    .await;
}

async fn background_shells(sandbox: &[&str], tag_name: &str) {
    let ws = Workspace::new();
    let stopped = format!("cordon-bg-stopped-{tag_name}-{}", std::process::id());
    let left = format!("cordon-bg-left-{tag_name}-{}", std::process::id());
    let bash_bg = |id: &str, command: String| {
        Turn::tool_use(
            id,
            "Bash",
            json!({"command": command, "run_in_background": true, "description": "ticker"}),
        )
    };
    let read = |id: &str| {
        Turn::tool_use(
            id,
            "TaskOutput",
            json!({"task_id": "bash_1", "block": true, "timeout": 2000}),
        )
    };
    let model = ScriptedModel::start(vec![
        bash_bg("start", ticker(&stopped)),
        read("read1"),
        read("read2"),
        Turn::tool_use("stop", "TaskStop", json!({"task_id": "bash_1"})),
        Turn::tool_use("again", "TaskStop", json!({"shell_id": "bash_1"})),
        Turn::tool_use(
            "after",
            "BashOutput",
            json!({"bash_id": "bash_1", "block": false}),
        ),
        Turn::tool_use(
            "unknown",
            "TaskOutput",
            json!({"task_id": "bash_9", "block": false}),
        ),
        bash_bg("start2", ticker(&left)),
        // Holds the session open while the test looks at the host.
        Turn::tool_use(
            "hold",
            "Bash",
            json!({"command": "until [ -e go ]; do sleep 0.05; done; echo went"}),
        ),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = run_command(&model, home.path(), ws.path(), &["--output-format", "json"]);
    cmd.args(sandbox)
        .args(["--allowedTools", "Bash", "-p", "run a server"]);
    let run = tokio::spawn(Output::of(cmd));

    let (started, is_error) = wait_for_result(&model, "start").await;
    assert!(!is_error && started.contains("bash_1"), "{started}");
    let (first, is_error) = wait_for_result(&model, "read1").await;
    assert!(!is_error, "{first}");
    assert_eq!(tag(&first, "status"), "running", "{first}");
    assert_eq!(tag(&first, "retrieval_status"), "timeout", "{first}");
    let (second, _) = wait_for_result(&model, "read2").await;
    let (a, b) = (ticks(&first), ticks(&second));
    assert!(!a.is_empty() && !b.is_empty(), "{first}\n{second}");
    assert_eq!(a[0], 1, "the first read starts at the beginning: {first}");
    assert!(
        b[0] == a[a.len() - 1] + 1,
        "the second read carries only what is new, from where the first stopped:\n{first}\n{second}"
    );
    let (stop, is_error) = wait_for_result(&model, "stop").await;
    assert!(!is_error && stop.contains("Stopped task bash_1"), "{stop}");
    let (again, is_error) = wait_for_result(&model, "again").await;
    assert!(
        is_error && again.contains("not running") && again.contains("killed"),
        "{again}"
    );
    let (after, is_error) = wait_for_result(&model, "after").await;
    assert!(!is_error, "{after}");
    assert_eq!(tag(&after, "status"), "killed", "{after}");
    let (unknown, is_error) = wait_for_result(&model, "unknown").await;
    assert!(is_error && unknown.contains("bash_9"), "{unknown}");

    // The session still runs (held by the last Bash call): the stopped command is gone
    // from the host, the other one is there.
    let (started2, _) = wait_for_result(&model, "start2").await;
    assert!(started2.contains("bash_2"), "{started2}");
    let mut seen_left = Vec::new();
    for _ in 0..200 {
        seen_left = processes_with(&left);
        if !seen_left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !seen_left.is_empty(),
        "the running background command is visible"
    );
    let left_over = processes_with(&stopped);
    assert!(left_over.is_empty(), "TaskStop left {left_over:?}");
    std::fs::write(ws.join("go"), "").unwrap();

    let out = run.await.unwrap();
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let (held, _) = wait_for_result(&model, "hold").await;
    assert!(held.contains("went"), "{held}");
    let mut remaining = processes_with(&left);
    for _ in 0..100 {
        if remaining.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        remaining = processes_with(&left);
    }
    assert!(
        remaining.is_empty(),
        "a background command outlived its session: {remaining:?}"
    );
}
