use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::hooks::{HookRunner, HookSet, HookSource, SessionFacts};
use crate::permissions::PermissionMode;

/// A gate whose hooks are managed (host) scripts, so no sandbox is needed.
fn gate(dir: &std::path::Path, hooks: Value, allow: &[&str], deny: &[&str]) -> PolicyGate {
    let set = HookSet::from_sources(
        &[(HookSource::Managed, "managed.json".into(), hooks)],
        false,
    )
    .unwrap();
    let hooks = Hooks::new(
        Arc::new(set),
        HookRunner::new(None, dir),
        SessionFacts {
            session_id: "s".into(),
            transcript_path: dir.join("t.jsonl"),
            cwd: dir.to_path_buf(),
        },
        Arc::new(|| "default".to_string()),
    );
    let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let engine = Engine::from_lists(
        PermissionMode::Default,
        &strings(allow),
        &strings(deny),
        dir,
    )
    .unwrap();
    PolicyGate::new(Arc::new(engine), Arc::new(hooks), None)
}

fn bash(command: &str) -> ToolCallInfo {
    ToolCallInfo {
        tool_use_id: "tu1".into(),
        name: "Bash".into(),
        input: json!({ "command": command }),
        read_only: false,
        kind: crate::permissions::ToolKind::Exec,
    }
}

fn pre(command: &str) -> Value {
    json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}]})
}

#[tokio::test]
async fn exit_2_denies_with_stderr_for_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let g = gate(
        dir.path(),
        pre("echo 'rm is not allowed here' >&2; exit 2"),
        &["Bash"],
        &[],
    );
    match g.before(&bash("rm -rf x")).await {
        GateVerdict::Deny { message, .. } => assert!(message.contains("rm is not allowed here")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn updated_input_replaces_the_command_for_the_rules_and_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": "echo safe"}}}"#;
    let g = gate(
        dir.path(),
        pre(&format!("echo '{out}'")),
        &["Bash(echo *)"],
        &[],
    );
    match g.before(&bash("git push")).await {
        GateVerdict::Allow { input, .. } => assert_eq!(input, json!({"command": "echo safe"})),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_hook_allow_never_overrides_a_deny_rule_but_skips_an_ask() {
    let dir = tempfile::tempdir().unwrap();
    let allow =
        r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}"#;
    let g = gate(
        dir.path(),
        pre(&format!("echo '{allow}'")),
        &[],
        &["Bash(rm *)"],
    );
    assert!(matches!(
        g.before(&bash("rm -rf /")).await,
        GateVerdict::Deny { .. }
    ));
    // Without the hook, `make` would ask (and be denied headless); the hook allows it.
    assert!(matches!(
        g.before(&bash("make")).await,
        GateVerdict::Allow { .. }
    ));
}

#[tokio::test]
async fn an_ask_without_a_prompter_is_denied_with_how_to_allow_it_and_notifies() {
    let dir = tempfile::tempdir().unwrap();
    let hooks =
        json!({"Notification": [{"hooks": [{"type": "command", "command": "cat > note.json"}]}]});
    let g = gate(dir.path(), hooks, &[], &[]);
    match g.before(&bash("make")).await {
        GateVerdict::Deny { message, .. } => {
            assert!(message.contains("--allowedTools Bash"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let note: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("note.json")).unwrap())
            .unwrap();
    assert_eq!(note["hook_event_name"], "Notification");
    assert_eq!(note["message"], "Cordon needs your permission to use Bash");
}

struct Approve;

#[tonic::async_trait]
impl PermissionPrompter for Approve {
    async fn ask(&self, call: &ToolCallInfo, _reason: &str) -> PromptAnswer {
        let mut input = call.input.clone();
        input["description"] = json!("approved");
        PromptAnswer::Allow { input }
    }
}

#[tokio::test]
async fn a_hook_ask_goes_to_the_prompter_even_when_the_rules_allow() {
    let dir = tempfile::tempdir().unwrap();
    let ask =
        r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}}"#;
    let g = gate(dir.path(), pre(&format!("echo '{ask}'")), &["Bash"], &[]);
    assert!(matches!(
        g.before(&bash("ls")).await,
        GateVerdict::Deny { .. }
    ));
    g.set_prompter(Some(Arc::new(Approve)));
    match g.before(&bash("ls")).await {
        GateVerdict::Allow { input, .. } => assert_eq!(input["description"], "approved"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn post_tool_use_sees_the_response_and_its_feedback_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = json!({"PostToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "cat > post.json; echo 'lint failed: fix it' >&2; exit 2"},
        {"type": "command", "command": "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolUse\", \"additionalContext\": \"extra note\"}}'"}
    ]}]});
    let g = gate(dir.path(), hooks, &["Bash"], &[]);
    let call = bash("echo hi");
    assert!(matches!(g.before(&call).await, GateVerdict::Allow { .. }));
    let out = g.after(&call, ToolOutput::ok("hi")).await;
    assert!(out.content.starts_with("hi\n\n"), "{}", out.content);
    assert!(
        out.content.contains("lint failed: fix it"),
        "{}",
        out.content
    );
    assert!(out.content.contains("extra note"), "{}", out.content);
    let post: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("post.json")).unwrap())
            .unwrap();
    assert_eq!(post["hook_event_name"], "PostToolUse");
    assert_eq!(post["tool_name"], "Bash");
    assert_eq!(post["tool_use_id"], "tu1");
    assert_eq!(post["tool_input"]["command"], "echo hi");
    assert_eq!(post["tool_response"]["stdout"], "hi");
}
