//! What a hook's run means, as Claude Code defines it:
//!
//! - exit 0: success. Stdout may be JSON (`continue`, `stopReason`, `systemMessage`,
//!   `suppressOutput`, `decision` + `reason`, `hookSpecificOutput` with
//!   `permissionDecision`, `permissionDecisionReason`, `updatedInput`,
//!   `additionalContext`); plain stdout is context for UserPromptSubmit and SessionStart.
//! - exit 2: a blocking error; stderr goes to the model (or blocks the prompt).
//! - any other exit, a timeout, a hook that cannot start: a non-blocking error, logged and
//!   kept as a notice; the run goes on as if the hook had said nothing.

use serde_json::Value;

use super::HookEvent;

/// How a hook process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    Exited(i32),
    TimedOut,
    /// It could not run, or a signal ended it.
    Failed(String),
}

/// A finished hook process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRun {
    pub status: RunStatus,
    pub stdout: String,
    pub stderr: String,
}

/// A hook's say on a tool call (PreToolUse).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionDecision {
    Allow,
    Deny,
    Ask,
}

/// What one hook asked for. Every field is optional: a hook that printed nothing and
/// exited 0 yields the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookOutcome {
    /// Blocked (exit 2, `decision: "block"`): the reason, for the model or the user.
    pub block: Option<String>,
    /// PreToolUse: `permissionDecision` (or legacy `decision: "approve"`).
    pub permission: Option<PermissionDecision>,
    pub permission_reason: Option<String>,
    /// PreToolUse: the tool input to use instead.
    pub updated_input: Option<Value>,
    /// Context for the model (`additionalContext`, or plain stdout where that counts).
    pub context: Option<String>,
    /// `continue: false`: stop, with `stopReason`.
    pub stop: Option<String>,
    /// `systemMessage`: shown to the user, not the model.
    pub system_message: Option<String>,
    /// A non-blocking failure (exit code other than 0 or 2, timeout, bad JSON).
    pub notice: Option<String>,
}

/// Interprets a finished command hook.
pub fn interpret(event: HookEvent, run: &HookRun) -> HookOutcome {
    match run.status {
        RunStatus::Exited(0) => {
            let text = run.stdout.trim();
            if text.starts_with('{')
                && let Ok(value) = serde_json::from_str::<Value>(text)
            {
                return from_json(event, &value);
            }
            // Plain stdout is context only where Claude Code makes it so.
            let counts = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart);
            HookOutcome {
                context: (counts && !text.is_empty()).then(|| text.to_string()),
                ..HookOutcome::default()
            }
        }
        RunStatus::Exited(2) => {
            let stderr = run.stderr.trim();
            HookOutcome {
                block: Some(if stderr.is_empty() {
                    "blocked by a hook (exit code 2, no message)".to_string()
                } else {
                    stderr.to_string()
                }),
                ..HookOutcome::default()
            }
        }
        RunStatus::Exited(code) => HookOutcome {
            notice: Some(with_stderr(
                format!("failed with exit code {code}"),
                &run.stderr,
            )),
            ..HookOutcome::default()
        },
        RunStatus::TimedOut => HookOutcome {
            notice: Some("timed out and was killed; the run goes on".into()),
            ..HookOutcome::default()
        },
        RunStatus::Failed(ref why) => HookOutcome {
            notice: Some(with_stderr(format!("did not run: {why}"), &run.stderr)),
            ..HookOutcome::default()
        },
    }
}

fn with_stderr(what: String, stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        what
    } else {
        format!("{what}: {stderr}")
    }
}

fn str_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Interprets a hook's JSON output (also what a client callback returns).
pub fn from_json(event: HookEvent, value: &Value) -> HookOutcome {
    let mut out = HookOutcome {
        system_message: str_field(value, "systemMessage"),
        ..HookOutcome::default()
    };
    if value.get("continue").and_then(Value::as_bool) == Some(false) {
        out.stop = Some(
            str_field(value, "stopReason")
                .unwrap_or_else(|| format!("a {} hook stopped the run", event.as_str())),
        );
    }
    let reason = str_field(value, "reason");
    match value.get("decision").and_then(Value::as_str) {
        Some("block") => {
            out.block = Some(
                reason
                    .clone()
                    .unwrap_or_else(|| format!("blocked by a {} hook", event.as_str())),
            );
        }
        // Legacy PreToolUse approval.
        Some("approve") if event == HookEvent::PreToolUse => {
            out.permission = Some(PermissionDecision::Allow);
            out.permission_reason = reason.clone();
        }
        _ => {}
    }
    if let Some(specific) = value.get("hookSpecificOutput").filter(|v| v.is_object()) {
        let named = specific.get("hookEventName").and_then(Value::as_str);
        if named.is_some_and(|n| n != event.as_str()) {
            out.notice = Some(format!(
                "hookSpecificOutput names {:?} but the hook ran for {}; ignored",
                named.unwrap_or_default(),
                event.as_str()
            ));
            return out;
        }
        if event == HookEvent::PreToolUse {
            out.permission = match specific.get("permissionDecision").and_then(Value::as_str) {
                Some("allow") => Some(PermissionDecision::Allow),
                Some("deny") => Some(PermissionDecision::Deny),
                Some("ask") => Some(PermissionDecision::Ask),
                _ => out.permission,
            };
            if let Some(r) = str_field(specific, "permissionDecisionReason") {
                out.permission_reason = Some(r);
            }
            out.updated_input = specific
                .get("updatedInput")
                .filter(|v| v.is_object())
                .cloned();
        }
        out.context = str_field(specific, "additionalContext");
    }
    out
}
