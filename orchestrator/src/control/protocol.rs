//! The stream-json control protocol's wire shapes, as the Claude Agent SDK speaks them.
//!
//! Lines the client (the SDK) writes to our stdin:
//! - `{"type":"user","message":{"role":"user","content":...}}`: a prompt;
//! - `{"type":"control_request","request_id":..,"request":{"subtype":..}}`: a request to us
//!   (initialize, interrupt, set_permission_mode, rewind_files, ...);
//! - `{"type":"control_response","response":{"subtype":"success"|"error","request_id":..,
//!   "response":{..}|"error":".."}}`: the answer to a request we sent (can_use_tool,
//!   hook_callback);
//! - `{"type":"control_cancel_request","request_id":..}`.
//!
//! Lines we write: the session's records (system/init, assistant, user, result), our own
//! control_requests, and control_responses to the client's requests.
//!
//! Unknown fields are accepted on purpose: the SDK adds fields release by release and an
//! older peer must keep working. Unknown message types and request subtypes are answered
//! (or ignored) explicitly, never guessed at.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

/// Longest stdin line we accept (a prompt with pasted files; the SDK's own limit is 1 MiB
/// per stdout line, inputs are of the same order).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// One line from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// A prompt.
    User { text: String, uuid: Option<String> },
    /// A request to us.
    Request {
        request_id: String,
        request: Request,
    },
    /// The answer to one of our requests.
    Response {
        request_id: String,
        result: Result<Value, String>,
    },
    /// The client gave up on one of our requests.
    Cancel { request_id: String },
    /// Anything else (keep_alive, newer message types): ignored.
    Ignored { kind: String },
}

/// A request the client sends us.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// The handshake: the client's hook matchers (event -> matchers with callback ids)
    /// and its programmatic sub-agent types (name -> definition).
    Initialize {
        hooks: BTreeMap<String, Vec<HookMatcherConfig>>,
        agents: BTreeMap<String, AgentConfig>,
    },
    Interrupt,
    SetPermissionMode {
        mode: String,
    },
    RewindFiles {
        user_message_id: String,
        dry_run: bool,
    },
    /// The MCP servers and their state.
    McpStatus,
    /// The model for the next calls; `None` goes back to the default.
    SetModel {
        model: Option<String>,
    },
    /// What occupies the context window.
    GetContextUsage,
    /// Enables or disables an MCP server (a disabled one offers no tools).
    McpToggle {
        server: String,
        enabled: bool,
    },
    /// Connects an MCP server again (after it failed or was disabled).
    McpReconnect {
        server: String,
    },
    /// Stops a running sub-agent (its task id is the one `task_started` named).
    StopTask {
        task_id: String,
    },
    /// A JSON-RPC message the client's in-process MCP server `server` sent of its own
    /// accord (a notification, or a request of the server's), for its connection.
    McpMessage {
        server: String,
        message: Value,
    },
    /// A subtype we do not implement: answered with an error naming it.
    Unsupported {
        subtype: String,
    },
}

/// One hook matcher from `initialize`: a tool-name regex and the callbacks it runs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HookMatcherConfig {
    #[serde(default)]
    pub matcher: Option<String>,
    #[serde(rename = "hookCallbackIds", default)]
    pub hook_callback_ids: Vec<String>,
    /// Seconds.
    #[serde(default)]
    pub timeout: Option<f64>,
}

/// One programmatic sub-agent from `initialize` (the SDK's `AgentDefinition`), as sent:
/// [`super::agents`] checks it and refuses what Cordon cannot apply. A field this
/// version does not know lands in `other`, and is refused by name (ignoring it would run
/// the sub-agent other than its caller asked).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AgentConfig {
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub prompt: String,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    #[serde(rename = "disallowedTools", default)]
    pub disallowed_tools: Option<Vec<String>>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub skills: Option<Vec<String>>,
    #[serde(default)]
    pub memory: Option<String>,
    #[serde(rename = "mcpServers", default)]
    pub mcp_servers: Option<Vec<Value>>,
    #[serde(rename = "initialPrompt", default)]
    pub initial_prompt: Option<String>,
    #[serde(rename = "maxTurns", default)]
    pub max_turns: Option<i64>,
    #[serde(default)]
    pub background: Option<bool>,
    /// A level name, or (in Claude Code) an integer.
    #[serde(default)]
    pub effort: Option<Value>,
    #[serde(rename = "permissionMode", default)]
    pub permission_mode: Option<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// Why a line could not be understood.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("line of {0} bytes exceeds the limit")]
    TooLong(usize),
    #[error("not a json object: {0}")]
    NotJson(String),
    #[error("{kind} message is malformed: {reason}")]
    Malformed { kind: String, reason: String },
    /// A control request with an id whose body could not be understood: answered with
    /// an error for that id, so the client is not left waiting.
    #[error("control request {request_id} is malformed: {reason}")]
    BadRequest { request_id: String, reason: String },
}

