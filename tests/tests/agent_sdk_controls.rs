//! The Agent SDK's control requests, end to end: tests/sdk/test_controls.py (the pinned
//! claude-agent-sdk from PyPI) drives `cordon` with programmatic sub-agents, an in-process
//! SDK MCP server, set_model, mcp_status / mcp_toggle / mcp_reconnect, stop_task,
//! get_context_usage (memoryFiles), an mcp_message the client sends and an unknown
//! request, and checks what the client saw; this side plays the model and checks what it
//! was sent. `cordon --version` is checked here as the
//! SDK reads it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cordon_tests::agent::tool_names;
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::sdk::{run_script, sdk_python};
use cordon_tests::{Workspace, cordon_bin};
use serde_json::{Value, json};

fn first_message_text(body: &Value) -> String {
    body["messages"][0]["content"].to_string()
}

#[test]
fn the_version_line_is_one_the_sdk_accepts_and_says_cordon() {
    for flag in ["--version", "-v"] {
        let out = std::process::Command::new(cordon_bin())
            .arg(flag)
            .output()
            .unwrap();
        assert!(out.status.success());
        let line = String::from_utf8(out.stdout).unwrap();
        // The SDK's parse: the first token, `major.minor.patch`, at least 2.0.0.
        let first = line.split_whitespace().next().unwrap();
        let parts: Vec<u64> = first.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(parts.len(), 3, "{line}");
        assert!(parts >= vec![2, 0, 0], "{line}");
        assert!(line.contains("Cordon "), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_sdk_control_requests_do_what_they_do_with_claude_code() {
    let Some(python) = sdk_python() else {
        return;
    };
    let ws = Workspace::new();
    // get_context_usage lists it under memoryFiles.
    std::fs::write(ws.join("CLAUDE.md"), "Keep answers short.\n").unwrap();
    let agent = |id: &str, kind: &str, description: &str, marker: &str| {
        Turn::tool_use(
            id,
            "Agent",
            json!({"subagent_type": kind, "description": description, "prompt": format!("{marker}: do it")}),
        )
    };
    let model = ScriptedModel::start(vec![
        Turn::tool_use("c1", "mcp__calc__add", json!({"a": 2, "b": 3})),
        Turn::text("sum done"),
        agent("a1", "reviewer", "review", "REVIEW-TASK-MARKER"),
        Turn::text("reviewed"),
        Turn::text("after set_model"),
        agent("a2", "follower", "wait", "FOLLOW-TASK-MARKER"),
        Turn::text("stopped it"),
    ])
    .await
    .unwrap();
    model.route("REVIEW-TASK-MARKER", [Turn::text("review report: fine")]);
    model.route(
        "FOLLOW-TASK-MARKER",
        [Turn::tool_use(
            "s1",
            "Bash",
            json!({"command": "sleep 611"}),
        )],
    );
    let home = tempfile::tempdir().unwrap();
    let run = run_script(
        &python,
        "test_controls.py",
        ws.path(),
        &model,
        home.path(),
        &[],
    )
    .await;
    run.assert_success("test_controls.py");

    let bodies = cordon_tests::agent::message_bodies(&model);
    let main: Vec<&Value> = bodies
        .iter()
        .filter(|b| !first_message_text(b).contains("TASK-MARKER"))
        .collect();
    let routed = |marker: &str| -> Vec<&Value> {
        bodies
            .iter()
            .filter(|b| first_message_text(b).contains(marker))
            .collect()
    };
    assert_eq!(main.len(), 7, "main model calls: {main:#?}");

    // The SDK tool was offered with the server's own description and schema, and its
    // result (computed in the client) came back to the model.
    let add = main[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__calc__add")
        .unwrap_or_else(|| panic!("no SDK tool offered: {:?}", tool_names(main[0])));
    assert_eq!(add["description"], "Adds two integers and returns the sum");
    assert!(add["input_schema"]["properties"]["a"].is_object(), "{add}");
    let results = cordon_tests::agent::last_tool_results(main[1]);
    assert_eq!(results[0]["tool_use_id"], "c1");
    assert_ne!(results[0]["is_error"], true, "{results:?}");
    assert!(
        cordon_tests::agent::result_text(&results[0]).contains("the sum is 5"),
        "{results:?}"
    );

    // The Agent tool listed the client's sub-agent types; the reviewer ran with its own
    // prompt, model and tools.
    let agent_tool = main[2]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .unwrap();
    let listing = agent_tool["description"].as_str().unwrap();
    assert!(
        listing.contains("- reviewer: Reviews code for the test (Tools: Read)"),
        "{listing}"
    );
    assert!(listing.contains("- follower: "), "{listing}");
    let reviewer = routed("REVIEW-TASK-MARKER");
    assert_eq!(reviewer.len(), 1, "{reviewer:#?}");
    assert_eq!(reviewer[0]["model"], "claude-sub-model");
    assert!(
        reviewer[0]["system"]
            .to_string()
            .contains("REVIEWER-PROMPT-MARKER"),
        "{}",
        reviewer[0]["system"]
    );
    assert_eq!(tool_names(reviewer[0]), ["Read"]);
    let report = cordon_tests::agent::last_tool_results(main[3]);
    assert_eq!(report[0]["tool_use_id"], "a1");
    assert!(cordon_tests::agent::result_text(&report[0]).contains("review report: fine"));

    // Before set_model every call went to the session's model; after it, the parent's
    // calls and the sub-agent without a model of its own go to the chosen one. The SDK
    // server was off for the third prompt.
    for body in &main[..4] {
        assert_ne!(body["model"], "claude-chosen-model");
    }
    assert_eq!(main[4]["model"], "claude-chosen-model");
    assert!(
        !tool_names(main[4]).contains(&"mcp__calc__add".to_string()),
        "a disabled server's tools are not offered: {:?}",
        tool_names(main[4])
    );
    assert!(
        tool_names(main[5]).contains(&"mcp__calc__add".to_string()),
        "on again: {:?}",
        tool_names(main[5])
    );
    let follower = routed("FOLLOW-TASK-MARKER");
    assert_eq!(
        follower.len(),
        1,
        "stopped after its first call: {follower:#?}"
    );
    assert_eq!(follower[0]["model"], "claude-chosen-model");
    assert_eq!(tool_names(follower[0]), ["Bash"]);

    // stop_task: the Agent call came back as an error saying it was stopped; the sleep
    // is gone; the parent went on.
    let stopped = cordon_tests::agent::last_tool_results(main[6]);
    assert_eq!(stopped[0]["tool_use_id"], "a2");
    assert_eq!(stopped[0]["is_error"], true, "{stopped:?}");
    assert!(
        cordon_tests::agent::result_text(&stopped[0]).contains("stopped"),
        "{stopped:?}"
    );
    assert!(
        cordon_tests::host_processes_matching("sleep 611").is_empty(),
        "the stopped sub-agent's command is still running"
    );
    assert_eq!(model.remaining_turns(), 0);
    model.shutdown().await;
}
