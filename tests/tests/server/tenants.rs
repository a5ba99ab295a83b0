//! Keys and tenants: no key, a wrong or revoked key is a 401; another tenant's session is
//! a 404 on every route, exactly like a session that does not exist.

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use reqwest::StatusCode;
use serde_json::json;

use super::fixture::{Api, Server, admin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_session_is_a_404_and_keys_are_checked() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let beta = server.api("beta");
    let id = alpha.create(json!({"labels": {"team": "a"}})).await;
    alpha.wait_state(&id, "idle").await;

    let missing = "00000000-0000-4000-8000-000000000000";
    for target in [id.as_str(), missing] {
        let (status, body) = beta.get(&format!("/v1/sessions/{target}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(body["error"]["code"], "not_found");
        assert_eq!(body["error"]["message"], "no such session");
        for (path, body) in [
            ("messages", json!({"content": "hi"})),
            ("exec", json!({"command": "true"})),
            ("interrupt", json!({})),
            ("fork", json!({})),
        ] {
            let (status, _) = beta
                .post(&format!("/v1/sessions/{target}/{path}"), body)
                .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
        let (status, _) = beta
            .get(&format!("/v1/sessions/{target}/files/a.txt"))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = beta.get(&format!("/v1/sessions/{target}/events")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = beta.delete(&format!("/v1/sessions/{target}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (_, list) = beta.get("/v1/sessions").await;
    assert_eq!(list["sessions"], json!([]));
    let (_, list) = alpha.get("/v1/sessions?labels=team=a").await;
    assert_eq!(list["sessions"][0]["id"], id.as_str());
    let (_, list) = alpha.get("/v1/sessions?labels=team=b").await;
    assert_eq!(list["sessions"], json!([]));
    // The id is a random (v4) UUID.
    assert_eq!(uuid_version(&id), '4');

    let (status, body) = Api::new(&server.url, None).get("/v1/sessions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _) = Api::new(&server.url, Some("cordon_00_11".into()))
        .get("/v1/sessions")
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = Api::new(&server.url, None).get("/healthz").await;
    assert_eq!(status, StatusCode::OK);

    // A revoked key stops working at once.
    let key_line = admin(&[
        "key",
        "create",
        "--tenant",
        "beta",
        "--data",
        server.data.path().to_str().unwrap(),
    ]);
    let key_id = key_line
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .to_string();
    let key = key_line.lines().last().unwrap().to_string();
    let api = Api::new(&server.url, Some(key));
    assert_eq!(api.get("/v1/sessions").await.0, StatusCode::OK);
    admin(&[
        "key",
        "revoke",
        &key_id,
        "--data",
        server.data.path().to_str().unwrap(),
    ]);
    assert_eq!(api.get("/v1/sessions").await.0, StatusCode::UNAUTHORIZED);
}

fn uuid_version(id: &str) -> char {
    id.chars().nth(14).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_a_json_4xx_naming_the_problem() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let post_raw = |body: &'static str| {
        alpha
            .request(reqwest::Method::POST, "/v1/sessions")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    for body in [
        "{",
        "[]",
        "{\"ttl_seconds\": -1}",
        "{\"nope\": 1}",
        "{\"backend\": \"vm\"}",
    ] {
        let resp = post_raw(body).await.unwrap();
        let status = resp.status();
        let json: serde_json::Value = resp.json().await.unwrap();
        assert!(status.is_client_error(), "{body}: {status}");
        assert!(
            json["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{json}"
        );
    }
    let resp = alpha
        .request(reqwest::Method::POST, "/v1/sessions")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let big = format!("{{\"content\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    // Its own connection: the server answers before reading the whole body and closes it.
    let resp = server
        .api("alpha")
        .request(reqwest::Method::POST, "/v1/sessions/x/messages")
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_client_error(), "{}", resp.status());
    let (status, body) = alpha.get("/v1/nothing-here").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
    for bad in ["../../etc", "/etc", "missing"] {
        let (status, body) = alpha.post("/v1/sessions", json!({"workspace": bad})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (status, doc) = alpha.get("/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["paths"]["/v1/sessions/{id}/events"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_answer_429_with_retry_after() {
    let model = ScriptedModel::start(vec![Turn::text("used 15 tokens")])
        .await
        .unwrap();
    let server = Server::start_with(
        &model,
        json!({}),
        json!({"max_sessions": 1, "exec_per_minute": 1, "tokens_per_day": 15}),
    )
    .await;
    let alpha = server.api("alpha");
    let id = alpha.create(json!({})).await;
    let resp = alpha
        .request(reqwest::Method::POST, "/v1/sessions")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(resp.headers().get("retry-after").is_some());
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "quota_exceeded");
    // Another tenant is not affected.
    server.api("beta").create(json!({})).await;

    let (_, exit) = alpha.exec(&id, json!({"command": "true"})).await;
    assert_eq!(exit["code"], 0);
    let resp = alpha
        .request(reqwest::Method::POST, &format!("/v1/sessions/{id}/exec"))
        .json(&json!({"command": "true"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=61).contains(&wait));
    // The day's tokens: the first turn uses them up, the next message is refused.
    alpha.turn(&id, "hi").await;
    let (status, body) = alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "more"}),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tokens")
    );
    // A deleted session frees its slot.
    alpha.delete(&format!("/v1/sessions/{id}")).await;
    alpha.create(json!({})).await;
}

/// A caller's MCP entries expand nothing of the server's own environment: an entry asking
/// for `${ANTHROPIC_API_KEY}` (the server's model key) is refused, missing its variable,
/// and never starts; an entry beside it that asks for nothing does start. Checked on the
/// host, in the session's workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_mcp_entry_cannot_read_the_servers_environment() {
    let model = ScriptedModel::start(vec![Turn::text("hello")])
        .await
        .unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let write = |file: &str, what: &str| {
        json!({
            "command": "sh",
            "args": ["-c", format!("printf %s \"{what}\" > \"${{CLAUDE_PROJECT_DIR}}/{file}\"")],
            "env": {"K": "${ANTHROPIC_API_KEY}"},
        })
    };
    let mut plain = write("mcp-started", "started");
    plain.as_object_mut().unwrap().remove("env");
    let id = alpha
        .create(json!({"settings": {"mcpServers": {
            "leak": write("mcp-leak", "$K"),
            "plain": plain,
        }}}))
        .await;
    alpha.wait_state(&id, "idle").await;
    alpha.turn(&id, "hi").await;
    let ws = server.tenant_root("alpha").join(&id);
    assert_eq!(
        std::fs::read_to_string(ws.join("mcp-started"))
            .ok()
            .as_deref(),
        Some("started"),
        "the caller's other MCP entry should have started"
    );
    assert!(
        !ws.join("mcp-leak").exists(),
        "the server's key reached the sandbox: {:?}",
        std::fs::read_to_string(ws.join("mcp-leak"))
    );
}
