//! The session records a stream-json client reads, with the fields the Agent SDK's parser
//! requires (an assistant message names its model; a result carries durations, turn
//! count, usage and cost) on top of [`crate::output`]'s shapes.

use serde_json::{Value, json};

use crate::agent::RunOutcome;
use crate::model::{Message, Role};
use crate::output;

fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// An assistant or user message.
pub fn message(session_id: &str, model: &str, message: &Message) -> Value {
    let mut record = output::message_record(session_id, message);
    record["uuid"] = json!(new_uuid());
    if message.role == Role::Assistant
        && let Some(body) = record.get_mut("message").and_then(Value::as_object_mut)
    {
        body.insert("model".into(), json!(model));
        body.insert("type".into(), json!("message"));
    }
    record
}

/// One of the API's stream events as it came (`--include-partial-messages`), of the
/// main conversation or of the sub-agent run by the Agent call `parent_tool_use_id`.
pub fn stream_event(session_id: &str, event: Value, parent_tool_use_id: Option<String>) -> Value {
    json!({
        "type": "stream_event",
        "uuid": new_uuid(),
        "session_id": session_id,
        "event": event,
        "parent_tool_use_id": parent_tool_use_id,
    })
}

/// The result of one prompt.
pub fn result(
    session_id: &str,
    outcome: &RunOutcome,
    duration_ms: u64,
    duration_api_ms: u64,
) -> Value {
    let mut record = output::result_record(session_id, outcome, duration_ms);
    record["duration_api_ms"] = json!(duration_api_ms);
    record["uuid"] = json!(new_uuid());
    record["permission_denials"] = json!([]);
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ContentBlock, Usage};

    #[test]
    fn assistant_records_name_their_model() {
        let m = Message::assistant(vec![ContentBlock::text("hi")]);
        let r = message("s", "claude-x", &m);
        assert_eq!(r["type"], "assistant");
        assert_eq!(r["message"]["model"], "claude-x");
        assert_eq!(r["message"]["content"][0]["text"], "hi");
        assert!(r["uuid"].is_string());
        let u = message("s", "claude-x", &Message::user_text("q"));
        assert_eq!(u["type"], "user");
        assert!(u["message"].get("model").is_none());
    }

    #[test]
    fn results_carry_what_the_sdk_requires() {
        let outcome = RunOutcome {
            text: "ok".into(),
            is_error: false,
            subtype: "success".into(),
            turns: 2,
            usage: Usage::default(),
            ..RunOutcome::start()
        };
        let r = result("s", &outcome, 10, 4);
        for field in [
            "subtype",
            "duration_ms",
            "duration_api_ms",
            "is_error",
            "num_turns",
            "session_id",
        ] {
            assert!(r.get(field).is_some(), "{field} missing");
        }
        assert_eq!(r["duration_api_ms"], 4);
    }
}
