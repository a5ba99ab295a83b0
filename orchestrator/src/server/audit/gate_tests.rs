use serde_json::json;

use super::*;

/// Allows everything but `rm`, which "the user" refuses.
struct Fixed;

#[tonic::async_trait]
impl ToolGate for Fixed {
    async fn before(&self, call: &ToolCallInfo) -> GateVerdict {
        if call.input["command"] == "rm -rf x" {
            GateVerdict::Deny {
                message: "no".into(),
                reason: "refused by the user (ask rule)".into(),
            }
        } else {
            GateVerdict::Allow {
                input: call.input.clone(),
                reason: "allowed (rule Bash(echo *) from cli)".into(),
            }
        }
    }
}

fn call(id: &str, command: &str) -> ToolCallInfo {
    ToolCallInfo {
        tool_use_id: id.into(),
        name: "Bash".into(),
        input: json!({"command": command}),
        read_only: false,
        kind: crate::permissions::ToolKind::Exec,
    }
}

#[tokio::test]
async fn allowed_and_refused_calls_are_both_recorded_with_their_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(AuditLog::open(dir.path()).expect("open"));
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let gate = AuditGate::new(
        Arc::new(Fixed),
        AuditScope {
            tenant: "acme".into(),
            key_id: Some("key_a".into()),
            session: "s1".into(),
        },
        AuditSinks {
            log: log.clone(),
            metrics: Some(metrics.clone()),
        },
    );
    let ok = call("t1", "echo hi");
    assert!(matches!(gate.before(&ok).await, GateVerdict::Allow { .. }));
    let out = gate.after(&ok, ToolOutput::ok("hi\n")).await;
    assert_eq!(out.content, "hi\n");
    let refused = call("t2", "rm -rf x");
    assert!(matches!(
        gate.before(&refused).await,
        GateVerdict::Deny { .. }
    ));

    let recs = log.export("acme", 0, 10).expect("export");
    assert_eq!(recs.len(), 2);
    let first = &recs[0].event;
    assert_eq!(first["kind"], "tool_call");
    assert_eq!(first["key_id"], "key_a");
    assert_eq!(first["decision"], "allow");
    assert_eq!(first["decision_source"], "rule");
    assert_eq!(first["outcome"], "ok");
    assert_eq!(first["output_sha256"], digest(b"hi\n"));
    assert_eq!(first["input_preview"], r#"{"command":"echo hi"}"#);
    let second = &recs[1].event;
    assert_eq!(second["decision"], "deny");
    assert_eq!(second["decision_source"], "user");
    assert_eq!(second["outcome"], "denied");
    assert!(second["output_sha256"].is_null());

    let text = metrics.render();
    assert!(text.contains("cordon_tool_call_seconds_count{outcome=\"ok\",tool=\"Bash\"} 1"));
    assert!(text.contains("cordon_tool_call_seconds_count{outcome=\"denied\",tool=\"Bash\"} 1"));
    assert!(
        text.contains("cordon_permission_decisions_total{decision=\"deny\",source=\"user\"} 1")
    );
}

#[test]
fn decision_sources_follow_the_policy_gates_reasons() {
    use DecisionSource as S;
    for (reason, want) in [
        ("approved by the user (asked by rule)", S::User),
        (
            "denied by the PreToolUse hook `./check.sh` (project: .claude/settings.json)",
            S::Hook,
        ),
        (
            "deny rule matched (rule Bash(rm *) from /w/.claude/settings.json)",
            S::Rule,
        ),
        ("runs sandboxed: autoAllowBashIfSandboxed", S::Sandbox),
        ("acceptEdits mode allows edits", S::Mode),
    ] {
        assert_eq!(S::from_gate_reason(reason), want, "{reason}");
    }
}
