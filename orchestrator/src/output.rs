//! The records `cordon run` prints: `text` (the final answer), `json` (one result object)
//! and `stream-json` (one JSON object per line: an init record, each assistant and user
//! message, a final result record). Field names follow Claude Code's headless output so
//! tooling written for it (the Agent SDKs, CI scripts) reads ours unchanged.

use serde::Serialize;
use serde_json::{Value, json};

use crate::agent::RunOutcome;
use crate::model::{Message, Role, Usage};

/// `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    #[value(name = "stream-json")]
    StreamJson,
}

/// The first stream-json record.
pub fn init_record(
    session_id: &str,
    cwd: &str,
    tools: &[String],
    model: &str,
    permission_mode: &str,
) -> Value {
    json!({
        "type": "system",
        "subtype": "init",
        "session_id": session_id,
        "cwd": cwd,
        "tools": tools,
        "mcp_servers": [],
        "model": model,
        "permissionMode": permission_mode,
        "apiKeySource": "environment",
        "cordon_version": env!("CARGO_PKG_VERSION"),
    })
}

/// An assistant or user message record.
pub fn message_record(session_id: &str, message: &Message) -> Value {
    let kind = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    json!({
        "type": kind,
        "message": message,
        "parent_tool_use_id": Value::Null,
        "session_id": session_id,
    })
}

/// Token usage in the API's field names.
#[derive(Debug, Serialize)]
struct UsageOut {
    input_tokens: u64,
    output_tokens: u64,
    cache_read_input_tokens: u64,
    cache_creation_input_tokens: u64,
}

/// The final record (`json` prints only this; `stream-json` prints it last).
pub fn result_record(session_id: &str, outcome: &RunOutcome, duration_ms: u64) -> Value {
    let Usage {
        input_tokens,
        output_tokens,
        cache_read_input_tokens,
        cache_creation_input_tokens,
    } = outcome.usage;
    json!({
        "type": "result",
        "subtype": outcome.subtype,
        "is_error": outcome.is_error,
        "duration_ms": duration_ms,
        "num_turns": outcome.turns,
        "result": outcome.text,
        "session_id": session_id,
        "stop_reason": outcome.stop_reason.as_ref().map(|s| s.as_str().to_string()),
        "usage": UsageOut { input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_the_shapes_headless_tooling_reads() {
        let init = init_record("s1", "/w", &["Read".into()], "m", "default");
        assert_eq!(init["type"], "system");
        assert_eq!(init["subtype"], "init");
        assert_eq!(init["tools"][0], "Read");
        let msg = message_record("s1", &Message::user_text("hi"));
        assert_eq!(msg["type"], "user");
        assert_eq!(msg["message"]["content"][0]["text"], "hi");
        let outcome = RunOutcome {
            text: "done".into(),
            is_error: false,
            subtype: "success".into(),
            turns: 3,
            usage: Usage {
                input_tokens: 5,
                output_tokens: 7,
                ..Default::default()
            },
            stop_reason: None,
        };
        let result = result_record("s1", &outcome, 12);
        assert_eq!(result["result"], "done");
        assert_eq!(result["num_turns"], 3);
        assert_eq!(result["usage"]["output_tokens"], 7);
        assert_eq!(result["is_error"], false);
    }
}