fn malformed(kind: &str, reason: impl Into<String>) -> ParseError {
    ParseError::Malformed {
        kind: kind.into(),
        reason: reason.into(),
    }
}

/// Parses one stdin line (`None` for a blank one).
pub fn parse_line(line: &str) -> Result<Option<Inbound>, ParseError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(ParseError::TooLong(line.len()));
    }
    let line = line.trim();
    if line.is_empty() {
        return Ok(None);
    }
    let value: Value =
        serde_json::from_str(line).map_err(|e| ParseError::NotJson(e.to_string()))?;
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Err(malformed("unknown", "missing \"type\""));
    };
    let inbound = match kind {
        "user" => parse_user(&value)?,
        "control_request" => {
            let request_id = string_field(&value, "request_id", kind)?;
            let request =
                parse_request(value.get("request").unwrap_or(&Value::Null)).map_err(|e| {
                    ParseError::BadRequest {
                        request_id: request_id.clone(),
                        reason: e.to_string(),
                    }
                })?;
            Inbound::Request {
                request_id,
                request,
            }
        }
        "control_response" => parse_response(value.get("response").unwrap_or(&Value::Null))?,
        "control_cancel_request" => Inbound::Cancel {
            request_id: string_field(&value, "request_id", kind)?,
        },
        other => Inbound::Ignored { kind: other.into() },
    };
    Ok(Some(inbound))
}

fn string_field(value: &Value, field: &str, kind: &str) -> Result<String, ParseError> {
    value
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| malformed(kind, format!("missing string field \"{field}\"")))
}

/// A user message's text: a string content, or its text blocks joined.
fn parse_user(value: &Value) -> Result<Inbound, ParseError> {
    let content = value
        .get("message")
        .and_then(|m| m.get("content"))
        .ok_or_else(|| malformed("user", "missing message.content"))?;
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            let mut parts = Vec::new();
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = block.get("text").and_then(Value::as_str) {
                            parts.push(t.to_string());
                        }
                    }
                    Some(other) => {
                        return Err(malformed(
                            "user",
                            format!("content blocks of type {other:?} are not supported"),
                        ));
                    }
                    None => return Err(malformed("user", "content block without a type")),
                }
            }
            parts.join("\n\n")
        }
        _ => return Err(malformed("user", "content is neither a string nor a list")),
    };
    let uuid = value
        .get("uuid")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Inbound::User { text, uuid })
}

