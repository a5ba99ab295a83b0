//! Lifecycle: idle sessions pause and resume with their conversation, a TTL ends a
//! session, a failed start says why and can be deleted, and a `kill -9` of the server loses
//! no session and no completed turn.

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use reqwest::StatusCode;
use serde_json::json;

use super::fixture::{Server, every_call_has_its_result, ids_are_contiguous};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_pauses_and_resumes_with_its_conversation_and_a_ttl_ends_one() {
    let model = ScriptedModel::start(vec![
        Turn::text("first answer"),
        Turn::text("second answer"),
    ])
    .await
    .unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let id = alpha.create(json!({"idle_seconds": 1})).await;
    alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "one"}),
        )
        .await;
    let first = alpha.events_until(&id, None, |e| e.kind == "result").await;
    alpha.wait_state(&id, "paused").await;

    // The next call resumes it, with the conversation so far.
    alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "two"}),
        )
        .await;
    let rest = alpha
        .events_until(&id, Some(first.last().unwrap().id), |e| e.kind == "result")
        .await;
    assert_eq!(rest.last().unwrap().data["text"], "second answer");
    let states: Vec<&str> = rest
        .iter()
        .filter(|e| e.kind == "lifecycle")
        .filter_map(|e| e.data["state"].as_str())
        .collect();
    let resumed = ["paused", "starting", "idle", "running"];
    assert!(states.windows(4).any(|w| w == resumed), "{states:?}");
    let last = model.requests().last().unwrap().body.clone();
    let texts = last["messages"].to_string();
    assert!(
        texts.contains("one") && texts.contains("first answer") && texts.contains("two"),
        "{texts}"
    );

    let short = alpha.create(json!({"ttl_seconds": 1})).await;
    let ended = alpha.wait_state(&short, "ended").await;
    assert_eq!(ended["reason"], "ttl");
    let (status, body) = alpha
        .post(
            &format!("/v1/sessions/{short}/exec"),
            json!({"command": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // An ended session's stream ends with its `ended` event.
    let events = alpha
        .events_until(&short, None, |e| {
            e.kind == "lifecycle" && e.data["state"] == "ended"
        })
        .await;
    ids_are_contiguous(&events);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_says_why_and_the_session_can_be_deleted() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    // Settings that do not validate: the start fails, with the reason.
    let id = alpha
        .create(json!({"settings": {"permissions": {"allow": "not-a-list"}}}))
        .await;
    let failed = alpha.wait_state(&id, "failed").await;
    assert!(
        failed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("settings")),
        "{failed}"
    );
    // A call retries the start, fails again, and says why.
    let (status, body) = alpha
        .post(
            &format!("/v1/sessions/{id}/exec"),
            json!({"command": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "start_failed");
    let (status, view) = alpha.delete(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["state"], "ended");
}

/// Regression: a start that fails once the session is recorded (its sandbox refuses a
/// workspace past the hard-link cap) is retried, once the cause is gone, as the same
/// session; the retry used to fail on its own transcript ("File exists").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_failed_after_the_session_was_recorded_succeeds_on_retry() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let tenant = server.tenant_root("alpha");
    let ws = tenant.join("linked");
    let outside = tenant.join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let cap = sandbox_agent::hostside::hardlinks::DEFAULT_CAP;
    for i in 0..=cap {
        let name = format!("f{i}");
        std::fs::write(outside.join(&name), "x").unwrap();
        std::fs::hard_link(outside.join(&name), ws.join(&name)).unwrap();
    }
    let id = alpha.create(json!({"workspace": "linked"})).await;
    let failed = alpha.wait_state(&id, "failed").await;
    assert!(
        failed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("link")),
        "{failed}"
    );
    for i in 0..=cap {
        std::fs::remove_file(ws.join(format!("f{i}"))).unwrap();
    }
    let (out, exit) = alpha.exec(&id, json!({"command": "echo retried"})).await;
    assert!(out.contains("retried"), "{out} {exit}");
    let (status, view) = alpha.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(view["state"], "failed", "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_every_session_is_listed_and_resumes_with_its_transcript() {
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "echo before > before.txt"})),
        Turn::text("done before"),
        Turn::text("done after"),
    ])
    .await
    .unwrap();
    let mut server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let worked = alpha.create(json!({"labels": {"n": "1"}})).await;
    let untouched = alpha.create(json!({"labels": {"n": "2"}})).await;
    alpha
        .post(
            &format!("/v1/sessions/{worked}/messages"),
            json!({"content": "first"}),
        )
        .await;
    let before = alpha
        .events_until(&worked, None, |e| e.kind == "result")
        .await;
    alpha.wait_state(&untouched, "idle").await;

    server.kill_and_restart().await;
    let alpha = server.api("alpha");
    let (_, list) = alpha.get("/v1/sessions").await;
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [worked.as_str(), untouched.as_str()]);
    assert!(
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["state"] == "paused"),
        "{list}"
    );

    // Everything sent before the kill replays from the store, in order.
    let replay = alpha
        .events_until(&worked, None, |e| e.kind == "result")
        .await;
    assert_eq!(replay, before);
    every_call_has_its_result(&replay);

    // The next call recreates the sandbox; the conversation carries on.
    alpha
        .post(
            &format!("/v1/sessions/{worked}/messages"),
            json!({"content": "second"}),
        )
        .await;
    let after = alpha
        .events_until(&worked, Some(before.last().unwrap().id), |e| {
            e.kind == "result"
        })
        .await;
    assert_eq!(after.last().unwrap().data["text"], "done after");
    ids_are_contiguous(&[before.clone(), after].concat());
    let last = model.requests().last().unwrap().body.clone();
    assert!(last["messages"].to_string().contains("done before"));
    let (output, _) = alpha
        .exec(&worked, json!({"command": "cat before.txt"}))
        .await;
    assert_eq!(output, "before\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_restores_the_workspace_to_before_a_message() {
    let model = ScriptedModel::start(vec![
        Turn::tool_use(
            "b1",
            "Bash",
            json!({"command": "echo new > made.txt && rm kept.txt"}),
        ),
        Turn::text("made it"),
    ])
    .await
    .unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let id = alpha.create(json!({})).await;
    alpha
        .put_bytes(&format!("/v1/sessions/{id}/files/kept.txt"), b"keep me\n")
        .await;
    alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "make a file"}),
        )
        .await;
    let events = alpha.events_until(&id, None, |e| e.kind == "result").await;
    let uuid = events
        .iter()
        .find(|e| e.kind == "prompt_recorded")
        .map(|e| e.data["user_message_uuid"].as_str().unwrap().to_string())
        .unwrap();
    let ws = server.tenant_root("alpha").join(&id);
    assert!(ws.join("made.txt").exists() && !ws.join("kept.txt").exists());

    let (status, list) = alpha
        .post(&format!("/v1/sessions/{id}/rewind"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["checkpoints"][0]["user_message_uuid"], uuid.as_str());
    let (status, _) = alpha
        .post(&format!("/v1/sessions/{id}/rewind"), json!({"to": "nope"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = alpha
        .post(&format!("/v1/sessions/{id}/rewind"), json!({"to": uuid}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!ws.join("made.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("kept.txt")).unwrap(),
        "keep me\n"
    );
    // The session carries on afterwards.
    let (_, exit) = alpha
        .exec(&id, json!({"command": "test -f kept.txt"}))
        .await;
    assert_eq!(exit["code"], 0);
}
