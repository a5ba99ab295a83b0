//! What operates the server, end to end: the audit trail of a session's tool calls, an
//! exec, a permission answer and admin actions (exported per tenant, verified by
//! `cordon audit verify`), `/metrics` (tenant-scoped, accepted by promtool) and `/readyz`.

use cordon_tests::cordon_bin;
use cordon_tests::scripted_model::{Reply, ReplyUsage, ScriptedModel, Turn};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fixture::{Api, Server};

fn records_of(audit: &Value, kind: &str) -> Vec<Value> {
    audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == kind)
        .map(|r| r["event"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_exec_and_answers_are_audited_and_measured() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let ws = server.tenant_root("alpha").join("repo");
    std::fs::create_dir_all(&ws).unwrap();
    // The first request is answered 529 once (the client retries it); the last reply
    // reports cache reads and writes.
    let cached = ReplyUsage {
        input_tokens: 10,
        output_tokens: 5,
        cache_read_input_tokens: 7,
        cache_creation_input_tokens: 4,
    };
    model.push_turns([
        Turn::overloaded(),
        Turn::tool_use(
            "b1",
            "Bash",
            json!({"command": "DB_PASSWORD=hunter2 echo audited"}),
        ),
        Turn::tool_use(
            "w1",
            "Write",
            json!({"file_path": ws.join("a.txt"), "content": "x\n"}),
        ),
        Turn::Reply(Reply::text("Done.").usage(cached)),
    ]);
    let id = alpha
        .create(json!({"workspace": "repo", "permission_mode": "default"}))
        .await;
    alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "go"}),
        )
        .await;
    let asked = alpha
        .events_until(&id, None, |e| e.kind == "permission_request")
        .await;
    let request_id = asked.last().unwrap().data["request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _) = alpha
        .post(
            &format!("/v1/sessions/{id}/permissions/{request_id}"),
            json!({"decision": "deny", "message": "not now"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    alpha
        .events_until(&id, Some(asked.last().unwrap().id), |e| e.kind == "result")
        .await;
    let (out, exit) = alpha.exec(&id, json!({"command": "echo exec-ran"})).await;
    assert_eq!(out, "exec-ran\n");
    assert_eq!(exit["code"], 0);

    let (status, audit) = alpha.get("/v1/audit").await;
    assert_eq!(status, StatusCode::OK, "{audit}");
    let key_id = alpha_key_id(&audit);
    let calls = records_of(&audit, "tool_call");
    let bash = calls
        .iter()
        .find(|c| c["tool"] == "Bash")
        .expect("Bash audited");
    assert_eq!(bash["decision"], "allow");
    assert_eq!(bash["outcome"], "ok");
    assert_eq!(bash["key_id"], key_id);
    assert_eq!(bash["session"], id.as_str());
    assert!(
        bash["output_sha256"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let preview = bash["input_preview"].as_str().unwrap();
    assert!(!preview.contains("hunter2"), "{preview}");
    let write = calls
        .iter()
        .find(|c| c["tool"] == "Write")
        .expect("Write audited");
    assert_eq!(write["decision"], "deny");
    assert_eq!(write["decision_source"], "user");
    assert_eq!(write["outcome"], "denied");
    let answers = records_of(&audit, "permission_answer");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["decision"], "deny");
    assert_eq!(answers[0]["tool"], "Write");
    let execs = records_of(&audit, "exec");
    assert_eq!(execs.len(), 1);
    assert_eq!(execs[0]["exit_code"], 0);
    assert_eq!(execs[0]["command_preview"], "echo exec-ran");
    assert!(
        records_of(&audit, "admin")
            .iter()
            .any(|a| a["action"] == "session_create" && a["target"] == id.as_str())
    );
    // The other tenant's export has none of it.
    let (_, beta_audit) = server.api("beta").get("/v1/audit").await;
    assert!(records_of(&beta_audit, "tool_call").is_empty());

    let metrics = get_text(&alpha, "/metrics").await;
    for line in [
        "cordon_tool_call_seconds_count{outcome=\"ok\",tool=\"Bash\"} 1",
        "cordon_tool_call_seconds_count{outcome=\"denied\",tool=\"Write\"} 1",
        "cordon_exec_seconds_count{outcome=\"ok\"} 1",
        "cordon_permission_decisions_total{decision=\"deny\",source=\"user\"} 1",
        "cordon_sandbox_start_seconds_count{start=\"cold\"} 1",
    ] {
        assert!(metrics.contains(line), "no {line} in\n{metrics}");
    }
    assert!(metrics.contains("tenant=\"alpha\""), "{metrics}");
    // Every family has a sample, fed where it happens: the model client's retry and the
    // failed attempt behind it, the calls' latency, tokens of each kind, the sandbox
    // start; the warm pool (none on the local backend) is exported.
    for series in [
        "cordon_model_retries_total",
        "cordon_model_errors_total{kind=\"http_529\"}",
        "cordon_model_request_seconds_count{result=\"ok\"}",
        "cordon_tokens_total{kind=\"input\",tenant=\"alpha\"}",
        "cordon_tokens_total{kind=\"output\",tenant=\"alpha\"}",
        "cordon_tokens_total{kind=\"cache_read\",tenant=\"alpha\"}",
        "cordon_tokens_total{kind=\"cache_creation\",tenant=\"alpha\"}",
        "cordon_sandbox_start_seconds_count{start=\"cold\"}",
    ] {
        assert!(
            sample(&metrics, series) > 0.0,
            "no sample of {series} in\n{metrics}"
        );
    }
    assert_eq!(sample(&metrics, "cordon_model_retries_total"), 1.0);
    assert_eq!(
        sample(
            &metrics,
            "cordon_tokens_total{kind=\"cache_read\",tenant=\"alpha\"}"
        ),
        7.0
    );
    assert_eq!(sample(&metrics, "cordon_warm_pool_size"), 0.0);
    promtool_accepts(&metrics);
    let beta_metrics = get_text(&server.api("beta"), "/metrics").await;
    assert!(!beta_metrics.contains("tenant=\"alpha\""), "{beta_metrics}");
    let anonymous = Api::new(&server.url, None);
    assert_eq!(anonymous.get("/metrics").await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous.get("/readyz").await.0, StatusCode::OK);

    let verify = std::process::Command::new(cordon_bin())
        .args(["audit", "verify", "--data"])
        .arg(server.data.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success(), "{text}");
    assert!(text.contains("tenant alpha:"), "{text}");
}

/// The key id every alpha record names (the fixture's key, created for alpha only).
fn alpha_key_id(audit: &Value) -> String {
    let created = records_of(audit, "admin");
    let key = created
        .iter()
        .find(|a| a["action"] == "key_create")
        .expect("the key's creation is audited");
    key["target"].as_str().unwrap().to_string()
}

pub async fn get_text(api: &Api, path: &str) -> String {
    let resp = api
        .request(reqwest::Method::GET, path)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.text().await.unwrap()
}

/// The value of `series` (name and labels as exported) in an exposition; panics when
/// absent.
pub fn sample(exposition: &str, series: &str) -> f64 {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{exposition}"))
        .parse()
        .unwrap()
}

pub fn promtool_accepts(text: &str) {
    use std::io::Write;
    let Ok(mut child) = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!("SKIPPED promtool check: promtool not installed (apt-get install prometheus)");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
