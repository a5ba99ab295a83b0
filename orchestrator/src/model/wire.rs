//! Decoding one event's JSON payload into a typed event.
//!
//! The payloads are decoded into flat structs (every field any event type may carry,
//! optional) and then sorted by `type`, instead of serde's internally tagged enums: those
//! buffer each object into an intermediate tree first, which made decoding the dominant
//! cost of a stream. Text fields borrow from the payload when it has no escapes, so a
//! delta costs no allocation until it is appended. Unknown fields are skipped.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::types::StopReason;

pub(super) enum WireEvent<'a> {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlock<'a>,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta<'a>,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: WireMessageDelta,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    Unknown,
}

#[derive(Deserialize)]
pub(super) struct WireMessage {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

pub(super) enum WireBlock<'a> {
    Text {
        text: Cow<'a, str>,
    },
    ToolUse {
        id: String,
        name: String,
        input: Option<Value>,
    },
    Thinking {
        thinking: Cow<'a, str>,
        signature: Cow<'a, str>,
    },
    RedactedThinking {
        data: String,
    },
    ServerToolUse {
        id: String,
        name: String,
        input: Option<Value>,
    },
    WebSearchToolResult {
        tool_use_id: String,
        content: Value,
    },
    Unknown,
}

pub(super) enum WireDelta<'a> {
    TextDelta { text: Cow<'a, str> },
    InputJsonDelta { partial_json: Cow<'a, str> },
    ThinkingDelta { thinking: Cow<'a, str> },
    SignatureDelta { signature: Cow<'a, str> },
    Unknown,
}

pub(super) struct WireMessageDelta {
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
}

#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct WireError {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    index: Option<usize>,
    #[serde(borrow)]
    delta: Option<RawDelta<'a>>,
    // Rare and large: boxed so the common delta event stays small to move around.
    #[serde(borrow)]
    content_block: Option<Box<RawBlock<'a>>>,
    message: Option<Box<WireMessage>>,
    usage: Option<WireUsage>,
    error: Option<Box<WireError>>,
}

/// A `content_block_delta` delta or a `message_delta` delta.
#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Cow<'a, str>,
    #[serde(default, borrow)]
    partial_json: Cow<'a, str>,
    #[serde(default, borrow)]
    thinking: Cow<'a, str>,
    #[serde(default, borrow)]
    signature: Cow<'a, str>,
    #[serde(default)]
    stop_reason: Option<StopReason>,
    #[serde(default)]
    stop_sequence: Option<String>,
}

#[derive(Deserialize)]
struct RawBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Cow<'a, str>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
    #[serde(default, borrow)]
    thinking: Cow<'a, str>,
    #[serde(default, borrow)]
    signature: Cow<'a, str>,
    data: Option<String>,
    tool_use_id: Option<String>,
    content: Option<Value>,
}

/// Event names this decoder understands.
pub(super) fn is_known(name: &str) -> bool {
    matches!(
        name,
        "message_start"
            | "content_block_start"
            | "content_block_delta"
            | "content_block_stop"
            | "message_delta"
            | "message_stop"
            | "ping"
            | "error"
    )
}

/// Outer error: the payload is not JSON of the expected shape. Inner error: a known event
/// lacks a field it needs (named).
pub(super) fn decode(
    data: &[u8],
) -> Result<Result<WireEvent<'_>, &'static str>, serde_json::Error> {
    let raw: RawEvent<'_> = serde_json::from_slice(data)?;
    Ok(sort(raw))
}

fn sort(raw: RawEvent<'_>) -> Result<WireEvent<'_>, &'static str> {
    let index = raw.index.ok_or("index");
    Ok(match raw.kind.as_ref() {
        "message_start" => WireEvent::MessageStart {
            message: *raw.message.ok_or("message")?,
        },
        "content_block_start" => WireEvent::ContentBlockStart {
            index: index?,
            content_block: block(*raw.content_block.ok_or("content_block")?)?,
        },
        "content_block_delta" => WireEvent::ContentBlockDelta {
            index: index?,
            delta: delta(raw.delta.ok_or("delta")?),
        },
        "content_block_stop" => WireEvent::ContentBlockStop { index: index? },
        "message_delta" => {
            let (stop_reason, stop_sequence) = match raw.delta {
                Some(d) => (d.stop_reason, d.stop_sequence),
                None => (None, None),
            };
            let delta = WireMessageDelta {
                stop_reason,
                stop_sequence,
            };
            WireEvent::MessageDelta {
                delta,
                usage: raw.usage,
            }
        }
        "message_stop" => WireEvent::MessageStop,
        "ping" => WireEvent::Ping,
        "error" => WireEvent::Error {
            error: *raw.error.ok_or("error")?,
        },
        _ => WireEvent::Unknown,
    })
}

fn block(raw: RawBlock<'_>) -> Result<WireBlock<'_>, &'static str> {
    Ok(match raw.kind.as_ref() {
        "text" => WireBlock::Text { text: raw.text },
        "tool_use" => WireBlock::ToolUse {
            id: raw.id.ok_or("content_block.id")?,
            name: raw.name.ok_or("content_block.name")?,
            input: raw.input,
        },
        "thinking" => WireBlock::Thinking {
            thinking: raw.thinking,
            signature: raw.signature,
        },
        "redacted_thinking" => WireBlock::RedactedThinking {
            data: raw.data.ok_or("content_block.data")?,
        },
        "server_tool_use" => WireBlock::ServerToolUse {
            id: raw.id.ok_or("content_block.id")?,
            name: raw.name.ok_or("content_block.name")?,
            input: raw.input,
        },
        "web_search_tool_result" => WireBlock::WebSearchToolResult {
            tool_use_id: raw.tool_use_id.ok_or("content_block.tool_use_id")?,
            content: raw.content.ok_or("content_block.content")?,
        },
        _ => WireBlock::Unknown,
    })
}

fn delta(raw: RawDelta<'_>) -> WireDelta<'_> {
    match raw.kind.as_ref() {
        "text_delta" => WireDelta::TextDelta { text: raw.text },
        "input_json_delta" => WireDelta::InputJsonDelta {
            partial_json: raw.partial_json,
        },
        "thinking_delta" => WireDelta::ThinkingDelta {
            thinking: raw.thinking,
        },
        "signature_delta" => WireDelta::SignatureDelta {
            signature: raw.signature,
        },
        _ => WireDelta::Unknown,
    }
}
