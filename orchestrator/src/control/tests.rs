//! The reader and the request handlers, over in-memory pipes.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::*;
use crate::hooks::{HookEvent, HookSet};
use crate::permissions::PermissionMode;

struct Probe {
    interrupts: Arc<AtomicU32>,
    mode: Arc<Mutex<Option<PermissionMode>>>,
}

fn controls(hooks: Option<Arc<HookSet>>) -> (SessionControls, Probe) {
    let interrupts = Arc::new(AtomicU32::new(0));
    let mode = Arc::new(Mutex::new(None));
    let (i, m) = (interrupts.clone(), mode.clone());
    let controls = SessionControls {
        interrupt: Arc::new(move || {
            i.fetch_add(1, Ordering::SeqCst);
        }),
        set_mode: Some(Arc::new(move |mode| *m.lock().unwrap() = Some(mode))),
        rewinder: None,
        hooks,
        prompt_uuids: Arc::default(),
        mcp: None,
        loop_shared: Some(crate::agent::LoopShared::default()),
        tasks: Some(crate::subagents::Tasks::default()),
        agents: Arc::default(),
        initialized: Arc::default(),
        mirror: None,
    };
    (controls, Probe { interrupts, mode })
}

async fn answer(controls: &SessionControls, line: &str) -> Value {
    let (controller, mut rx) = Controller::new();
    let Some(protocol::Inbound::Request {
        request_id,
        request,
    }) = protocol::parse_line(line).unwrap()
    else {
        panic!("not a request: {line}");
    };
    session::handle_request(&controller, controls, &request_id, request).await;
    let out = rx.recv().await.unwrap();
    assert_eq!(out["type"], "control_response");
    assert_eq!(out["response"]["request_id"], request_id.as_str());
    out["response"].clone()
}

#[tokio::test]
async fn initialize_registers_the_clients_hooks() {
    let set = Arc::new(HookSet::default());
    let (controls, _) = controls(Some(set.clone()));
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"req_1","request":{"subtype":"initialize","hooks":{"PreToolUse":[{"matcher":"Bash","hookCallbackIds":["hook_0"]}]}}}"#,
    )
    .await;
    assert_eq!(r["subtype"], "success");
    assert_eq!(r["response"]["hooks_applied"], true);
    assert_eq!(set.for_event(HookEvent::PreToolUse, Some("Bash")).len(), 1);
}

#[tokio::test]
async fn interrupt_and_mode_changes_reach_the_session() {
    let (controls, probe) = controls(None);
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}"#,
    )
    .await;
    assert_eq!(r["subtype"], "success");
    assert_eq!(probe.interrupts.load(Ordering::SeqCst), 1);
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"r2","request":{"subtype":"set_permission_mode","mode":"acceptEdits"}}"#,
    )
    .await;
    assert_eq!(r["subtype"], "success");
    assert_eq!(
        *probe.mode.lock().unwrap(),
        Some(PermissionMode::AcceptEdits)
    );
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"r3","request":{"subtype":"set_permission_mode","mode":"yolo"}}"#,
    )
    .await;
    assert_eq!(r["subtype"], "error");
}