fn parse_request(request: &Value) -> Result<Request, ParseError> {
    let subtype = request
        .get("subtype")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("control_request", "missing request.subtype"))?;
    Ok(match subtype {
        "initialize" => {
            let hooks = match request.get("hooks") {
                None | Some(Value::Null) => BTreeMap::new(),
                Some(h) => serde_json::from_value(h.clone())
                    .map_err(|e| malformed("initialize", format!("hooks: {e}")))?,
            };
            let agents = match request.get("agents") {
                None | Some(Value::Null) => BTreeMap::new(),
                Some(a) => serde_json::from_value(a.clone())
                    .map_err(|e| malformed("initialize", format!("agents: {e}")))?,
            };
            Request::Initialize { hooks, agents }
        }
        "interrupt" => Request::Interrupt,
        "set_permission_mode" => Request::SetPermissionMode {
            mode: string_field(request, "mode", subtype)?,
        },
        "rewind_files" => Request::RewindFiles {
            user_message_id: string_field(request, "user_message_id", subtype)?,
            dry_run: request
                .get("dry_run")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        },
        "mcp_status" => Request::McpStatus,
        "get_context_usage" => Request::GetContextUsage,
        "mcp_toggle" => Request::McpToggle {
            server: string_field(request, "serverName", subtype)?,
            enabled: request
                .get("enabled")
                .and_then(Value::as_bool)
                .ok_or_else(|| malformed(subtype, "missing boolean field \"enabled\""))?,
        },
        "mcp_reconnect" => Request::McpReconnect {
            server: string_field(request, "serverName", subtype)?,
        },
        "stop_task" => Request::StopTask {
            task_id: string_field(request, "task_id", subtype)?,
        },
        "mcp_message" => Request::McpMessage {
            server: string_field(request, "server_name", subtype)?,
            message: match request.get("message") {
                Some(m @ Value::Object(_)) => m.clone(),
                _ => return Err(malformed(subtype, "missing object field \"message\"")),
            },
        },
        "set_model" => Request::SetModel {
            model: request
                .get("model")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty() && *m != "default")
                .map(str::to_string),
        },
        other => Request::Unsupported {
            subtype: other.into(),
        },
    })
}

fn parse_response(response: &Value) -> Result<Inbound, ParseError> {
    let request_id = string_field(response, "request_id", "control_response")?;
    let result = match response.get("subtype").and_then(Value::as_str) {
        Some("success") => Ok(response.get("response").cloned().unwrap_or(json!({}))),
        Some("error") => Err(response
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("the client reported an error")
            .to_string()),
        _ => {
            return Err(malformed(
                "control_response",
                "subtype is not success/error",
            ));
        }
    };
    Ok(Inbound::Response { request_id, result })
}

/// Our answer to a client's request.
pub fn success_response(request_id: &str, response: Value) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    })
}

pub fn error_response(request_id: &str, error: &str) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": error},
    })
}

