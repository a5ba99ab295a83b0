use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::output::{HookRun, RunStatus, from_json, interpret};
use super::*;

fn parse(v: Value) -> Result<Vec<HookEntry>, HooksError> {
    parse_hooks(&v, HookSource::Project, "/w/.claude/settings.json")
}

#[test]
fn parses_claude_code_hooks_with_matchers_and_timeouts() {
    let entries = parse(json!({
        "PreToolUse": [
            {"matcher": "Bash|Edit", "hooks": [{"type": "command", "command": "./a.sh", "timeout": 30}]},
            {"hooks": [{"type": "command", "command": "./b.sh"}]}
        ],
        "Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "./stop.sh"}]}],
        "SubagentStop": [{"hooks": [{"type": "command", "command": "true"}]}]
    }))
    .unwrap();
    assert_eq!(entries.len(), 4);
    assert_eq!(entries[0].event, HookEvent::PreToolUse);
    assert_eq!(
        entries[0].handler,
        Handler::Command {
            command: "./a.sh".into(),
            timeout: Duration::from_secs(30),
            runs_on: RunsOn::Sandbox
        }
    );
    assert!(entries[0].matcher.matches(Some("Bash")));
    assert!(entries[0].matcher.matches(Some("Edit")));
    assert!(!entries[0].matcher.matches(Some("BashOutput")));
    assert!(!entries[0].matcher.matches(Some("Read")));
    assert!(entries[1].matcher.matches(Some("Read")));
    assert!(
        matches!(entries[1].handler, Handler::Command { timeout, .. } if timeout == DEFAULT_TIMEOUT)
    );
    assert_eq!(entries[2].event, HookEvent::Stop);
}

#[test]
fn managed_hooks_run_on_the_host_and_all_others_in_the_sandbox() {
    let hooks = json!({"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]});
    for source in [
        HookSource::Cli,
        HookSource::Local,
        HookSource::Project,
        HookSource::User,
    ] {
        let e = parse_hooks(&hooks, source, "f").unwrap();
        assert!(matches!(
            e[0].handler,
            Handler::Command {
                runs_on: RunsOn::Sandbox,
                ..
            }
        ));
    }
    let e = parse_hooks(&hooks, HookSource::Managed, "f").unwrap();
    assert!(matches!(
        e[0].handler,
        Handler::Command {
            runs_on: RunsOn::Host,
            ..
        }
    ));
}

#[test]
fn regex_matchers_search_the_name() {
    let m = Matcher::parse("mcp__memory__.*").unwrap();
    assert!(m.matches(Some("mcp__memory__create")));
    assert!(!m.matches(Some("Bash")));
    let star = Matcher::parse("*").unwrap();
    assert!(star.matches(Some("Anything")));
    // Events without a target match every hook.
    assert!(Matcher::parse("Bash").unwrap().matches(None));
}

#[test]
fn an_invalid_regex_is_a_settings_error_naming_the_file_and_path() {
    let err = parse(json!({"PreToolUse": [{"matcher": "Bash(", "hooks": []}]})).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/w/.claude/settings.json"), "{text}");
    assert!(text.contains("hooks.PreToolUse[0].matcher"), "{text}");
}

#[test]
fn invalid_values_are_rejected_with_their_path() {
    let cases = [
        (json!([]), "hooks."),
        (json!({"Stop": {}}), "hooks.Stop"),
        (
            json!({"Stop": [{"hooks": [{"type": "command"}]}]}),
            "hooks.Stop[0].hooks[0].command",
        ),
        (
            json!({"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}]}),
            "hooks.Stop[0].hooks[0].timeout",
        ),
        (
            json!({"Stop": [{"matcher": 3, "hooks": []}]}),
            "hooks.Stop[0].matcher",
        ),
        (json!({"Stop": [{}]}), "hooks.Stop[0].hooks"),
    ];
    for (value, path) in cases {
        let err = parse(value.clone()).unwrap_err().to_string();
        assert!(err.contains(path), "{value}: {err}");
    }
}

#[test]
fn unknown_events_and_hook_types_are_skipped() {
    let entries = parse(json!({
        "FutureEvent": [{"hooks": [{"type": "command", "command": "x"}]}],
        "Stop": [{"hooks": [{"type": "prompt", "prompt": "?"}, {"type": "command", "command": "y"}]}]
    }))
    .unwrap();
    assert_eq!(entries.len(), 1);
}

#[test]
fn hook_set_filters_by_event_and_target_dedupes_and_takes_callbacks() {
    let sources = vec![
        (
            HookSource::Managed,
            "m".to_string(),
            json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "m"}]}]}),
        ),
        (
            HookSource::Project,
            "p".to_string(),
            json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "p"}, {"type": "command", "command": "p"}]}]}),
        ),
    ];
    let set = HookSet::from_sources(&sources, false).unwrap();
    assert_eq!(set.for_event(HookEvent::PreToolUse, Some("Bash")).len(), 2);
    assert!(
        set.for_event(HookEvent::PreToolUse, Some("Read"))
            .is_empty()
    );
    assert!(set.for_event(HookEvent::Stop, None).is_empty());
    set.add_callback(HookEvent::PreToolUse, Some("Read"), "cb1")
        .unwrap();
    let read = set.for_event(HookEvent::PreToolUse, Some("Read"));
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].source, HookSource::Sdk);
    // allowManagedHooksOnly: only the operator's hooks stay.
    let managed = HookSet::from_sources(&sources, true).unwrap();
    let bash = managed.for_event(HookEvent::PreToolUse, Some("Bash"));
    assert_eq!(bash.len(), 1);
    assert_eq!(bash[0].source, HookSource::Managed);
}

