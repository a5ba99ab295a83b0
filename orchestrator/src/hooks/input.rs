//! The JSON a hook reads on stdin, with Claude Code's field names: the common fields
//! (`session_id`, `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`) and each
//! event's own (built by the helpers below).

use serde_json::{Map, Value, json};

use super::{HookEvent, SessionFacts};

/// The whole input: the common fields, then the event's `fields`.
pub fn build(
    facts: &SessionFacts,
    permission_mode: &str,
    event: HookEvent,
    fields: Map<String, Value>,
) -> Value {
    let mut input = Map::new();
    input.insert("session_id".into(), json!(facts.session_id));
    input.insert(
        "transcript_path".into(),
        json!(facts.transcript_path.display().to_string()),
    );
    input.insert("cwd".into(), json!(facts.cwd.display().to_string()));
    input.insert("permission_mode".into(), json!(permission_mode));
    input.insert("hook_event_name".into(), json!(event.as_str()));
    input.extend(fields);
    Value::Object(input)
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

pub fn pre_tool_use(tool_name: &str, tool_input: &Value, tool_use_id: &str) -> Map<String, Value> {
    object(json!({
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": tool_use_id,
    }))
}

pub fn post_tool_use(
    tool_name: &str,
    tool_input: &Value,
    tool_use_id: &str,
    tool_response: Value,
) -> Map<String, Value> {
    let mut fields = pre_tool_use(tool_name, tool_input, tool_use_id);
    fields.insert("tool_response".into(), tool_response);
    fields
}

/// What PostToolUse hooks see of a tool's result. Cordon's tools produce one text: it is
/// `content` for every tool and also `stdout` for Bash (where Claude Code's hooks look).
pub fn tool_response(tool_name: &str, content: &str, is_error: bool) -> Value {
    let mut response = json!({"content": content, "is_error": is_error});
    if tool_name == "Bash" {
        response["stdout"] = json!(content);
        response["stderr"] = json!("");
        response["interrupted"] = json!(false);
    }
    response
}

pub fn user_prompt_submit(prompt: &str) -> Map<String, Value> {
    object(json!({ "prompt": prompt }))
}

/// Stop (and SubagentStop): `stop_hook_active` is true when a Stop hook already kept the
/// model going once, so a hook can avoid looping forever.
pub fn stop(stop_hook_active: bool) -> Map<String, Value> {
    object(json!({ "stop_hook_active": stop_hook_active }))
}

/// `source`: startup | resume | clear | compact.
pub fn session_start(source: &str) -> Map<String, Value> {
    object(json!({ "source": source }))
}

/// `reason`: clear | logout | prompt_input_exit | other.
pub fn session_end(reason: &str) -> Map<String, Value> {
    object(json!({ "reason": reason }))
}

/// `trigger`: manual | auto.
pub fn pre_compact(trigger: &str, custom_instructions: &str) -> Map<String, Value> {
    object(json!({ "trigger": trigger, "custom_instructions": custom_instructions }))
}

pub fn notification(message: &str, notification_type: &str) -> Map<String, Value> {
    object(json!({ "message": message, "notification_type": notification_type }))
}
