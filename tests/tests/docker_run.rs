//! `cordon run --sandbox docker` end to end: the real binary, a session container of
//! `cordon-minimal`, and a scripted model. Skips loudly only when Docker is unreachable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, backend_ready, cordon_bin};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_runs_its_tools_in_a_session_container() {
    if !backend_ready(Backend::Docker) {
        return;
    }
    let ws = Workspace::new();
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    std::fs::write(ws.join("notes.txt"), "from the host\n").unwrap();
    let notes = ws.join("notes.txt").display().to_string();
    let made = ws.join("made.txt").display().to_string();
    let turns = vec![
        Turn::tool_use("r1", "Read", json!({"file_path": notes})),
        Turn::tool_use(
            "b1",
            "Bash",
            json!({"command": "id -u; test -x /sandbox-agent && echo image-root; echo in-container > made.txt"}),
        ),
        Turn::tool_use(
            "w1",
            "Write",
            json!({"file_path": ws.join(".git/hooks/pre-commit").display().to_string(), "content": "owned"}),
        ),
        Turn::tool_use("r2", "Read", json!({"file_path": made})),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new(cordon_bin())
            .args(["run", "--sandbox", "docker", "--image", "cordon-minimal"])
            .arg("--workspace")
            .arg(ws.path())
            .args([
                "--output-format",
                "json",
                "--permission-mode",
                "bypassPermissions",
                "-p",
                "look around",
            ])
            .env("ANTHROPIC_BASE_URL", model.base_url())
            .env("ANTHROPIC_API_KEY", "test-key")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .env("CORDON_HOME", home.path())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("cordon run hung")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["result"], "done", "{stdout}");

    // Every tool result the model saw, in order.
    let results: Vec<(String, bool)> = model
        .requests()
        .iter()
        .filter_map(|r| r.body["messages"].as_array()?.last().cloned())
        .filter_map(|m| {
            let block = m["content"].as_array()?.first()?.clone();
            (block["type"] == "tool_result").then(|| {
                let text = match &block["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (text, block["is_error"].as_bool().unwrap_or(false))
            })
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[0].0.contains("from the host"), "{results:?}");
    let uid: u32 = results[1].0.lines().next().unwrap().trim().parse().unwrap();
    // The docker backend's uid range, and the image's root (only it has /sandbox-agent).
    assert!((300_000..360_000).contains(&uid), "{results:?}");
    assert!(results[1].0.contains("image-root"), "{results:?}");
    assert!(results[2].1, "writing a git hook fails: {results:?}");
    assert!(results[3].0.contains("in-container"), "{results:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "in-container\n"
    );
    assert!(
        !ws.join(".git/hooks/pre-commit").exists(),
        "no hook planted"
    );
    assert!(
        !ws.join(".git/commondir").exists(),
        "the commondir placeholder is gone"
    );
}

/// Issue 8, item E on Docker, end to end: a daemon double-forked into a session of its
/// own and a pid hopper (each copy starts the next and exits) started by one Bash call are
/// both dead before the next call starts, seen from inside the container's pid namespace
/// (every process of the sandbox) and from the host afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_forked_daemon_and_a_pid_hopper_die_with_their_call() {
    if !backend_ready(Backend::Docker) {
        return;
    }
    use cordon_tests::agent::{run_json_ok, tool_results};
    let ws = Workspace::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let tag = format!("hop{}x{nanos}", std::process::id());
    std::fs::write(ws.join(&format!("{tag}.sh")), "sh \"$0\" &\n").unwrap();
    let start = format!(
        "(setsid sh -c 'while :; do sleep 1; done' {tag}-daemon &); \
         setsid sh ./{tag}.sh & echo started"
    );
    // The marker is put together at run time, so this call's own command line does not
    // hold it; `case` is a builtin, so no process of this call carries it either.
    let (head, rest) = tag.split_at(3);
    let count = format!(
        "m={head}; m=\"${{m}}{rest}\"; n=0; for p in /proc/[0-9]*; do \
         c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); \
         case \"$c\" in *\"$m\"*) n=$((n+1)); echo \"left: $c\";; esac; done; \
         echo \"found $n\""
    );
    let turns = vec![
        Turn::tool_use("b1", "Bash", json!({"command": start})),
        Turn::tool_use("b2", "Bash", json!({"command": count})),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    run_json_ok(
        &model,
        home.path(),
        ws.path(),
        &[
            "--sandbox",
            "docker",
            "--permission-mode",
            "bypassPermissions",
            "-p",
        ],
        "go",
    )
    .await;
    let requests = model.requests();
    let first = tool_results(&requests[1].body);
    assert!(first[0].1.contains("started"), "{first:?}");
    let second = tool_results(&requests[2].body);
    assert!(second[0].1.contains("found 0"), "{second:?}");
    assert!(cordon_tests::host_processes_matching(&tag).is_empty());
}