fn exited(code: i32, stdout: &str, stderr: &str) -> HookRun {
    HookRun {
        status: RunStatus::Exited(code),
        stdout: stdout.into(),
        stderr: stderr.into(),
    }
}

#[test]
fn exit_codes_mean_what_they_mean_in_claude_code() {
    let blocked = interpret(
        HookEvent::PreToolUse,
        &exited(2, "ignored", "no rm please\n"),
    );
    assert_eq!(blocked.block.as_deref(), Some("no rm please"));
    let failed = interpret(HookEvent::PreToolUse, &exited(1, "", "oops"));
    assert_eq!(failed.block, None);
    assert!(failed.notice.unwrap().contains("exit code 1"));
    let timed_out = interpret(
        HookEvent::Stop,
        &HookRun {
            status: RunStatus::TimedOut,
            stdout: String::new(),
            stderr: String::new(),
        },
    );
    assert!(timed_out.block.is_none() && timed_out.notice.is_some());
    // Plain stdout is context for UserPromptSubmit and SessionStart only.
    let ctx = interpret(
        HookEvent::UserPromptSubmit,
        &exited(0, "today is friday\n", ""),
    );
    assert_eq!(ctx.context.as_deref(), Some("today is friday"));
    let none = interpret(HookEvent::PostToolUse, &exited(0, "just a log line", ""));
    assert_eq!(none, HookOutcome::default());
}

#[test]
fn json_output_fields_are_read() {
    let out = interpret(
        HookEvent::PreToolUse,
        &exited(
            0,
            r#"{"continue": true, "systemMessage": "hi", "suppressOutput": true,
                "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                "permissionDecisionReason": "nope", "updatedInput": {"command": "ls"},
                "additionalContext": "ctx"}}"#,
            "",
        ),
    );
    assert_eq!(out.permission, Some(PermissionDecision::Deny));
    assert_eq!(out.permission_reason.as_deref(), Some("nope"));
    assert_eq!(out.updated_input, Some(json!({"command": "ls"})));
    assert_eq!(out.context.as_deref(), Some("ctx"));
    assert_eq!(out.system_message.as_deref(), Some("hi"));
    assert_eq!(out.stop, None);

    let stop = from_json(
        HookEvent::UserPromptSubmit,
        &json!({"continue": false, "stopReason": "maintenance"}),
    );
    assert_eq!(stop.stop.as_deref(), Some("maintenance"));

    let legacy = from_json(
        HookEvent::PreToolUse,
        &json!({"decision": "approve", "reason": "fine"}),
    );
    assert_eq!(legacy.permission, Some(PermissionDecision::Allow));
    let block = from_json(
        HookEvent::Stop,
        &json!({"decision": "block", "reason": "run the tests first"}),
    );
    assert_eq!(block.block.as_deref(), Some("run the tests first"));
    let ask = from_json(
        HookEvent::PreToolUse,
        &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}}),
    );
    assert_eq!(ask.permission, Some(PermissionDecision::Ask));
    // Output for another event is not taken.
    let wrong = from_json(
        HookEvent::PostToolUse,
        &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "x"}}),
    );
    assert_eq!(wrong.context, None);
    assert!(wrong.notice.is_some());
}

fn host_hooks(dir: &std::path::Path, hooks: Value) -> Hooks {
    let set = HookSet::from_sources(&[(HookSource::Managed, "m".into(), hooks)], false).unwrap();
    Hooks::new(
        Arc::new(set),
        HookRunner::new(None, dir),
        SessionFacts {
            session_id: "s-1".into(),
            transcript_path: dir.join("t.jsonl"),
            cwd: dir.to_path_buf(),
        },
        Arc::new(|| "default".to_string()),
    )
}

#[tokio::test]
async fn a_host_hook_gets_the_json_on_stdin_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = host_hooks(
        dir.path(),
        json!({"Notification": [{"hooks": [{"type": "command",
            "command": "cat > got.json; pwd > pwd.txt; echo '{\"systemMessage\": \"seen\"}'"}]}]}),
    );
    let results = hooks
        .fire(
            HookEvent::Notification,
            None,
            input::notification("needs you", "permission_prompt"),
        )
        .await;
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1.system_message.as_deref(), Some("seen"));
    let got: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("got.json")).unwrap())
            .unwrap();
    assert_eq!(got["hook_event_name"], "Notification");
    assert_eq!(got["session_id"], "s-1");
    assert_eq!(got["permission_mode"], "default");
    assert_eq!(got["message"], "needs you");
    assert_eq!(got["cwd"], dir.path().display().to_string());
    let pwd = std::fs::read_to_string(dir.path().join("pwd.txt")).unwrap();
    assert_eq!(pwd.trim(), dir.path().display().to_string());
}