#[tokio::test]
async fn unsupported_requests_and_rewind_without_checkpoints_are_errors() {
    let (controls, _) = controls(None);
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"r","request":{"subtype":"rewind_files","user_message_id":"u1"}}"#,
    )
    .await;
    assert_eq!(r["subtype"], "error");
    // Unknown requests, and MCP servers and tasks that are not there, are named.
    for (request, named) in [
        (
            r#"{"subtype":"apply_flag_settings"}"#,
            "apply_flag_settings",
        ),
        (
            r#"{"subtype":"mcp_reconnect","serverName":"ghost"}"#,
            "`ghost`",
        ),
        (
            r#"{"subtype":"mcp_toggle","serverName":"ghost","enabled":true}"#,
            "`ghost`",
        ),
        (r#"{"subtype":"stop_task","task_id":"t9"}"#, "t9"),
    ] {
        let line = format!(r#"{{"type":"control_request","request_id":"r","request":{request}}}"#);
        let r = answer(&controls, &line).await;
        assert_eq!(r["subtype"], "error", "{request}");
        assert!(r["error"].as_str().unwrap().contains(named), "{r}");
    }
}

#[tokio::test]
async fn a_malformed_request_gets_an_error_for_its_id() {
    let (controller, mut out) = Controller::new();
    let (tx, _events) = mpsc::unbounded_channel();
    let input = r#"{"type":"control_request","request_id":"r5","request":{"subtype":"mcp_toggle","serverName":"calc"}}"#;
    read_lines(input.as_bytes(), controller, tx).await;
    let sent = out.recv().await.unwrap();
    assert_eq!(sent["response"]["subtype"], "error");
    assert_eq!(sent["response"]["request_id"], "r5");
    assert!(
        sent["response"]["error"]
            .as_str()
            .unwrap()
            .contains("enabled")
    );
}

#[tokio::test]
async fn a_second_initialize_is_refused_and_agents_only_come_first() {
    let (controls, _) = controls(None);
    let first = r#"{"type":"control_request","request_id":"r","request":{"subtype":"initialize","hooks":null,"agents":{"reviewer":{"description":"d","prompt":"p"}}}}"#;
    let r = answer(&controls, first).await;
    assert_eq!(
        r["subtype"], "error",
        "agents after the loop was built: {r}"
    );
    let bare = r#"{"type":"control_request","request_id":"r","request":{"subtype":"initialize","hooks":null}}"#;
    assert_eq!(answer(&controls, bare).await["subtype"], "success");
    assert_eq!(answer(&controls, bare).await["subtype"], "error");
}

#[tokio::test]
async fn mcp_status_set_model_and_context_usage_answer() {
    let (controls, _) = controls(None);
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"r","request":{"subtype":"mcp_status"}}"#,
    )
    .await;
    assert_eq!(r["response"]["mcpServers"], json!([]));
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"r","request":{"subtype":"set_model","model":"claude-x"}}"#,
    )
    .await;
    assert_eq!(r["subtype"], "success");
    let shared = controls.loop_shared.clone().unwrap();
    assert_eq!(shared.model().as_deref(), Some("claude-x"));
    // Before the loop reported any usage there is none to give.
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"r","request":{"subtype":"get_context_usage"}}"#,
    )
    .await;
    assert_eq!(r["subtype"], "error");
    shared.record_usage(crate::agent::ContextReport {
        model: "claude-default".into(),
        context_window: 1000,
        measured_tokens: 0,
        categories: vec![("system prompt".into(), 100)],
        memory_files: Vec::new(),
    });
    let r = answer(
        &controls,
        r#"{"type":"control_request","request_id":"r","request":{"subtype":"get_context_usage"}}"#,
    )
    .await;
    assert_eq!(r["response"]["totalTokens"], 100);
    assert_eq!(r["response"]["maxTokens"], 1000);
    assert_eq!(r["response"]["categories"][0]["name"], "system prompt");
}

#[tokio::test]
async fn the_reader_routes_prompts_requests_and_answers() {
    let (controller, mut out) = Controller::new();
    let c = controller.clone();
    let asking = tokio::spawn(async move { c.request(json!({"subtype": "can_use_tool"})).await });
    let sent = out.recv().await.unwrap();
    let id = sent["request_id"].as_str().unwrap();
    let input = format!(
        "{}\n\nnot json\n{}\n{}\n",
        r#"{"type":"user","message":{"role":"user","content":"first"}}"#,
        json!({"type":"control_response","response":{"subtype":"success","request_id":id,"response":{"behavior":"allow"}}}),
        r#"{"type":"control_request","request_id":"r9","request":{"subtype":"interrupt"}}"#,
    );
    let (tx, mut events) = mpsc::unbounded_channel();
    read_lines(input.as_bytes(), controller.clone(), tx).await;
    assert_eq!(
        events.recv().await,
        Some(Event::Prompt {
            text: "first".into(),
            uuid: None
        })
    );
    assert!(matches!(
        events.recv().await,
        Some(Event::Request { request_id, request: protocol::Request::Interrupt }) if request_id == "r9"
    ));
    assert_eq!(events.recv().await, None);
    assert_eq!(asking.await.unwrap(), Ok(json!({"behavior": "allow"})));
    // At EOF, later requests fail instead of waiting forever.
    assert_eq!(
        controller.request(json!({})).await,
        Err(ControlError::Closed)
    );
}
