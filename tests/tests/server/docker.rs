//! `cordon serve` on the Docker backend, end to end: the server's warm pool fills (seen on
//! `/metrics`), a session takes one of its containers and runs the model's Bash and
//! Write, its events stream, exec and file reads reach the same container and
//! workspace, and a DELETE removes the container. Skips loudly only when Docker is
//! unreachable.

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, backend_ready};
use reqwest::StatusCode;
use serde_json::json;

use super::fixture::{HANG, Server, every_call_has_its_result};
use super::ops::{get_text, promtool_accepts, sample};

/// Whether a container (running or not) passes `filter` (`docker ps --filter`).
fn any_container(filter: &str) -> bool {
    let out = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", filter])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    !String::from_utf8(out.stdout).unwrap().trim().is_empty()
}

/// Polls `/metrics` until `series` is at least `at_least`; returns the exposition.
async fn metrics_until(api: &super::fixture::Api, series: &str, at_least: f64) -> String {
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let text = get_text(api, "/metrics").await;
        if sample(&text, series) >= at_least {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} never reached {at_least}:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_session_runs_tools_exec_and_files_and_its_container_goes_with_it() {
    if !backend_ready(Backend::Docker) {
        return;
    }
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let mut server = Server::start_docker(&model).await;
    let alpha = server.api("alpha");
    // The server keeps a warm pool of idle containers; `/metrics` shows it filling.
    metrics_until(&alpha, "cordon_warm_pool_size", 1.0).await;
    let id = alpha
        .create(json!({"backend": "docker", "permission_mode": "acceptEdits"}))
        .await;
    let (_, view) = alpha.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(view["backend"], "docker", "{view}");
    let ws = server.tenant_root("alpha").join(&id);
    model.push_turns([
        Turn::tool_use(
            "b1",
            "Bash",
            json!({"command": "echo from-bash > bash.txt && test -x /sandbox-agent && echo in-container"}),
        ),
        Turn::tool_use(
            "w1",
            "Write",
            json!({"file_path": ws.join("written.txt"), "content": "written\n"}),
        ),
        Turn::text("done in docker"),
    ]);
    let (status, body) = alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "work"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let events = alpha.events_until(&id, None, |e| e.kind == "result").await;
    every_call_has_its_result(&events);
    let results: Vec<_> = events.iter().filter(|e| e.kind == "tool_result").collect();
    assert_eq!(results.len(), 2, "{events:?}");
    assert!(
        results.iter().all(|r| r.data["is_error"] == false),
        "{results:?}"
    );
    assert!(
        results[0].data["content"]
            .to_string()
            .contains("in-container"),
        "{:?}",
        results[0]
    );
    assert_eq!(events.last().unwrap().data["text"], "done in docker");
    // Claiming a warm container needs root (it injects the workspace mount); otherwise
    // the session started cold.
    let start = if nix::unistd::geteuid().is_root() {
        "warm"
    } else {
        "cold"
    };
    let metrics = get_text(&alpha, "/metrics").await;
    let series = format!("cordon_sandbox_start_seconds_count{{start=\"{start}\"}}");
    assert_eq!(sample(&metrics, &series), 1.0, "{metrics}");
    promtool_accepts(&metrics);

    // The sandbox without the model: the same container and workspace.
    let (out, exit) = alpha
        .exec(
            &id,
            json!({"command": "cat bash.txt written.txt; test -x /sandbox-agent && echo in-container"}),
        )
        .await;
    assert_eq!(exit["code"], 0, "{out}");
    assert_eq!(out, "from-bash\nwritten\nin-container\n");
    // The container's hostname is its short id.
    let (host, _) = alpha
        .exec(&id, json!({"command": "cat /etc/hostname"}))
        .await;
    let container = host.trim().to_string();
    assert!(
        any_container(&format!("id={container}")),
        "no container {container}"
    );
    let (status, bytes) = alpha
        .get_bytes(&format!("/v1/sessions/{id}/files/written.txt"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(bytes, b"written\n");

    let (status, view) = alpha.delete(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["state"], "ended");
    let deadline = tokio::time::Instant::now() + HANG;
    while any_container(&format!("id={container}")) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session's container outlived it"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // A graceful shutdown removes the pool's idle containers too.
    let pool = format!("name=cordon-pool-{}-", server.pid());
    assert!(any_container(&pool), "the pool kept no container");
    assert!(server.terminate().await.success());
    assert!(
        !any_container(&pool),
        "idle pool containers outlived the server"
    );
}