#[tokio::test]
async fn a_host_hook_past_its_timeout_is_killed_with_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = host_hooks(
        dir.path(),
        json!({"Stop": [{"hooks": [{"type": "command", "timeout": 1,
            "command": "(sleep 30; touch late) & sleep 30; exit 2"}]}]}),
    );
    let results = hooks.fire(HookEvent::Stop, None, input::stop(false)).await;
    assert_eq!(results[0].1.block, None);
    assert!(
        results[0]
            .1
            .notice
            .as_deref()
            .unwrap()
            .contains("timed out")
    );
}

#[tokio::test]
async fn a_sandboxed_hook_without_a_sandbox_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let set = HookSet::from_sources(
        &[(
            HookSource::Project,
            "p".into(),
            json!({"Stop": [{"hooks": [{"type": "command", "command": "exit 2"}]}]}),
        )],
        false,
    )
    .unwrap();
    let hooks = Hooks::new(
        Arc::new(set),
        HookRunner::new(None, dir.path()),
        SessionFacts {
            session_id: "s".into(),
            transcript_path: dir.path().join("t"),
            cwd: dir.path().into(),
        },
        Arc::new(|| "default".to_string()),
    );
    let results = hooks.fire(HookEvent::Stop, None, Map::new()).await;
    assert_eq!(results[0].1.block, None);
    assert!(results[0].1.notice.is_some());
}

struct Echo;

#[tonic::async_trait]
impl HookCallbacks for Echo {
    async fn call(
        &self,
        callback_id: &str,
        input: Value,
        tool_use_id: Option<String>,
    ) -> Result<Value, String> {
        Ok(json!({"hookSpecificOutput": {
            "hookEventName": input["hook_event_name"],
            "additionalContext": format!("{callback_id} {}", tool_use_id.unwrap_or_default()),
        }}))
    }
}

#[tokio::test]
async fn callbacks_go_to_the_registered_client() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = host_hooks(dir.path(), json!({}));
    hooks
        .set
        .add_callback(HookEvent::PostToolUse, Some("Bash"), "cb7")
        .unwrap();
    let entry = &hooks.matching(HookEvent::PostToolUse, Some("Bash"))[0];
    let before = hooks.run(entry, Map::new(), Some("tu1")).await;
    assert!(before.notice.is_some(), "no client yet");
    hooks.runner.set_callbacks(Arc::new(Echo));
    let out = hooks.run(entry, Map::new(), Some("tu1")).await;
    assert_eq!(out.context.as_deref(), Some("cb7 tu1"));
}

#[test]
fn from_settings_keeps_provenance_and_honours_allow_managed_hooks_only() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".claude")).unwrap();
    let project = ws.path().join(".claude/settings.json");
    std::fs::write(
        &project,
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "p"}]}]}}).to_string(),
    )
    .unwrap();
    let managed = ws.path().join("managed.json");
    let load = |managed_only: bool| {
        std::fs::write(
            &managed,
            json!({"allowManagedHooksOnly": managed_only,
                "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "m"}]}]}})
            .to_string(),
        )
        .unwrap();
        // Trusted: an untrusted workspace's hooks never run.
        let settings = crate::settings::Settings::load_from(
            ws.path(),
            crate::settings::CliSettings {
                trust: true,
                ..Default::default()
            },
            &crate::settings::SettingsSources::managed_only(&managed),
        )
        .unwrap();
        HookSet::from_settings(&settings).unwrap()
    };
    let all = load(false).for_event(HookEvent::Stop, None);
    assert_eq!(all.len(), 2);
    let m = all
        .iter()
        .find(|e| e.source == HookSource::Managed)
        .unwrap();
    assert!(matches!(
        m.handler,
        Handler::Command {
            runs_on: RunsOn::Host,
            ..
        }
    ));
    let p = all
        .iter()
        .find(|e| e.source == HookSource::Project)
        .unwrap();
    assert_eq!(p.origin, project.display().to_string());
    assert!(matches!(
        p.handler,
        Handler::Command {
            runs_on: RunsOn::Sandbox,
            ..
        }
    ));
    let only = load(true).for_event(HookEvent::Stop, None);
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].source, HookSource::Managed);
}

#[test]
fn an_invalid_matcher_in_settings_names_the_file() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".claude")).unwrap();
    let project = ws.path().join(".claude/settings.json");
    std::fs::write(
        &project,
        json!({"hooks": {"PreToolUse": [{"matcher": "[", "hooks": []}]}}).to_string(),
    )
    .unwrap();
    let settings = crate::settings::Settings::load_from(
        ws.path(),
        crate::settings::CliSettings {
            trust: true,
            ..Default::default()
        },
        &crate::settings::SettingsSources::managed_only(&ws.path().join("none.json")),
    )
    .unwrap();
    let err = HookSet::from_settings(&settings).unwrap_err().to_string();
    assert!(err.contains(&project.display().to_string()), "{err}");
}
