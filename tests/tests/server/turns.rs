//! Agent turns over the API: the event stream of a turn, reconnecting with Last-Event-ID,
//! and a permission request answered over HTTP.

use cordon_tests::scripted_model::{Reply, ScriptedModel, Turn};
use reqwest::StatusCode;
use serde_json::json;

use super::fixture::{Server, every_call_has_its_result, ids_are_contiguous};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_its_events_and_a_reconnect_misses_nothing() {
    let model = ScriptedModel::start(vec![
        Turn::Reply(
            Reply::text("Counting files.")
                .with_tool_use("b1", "Bash", json!({"command": "echo one > one.txt && ls"}))
                .with_tool_use("g1", "Glob", json!({"pattern": "*"})),
        ),
        Turn::text("There is one file."),
    ])
    .await
    .unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let id = alpha.create(json!({})).await;
    let (status, _) = alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "count the files"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let all = alpha.events_until(&id, None, |e| e.kind == "result").await;
    ids_are_contiguous(&all);
    assert_eq!(all[0].id, 1);
    let kinds: Vec<&str> = all.iter().map(|e| e.kind.as_str()).collect();
    for kind in [
        "lifecycle",
        "user",
        "text_delta",
        "assistant",
        "tool_call",
        "tool_result",
        "usage",
        "result",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    every_call_has_its_result(&all);
    let result = all.last().unwrap();
    assert_eq!(result.data["text"], "There is one file.");
    assert_eq!(result.data["is_error"], false);
    let bash = all
        .iter()
        .find(|e| e.kind == "tool_result" && e.data["tool_use_id"] == "b1")
        .unwrap();
    assert!(
        bash.data["content"].to_string().contains("one.txt"),
        "{bash:?}"
    );

    // Reconnecting after any event replays exactly the rest, from the store.
    for cut in [1, all.len() / 2, all.len() - 2] {
        let after = all[cut - 1].id;
        let rest = alpha
            .events_until(&id, Some(after), |e| e.kind == "result")
            .await;
        assert_eq!(rest, all[cut..].to_vec());
    }
    let (_, view) = alpha.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(view["state"], "idle");
    assert_eq!(view["last_event_id"], all.last().unwrap().id + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_is_answered_over_http() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let ws = server.tenant_root("alpha").join("repo");
    std::fs::create_dir_all(&ws).unwrap();
    model.push_turns([
        Turn::tool_use(
            "w1",
            "Write",
            json!({"file_path": ws.join("allowed.txt"), "content": "yes\n"}),
        ),
        Turn::text("Wrote it."),
        Turn::tool_use(
            "w2",
            "Write",
            json!({"file_path": ws.join("denied.txt"), "content": "no\n"}),
        ),
        Turn::text("Could not write it."),
    ]);
    let id = alpha
        .create(json!({"workspace": "repo", "permission_mode": "default"}))
        .await;

    alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "write allowed.txt"}),
        )
        .await;
    let first = alpha
        .events_until(&id, None, |e| e.kind == "permission_request")
        .await;
    let request = first.last().unwrap();
    assert_eq!(request.data["tool"], "Write");
    assert_eq!(request.data["tool_use_id"], "w1");
    // The assistant message that asked for the call came first.
    assert!(
        first
            .iter()
            .any(|e| e.kind == "tool_call" && e.data["tool_use_id"] == "w1")
    );
    let rid = request.data["request_id"].as_str().unwrap();
    let (_, view) = alpha.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(view["pending_permissions"], json!([rid]));
    // Another tenant cannot answer it.
    let (status, _) = server
        .api("beta")
        .post(
            &format!("/v1/sessions/{id}/permissions/{rid}"),
            json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = alpha
        .post(
            &format!("/v1/sessions/{id}/permissions/{rid}"),
            json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = alpha
        .post(
            &format!("/v1/sessions/{id}/permissions/{rid}"),
            json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "answered twice");
    let after = first.last().unwrap().id;
    let rest = alpha
        .events_until(&id, Some(after), |e| e.kind == "result")
        .await;
    let result = rest.iter().find(|e| e.kind == "tool_result").unwrap();
    assert_eq!(result.data["is_error"], false, "{result:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("allowed.txt")).unwrap(),
        "yes\n"
    );

    alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "write denied.txt"}),
        )
        .await;
    let last = rest.last().unwrap().id;
    let asked = alpha
        .events_until(&id, Some(last), |e| e.kind == "permission_request")
        .await;
    let rid = asked.last().unwrap().data["request_id"]
        .as_str()
        .unwrap()
        .to_string();
    alpha
        .post(
            &format!("/v1/sessions/{id}/permissions/{rid}"),
            json!({"decision": "deny", "message": "not that file"}),
        )
        .await;
    let rest = alpha
        .events_until(&id, Some(asked.last().unwrap().id), |e| e.kind == "result")
        .await;
    let result = rest.iter().find(|e| e.kind == "tool_result").unwrap();
    assert_eq!(result.data["is_error"], true);
    assert!(
        result.data["content"].to_string().contains("not that file"),
        "{result:?}"
    );
    assert!(!ws.join("denied.txt").exists());
}
