//! What an audit record says: one enum per kind of event, serialised as the record's body.
//! Secrets never enter a record: an API key appears as its key id, tool inputs and outputs
//! as their sha256 and a redacted, length-capped preview (see [`super::redact`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chain::digest;
use super::redact::Redactor;

/// One audited event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuditEvent {
    /// A tool call the model made, whether it ran or not.
    ToolCall(ToolCallAudit),
    /// A command run through the API's exec route (the sandbox without the model).
    Exec(ExecAudit),
    /// A client's answer to a permission request.
    PermissionAnswer(PermissionAnswerAudit),
    /// An operator or API action on tenants, keys or sessions.
    Admin(AdminAudit),
}

impl AuditEvent {
    /// The `kind` column (the same word as the body's tag).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ToolCall(_) => "tool_call",
            Self::Exec(_) => "exec",
            Self::PermissionAnswer(_) => "permission_answer",
            Self::Admin(_) => "admin",
        }
    }
}

/// Whether the call was let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditDecision {
    Allow,
    Deny,
}

/// Who or what decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionSource {
    /// A permission rule (settings, tenant, CLI).
    Rule,
    /// The permission mode, with no rule matching.
    Mode,
    /// A PreToolUse hook.
    Hook,
    /// A person answering a permission request.
    User,
    /// Auto-allowed because it runs sandboxed (`sandbox.autoAllowBashIfSandboxed`).
    Sandbox,
    /// Nobody was asked: e.g. the exec route, which the API key itself authorises.
    ApiKey,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// It ran and failed (an is_error result, a non-zero exit).
    Error,
    /// It did not run: a denial.
    Denied,
    Interrupted,
    TimedOut,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallAudit {
    /// The API key's id (never the key); `None` for a session not started through a key.
    pub key_id: Option<String>,
    pub session: String,
    pub tool_use_id: String,
    pub tool: String,
    pub input_sha256: String,
    pub input_preview: String,
    pub decision: AuditDecision,
    pub decision_source: DecisionSource,
    pub outcome: Outcome,
    pub duration_ms: u64,
    /// Of the result text the model saw; `None` when nothing ran.
    pub output_sha256: Option<String>,
}

impl ToolCallAudit {
    /// A record for `input`, its digest and redacted preview filled in; decision, outcome,
    /// duration and output are set by the caller as the call proceeds.
    pub fn new(
        key_id: Option<&str>,
        session: &str,
        tool_use_id: &str,
        tool: &str,
        input: &Value,
    ) -> Self {
        Self {
            key_id: key_id.map(str::to_string),
            session: session.into(),
            tool_use_id: tool_use_id.into(),
            tool: tool.into(),
            input_sha256: digest(input.to_string().as_bytes()),
            input_preview: Redactor::builtin().preview(input),
            decision: AuditDecision::Allow,
            decision_source: DecisionSource::Rule,
            outcome: Outcome::Ok,
            duration_ms: 0,
            output_sha256: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecAudit {
    pub key_id: Option<String>,
    pub session: String,
    pub command_sha256: String,
    pub command_preview: String,
    pub decision: AuditDecision,
    pub decision_source: DecisionSource,
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Of stdout and stderr as streamed, in order.
    pub output_sha256: Option<String>,
}

impl ExecAudit {
    pub fn new(key_id: Option<&str>, session: &str, command: &str) -> Self {
        Self {
            key_id: key_id.map(str::to_string),
            session: session.into(),
            command_sha256: digest(command.as_bytes()),
            command_preview: Redactor::builtin().preview_text(command),
            decision: AuditDecision::Allow,
            decision_source: DecisionSource::ApiKey,
            outcome: Outcome::Ok,
            exit_code: None,
            duration_ms: 0,
            output_sha256: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionAnswerAudit {
    pub key_id: Option<String>,
    pub session: String,
    pub request_id: String,
    pub tool: String,
    pub decision: AuditDecision,
    /// The answer also allows such calls from now on.
    pub always: bool,
}

/// What an administrative action did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminAction {
    TenantCreate,
    KeyCreate,
    KeyRevoke,
    SessionCreate,
    SessionDelete,
    SessionPause,
    SessionResume,
    SettingsChange,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminAudit {
    /// `cli` for the `cordon admin` command line, else the key id that acted.
    pub actor: String,
    pub action: AdminAction,
    /// What it acted on: a tenant name, key id or session id.
    pub target: String,
}
