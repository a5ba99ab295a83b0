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

/// A sub-agent's start (`task_started`) or end (`task_notification`), as system records
/// the SDK parses into its task messages. The task id is the Agent call's tool_use id.
pub fn task(session_id: &str, event: &crate::subagents::TaskEvent) -> Value {
    use crate::subagents::TaskEvent;
    match event {
        TaskEvent::Started {
            task_id,
            description,
            agent_type,
        } => json!({
            "type": "system",
            "subtype": "task_started",
            "task_id": task_id,
            "tool_use_id": task_id,
            "description": description,
            "agent_type": agent_type,
            // What the SDK tracks as delegated work that may outlive a turn.
            "task_type": "local_agent",
            "uuid": new_uuid(),
            "session_id": session_id,
        }),
        TaskEvent::Ended {
            task_id,
            status,
            summary,
            output_file,
        } => json!({
            "type": "system",
            "subtype": "task_notification",
            "task_id": task_id,
            "tool_use_id": task_id,
            "status": status.as_str(),
            "output_file": output_file,
            "summary": summary,
            "uuid": new_uuid(),
            "session_id": session_id,
        }),
    }
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

    #[test]
    fn task_records_carry_what_the_sdk_parses() {
        use crate::subagents::{TaskEvent, TaskStatus};
        let started = task(
            "s",
            &TaskEvent::Started {
                task_id: "toolu_1".into(),
                description: "review".into(),
                agent_type: "reviewer".into(),
            },
        );
        for field in ["task_id", "description", "uuid", "session_id"] {
            assert!(started[field].is_string(), "{field} missing");
        }
        assert_eq!(started["subtype"], "task_started");
        let ended = task(
            "s",
            &TaskEvent::Ended {
                task_id: "toolu_1".into(),
                status: TaskStatus::Stopped,
                summary: "stopped".into(),
                output_file: "/t.jsonl".into(),
            },
        );
        for field in [
            "task_id",
            "status",
            "output_file",
            "summary",
            "uuid",
            "session_id",
        ] {
            assert!(ended[field].is_string(), "{field} missing");
        }
        assert_eq!(ended["status"], "stopped");
    }
}