/// A request we send the client.
pub fn request_envelope(request_id: &str, request: Value) -> Value {
    json!({"type": "control_request", "request_id": request_id, "request": request})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Inbound {
        parse_line(line).unwrap().unwrap()
    }

    #[test]
    fn user_messages_with_string_or_block_content() {
        assert_eq!(
            parse(
                r#"{"type":"user","message":{"role":"user","content":"hi"},"parent_tool_use_id":null,"session_id":"default"}"#
            ),
            Inbound::User {
                text: "hi".into(),
                uuid: None
            }
        );
        assert_eq!(
            parse(
                r#"{"type":"user","uuid":"u1","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#
            ),
            Inbound::User {
                text: "a\n\nb".into(),
                uuid: Some("u1".into())
            }
        );
        assert!(parse_line(r#"{"type":"user","message":{"content":[{"type":"image"}]}}"#).is_err());
    }

    #[test]
    fn initialize_carries_hook_matchers() {
        let line = r#"{"type":"control_request","request_id":"req_1","request":{"subtype":"initialize","hooks":{"PreToolUse":[{"matcher":"Bash","hookCallbackIds":["hook_0"]}]}}}"#;
        let Inbound::Request {
            request_id,
            request: Request::Initialize { hooks, agents },
        } = parse(line)
        else {
            panic!("not initialize");
        };
        assert_eq!(request_id, "req_1");
        assert_eq!(hooks["PreToolUse"][0].matcher.as_deref(), Some("Bash"));
        assert_eq!(hooks["PreToolUse"][0].hook_callback_ids, vec!["hook_0"]);
        assert!(agents.is_empty());
        let none = r#"{"type":"control_request","request_id":"r","request":{"subtype":"initialize","hooks":null}}"#;
        assert!(
            matches!(parse(none), Inbound::Request { request: Request::Initialize { hooks, .. }, .. } if hooks.is_empty())
        );
    }

    #[test]
    fn initialize_carries_programmatic_agents() {
        let line = r#"{"type":"control_request","request_id":"r","request":{"subtype":"initialize","hooks":null,
            "agents":{"reviewer":{"description":"Reviews","prompt":"You review.","tools":["Read"],"model":"haiku","maxTurns":3}}}}"#;
        let Inbound::Request {
            request: Request::Initialize { agents, .. },
            ..
        } = parse(&line.replace('\n', ""))
        else {
            panic!("not initialize");
        };
        let a = &agents["reviewer"];
        assert_eq!(
            (a.description.as_str(), a.prompt.as_str()),
            ("Reviews", "You review.")
        );
        assert_eq!(a.tools.as_deref(), Some(&["Read".to_string()][..]));
        assert_eq!(a.model.as_deref(), Some("haiku"));
        assert_eq!(a.max_turns, Some(3));
        assert!(a.other.is_empty());
        let bad = r#"{"type":"control_request","request_id":"r","request":{"subtype":"initialize","agents":{"x":{"tools":"Read"}}}}"#;
        assert!(
            parse_line(bad).is_err(),
            "a malformed agent is an error, not ignored"
        );
    }

    #[test]
    fn mcp_and_task_requests() {
        assert!(matches!(
            parse(r#"{"type":"control_request","request_id":"r","request":{"subtype":"mcp_toggle","serverName":"calc","enabled":false}}"#),
            Inbound::Request { request: Request::McpToggle { server, enabled: false }, .. } if server == "calc"
        ));
        assert!(matches!(
            parse(r#"{"type":"control_request","request_id":"r","request":{"subtype":"mcp_reconnect","serverName":"calc"}}"#),
            Inbound::Request { request: Request::McpReconnect { server }, .. } if server == "calc"
        ));
        assert!(matches!(
            parse(r#"{"type":"control_request","request_id":"r","request":{"subtype":"stop_task","task_id":"t1"}}"#),
            Inbound::Request { request: Request::StopTask { task_id }, .. } if task_id == "t1"
        ));
        assert!(matches!(
            parse(r#"{"type":"control_request","request_id":"r","request":{"subtype":"mcp_message","server_name":"calc","message":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}}"#),
            Inbound::Request { request: Request::McpMessage { server, message }, .. }
                if server == "calc" && message["method"] == "notifications/tools/list_changed"
        ));
        assert!(matches!(
            parse_line(r#"{"type":"control_request","request_id":"r8","request":{"subtype":"mcp_message","server_name":"calc","message":"hi"}}"#),
            Err(ParseError::BadRequest { request_id, .. }) if request_id == "r8"
        ));
        assert!(matches!(
            parse_line(r#"{"type":"control_request","request_id":"r7","request":{"subtype":"mcp_toggle","serverName":"calc"}}"#),
            Err(ParseError::BadRequest { request_id, reason }) if request_id == "r7" && reason.contains("enabled")
        ));
    }

    #[test]
    fn requests_and_responses() {
        assert!(matches!(
            parse(
                r#"{"type":"control_request","request_id":"r","request":{"subtype":"interrupt"}}"#
            ),
            Inbound::Request {
                request: Request::Interrupt,
                ..
            }
        ));
        assert!(matches!(
            parse(r#"{"type":"control_request","request_id":"r","request":{"subtype":"set_permission_mode","mode":"plan"}}"#),
            Inbound::Request { request: Request::SetPermissionMode { mode }, .. } if mode == "plan"
        ));
        assert!(matches!(
            parse(r#"{"type":"control_request","request_id":"r","request":{"subtype":"apply_flag_settings"}}"#),
            Inbound::Request { request: Request::Unsupported { subtype }, .. } if subtype == "apply_flag_settings"
        ));
        assert_eq!(
            parse(
                r#"{"type":"control_response","response":{"subtype":"success","request_id":"c1","response":{"behavior":"allow"}}}"#
            ),
            Inbound::Response {
                request_id: "c1".into(),
                result: Ok(json!({"behavior":"allow"}))
            }
        );
        assert_eq!(
            parse(
                r#"{"type":"control_response","response":{"subtype":"error","request_id":"c1","error":"boom"}}"#
            ),
            Inbound::Response {
                request_id: "c1".into(),
                result: Err("boom".into())
            }
        );
        assert_eq!(
            parse(r#"{"type":"keep_alive"}"#),
            Inbound::Ignored {
                kind: "keep_alive".into()
            }
        );
        assert_eq!(parse_line("   ").unwrap(), None);
        assert!(parse_line("not json").is_err());
        assert!(parse_line(r#"{"no":"type"}"#).is_err());
    }
}
