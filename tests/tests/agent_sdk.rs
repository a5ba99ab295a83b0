//! The Claude Agent SDK (Python, from PyPI) drives `cordon` through its stream-json
//! control protocol: tests/sdk/setup.sh installs the pinned SDK into a virtual
//! environment, tests/sdk/sdk_test.py runs a session against the scripted model started
//! here (can_use_tool denies a `rm` and allows a Write with an edited input, a PreToolUse
//! hook callback watches Bash, an interrupt stops a `sleep 600`, rewind_files undoes the
//! first prompt's Write), and this side checks
//! the disk and what the model was sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cordon_tests::Workspace;
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::sdk::{run_script, sdk_python};
use serde_json::{Value, json};

/// The tool_result blocks of the last user message of a recorded request.
fn tool_results(body: &Value) -> Vec<Value> {
    cordon_tests::agent::last_tool_results(body)
}

fn text_of(result: &Value) -> String {
    cordon_tests::agent::result_text(result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_sdk_drives_a_session_with_permissions_hooks_and_an_interrupt() {
    let Some(python) = sdk_python() else {
        return;
    };
    let ws = Workspace::new();
    std::fs::write(ws.join("victim.txt"), "keep me\n").unwrap();
    let allowed = ws.join("allowed.txt").display().to_string();
    let model = ScriptedModel::start(vec![
        // First prompt: a denied rm, an allowed (edited) Write, the answer.
        Turn::tool_use("b1", "Bash", json!({"command": "rm victim.txt"})),
        Turn::tool_use(
            "w1",
            "Write",
            json!({"file_path": allowed, "content": "what the model wrote\n"}),
        ),
        Turn::text("first task done"),
        // Second prompt: a long command, interrupted by the client.
        Turn::tool_use("b2", "Bash", json!({"command": "sleep 600"})),
        // Third prompt: the session is still usable.
        Turn::text("still here"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    // Strict mode, so the rm goes to can_use_tool instead of running sandboxed unasked.
    let managed = home.path().join("managed-settings.json");
    std::fs::write(
        &managed,
        r#"{"sandbox": {"autoAllowBashIfSandboxed": false}}"#,
    )
    .unwrap();

    let run = run_script(
        &python,
        "sdk_test.py",
        ws.path(),
        &model,
        home.path(),
        &[("CORDON_MANAGED_SETTINGS", managed.as_os_str())],
    )
    .await;
    run.assert_success("sdk_test.py");

    // The disk: the denied rm never ran; the Write (which ran with the client's edited
    // content, checked by the script) was rewound at the end through rewind_files.
    assert_eq!(
        std::fs::read_to_string(ws.join("victim.txt")).unwrap(),
        "keep me\n"
    );
    assert!(!ws.join("allowed.txt").exists(), "rewind_files removed it");
    // The model: the denial's message came back as an error result; the interrupted
    // sleep was closed with a result too, before the third prompt.
    let bodies = cordon_tests::agent::message_bodies(&model);
    assert_eq!(bodies.len(), 5, "model calls: {bodies:#?}");
    let denied = tool_results(&bodies[1]);
    assert_eq!(denied[0]["tool_use_id"], "b1");
    assert_eq!(denied[0]["is_error"], true);
    assert!(
        text_of(&denied[0]).contains("deleting files is not allowed in this test"),
        "{denied:?}"
    );
    let wrote = tool_results(&bodies[2]);
    assert_eq!(wrote[0]["tool_use_id"], "w1");
    assert_ne!(wrote[0]["is_error"], true, "{wrote:?}");
    let history = bodies[4]["messages"].to_string();
    assert!(
        history.contains("\"b2\""),
        "the interrupted call is in the history"
    );
    model.shutdown().await;
}
