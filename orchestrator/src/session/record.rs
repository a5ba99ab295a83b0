//! One line of a session transcript. Every record carries its own id, its parent's id and a
//! timestamp, so a transcript is a chain that can be resumed, forked and audited.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Message, Usage};

/// A transcript line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub uuid: String,
    #[serde(default)]
    pub parent_uuid: Option<String>,
    pub session_id: String,
    /// RFC 3339 UTC.
    pub timestamp: String,
    /// A sub-agent's record (Claude Code's `isSidechain`): part of the transcript, never
    /// part of the session's own conversation.
    #[serde(
        rename = "isSidechain",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub is_sidechain: bool,
    /// On a sidechain record: the id of the parent's Agent tool_use that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_use_id: Option<String>,
    #[serde(flatten)]
    pub body: RecordBody,
}

/// What a record says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RecordBody {
    /// The first line: where and how the session runs.
    SessionStart {
        cwd: String,
        model: String,
        version: String,
        #[serde(default)]
        forked_from: Option<String>,
    },
    /// A user turn: the prompt, or the tool results of the previous assistant turn.
    User { message: Message },
    /// An assistant turn as the model sent it.
    Assistant {
        message: Message,
        #[serde(default)]
        stop_reason: Option<String>,
        #[serde(default)]
        usage: Usage,
    },
    /// A tool call finished (its result is in the next user record; this adds timing).
    ToolCall {
        tool_use_id: String,
        name: String,
        input: Value,
        is_error: bool,
        duration_ms: u64,
    },
    /// A permission decision about one tool call, and why.
    Decision {
        tool_use_id: String,
        tool: String,
        decision: String,
        reason: String,
    },
    /// Conversation before this point was replaced by a summary (compaction).
    Compaction { summary: String, tokens_before: u64 },
    /// The run ended (normally, by error, or by interrupt).
    Result {
        is_error: bool,
        subtype: String,
        #[serde(default)]
        text: Option<String>,
    },
}

impl Record {
    /// A user or assistant turn of the session's own conversation (not a sub-agent's).
    pub fn is_turn(&self) -> bool {
        !self.is_sidechain
            && matches!(
                self.body,
                RecordBody::User { .. } | RecordBody::Assistant { .. }
            )
    }

    /// What a fork or rewind copies: the session's own turns and compactions.
    /// A prompt of the main conversation (a user turn that is not tool results).
    pub fn is_prompt(&self) -> bool {
        !self.is_sidechain
            && matches!(&self.body, RecordBody::User { message }
                if !message.content.iter().any(|b| matches!(b, crate::model::ContentBlock::ToolResult { .. })))
    }

    pub fn is_conversation(&self) -> bool {
        self.is_turn() || !self.is_sidechain && matches!(self.body, RecordBody::Compaction { .. })
    }
}

/// Current time as RFC 3339 (UTC, millisecond precision), without a date crate.
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    let millis = now.subsec_millis();
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_convert_exactly() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert!(now_rfc3339().ends_with('Z'));
    }

    #[test]
    fn records_serialise_with_a_type_tag() {
        let rec = Record {
            uuid: "u1".into(),
            parent_uuid: None,
            session_id: "s".into(),
            timestamp: "t".into(),
            is_sidechain: false,
            parent_tool_use_id: None,
            body: RecordBody::User {
                message: Message::user_text("hi"),
            },
        };
        let v = serde_json::to_value(&rec).unwrap();
        assert_eq!(v["type"], "user");
        assert_eq!(v["message"]["role"], "user");
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(back, rec);
    }
}
