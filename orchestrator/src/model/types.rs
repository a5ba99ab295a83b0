//! Messages API wire types: what we send (`MessagesRequest`) and the content blocks both
//! directions share. Serialised exactly as the API expects: `None` fields are skipped, enums
//! are tagged by `type`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// One `POST /v1/messages` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagesRequest {
    pub model: String,
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<SystemBlock>,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// The client always streams; it sets this to `true` whatever the caller put here.
    #[serde(default)]
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// `output_config`: how much effort the model spends (`{"effort": "high"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_config: Option<OutputConfig>,
}

impl MessagesRequest {
    /// A request with the required fields and nothing else.
    pub fn new(model: impl Into<String>, max_tokens: u32, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            max_tokens,
            system: Vec::new(),
            messages,
            tools: Vec::new(),
            stream: true,
            thinking: None,
            stop_sequences: Vec::new(),
            metadata: None,
            temperature: None,
            output_config: None,
        }
    }
}

/// A block of the system prompt (always the array form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SystemBlock {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

impl SystemBlock {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            cache_control: None,
        }
    }
}

/// Prompt-caching breakpoint: `{"type":"ephemeral"}` (optionally with a `ttl` such as "1h").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CacheControl {
    Ephemeral {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl: Option<String>,
    },
}

impl CacheControl {
    pub fn ephemeral() -> Self {
        Self::Ephemeral { ttl: None }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One turn of the conversation; content is always the array form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    pub fn user(content: Vec<ContentBlock>) -> Self {
        Self {
            role: Role::User,
            content,
        }
    }

    pub fn user_text(text: impl Into<String>) -> Self {
        Self::user(vec![ContentBlock::text(text)])
    }

    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        Self {
            role: Role::Assistant,
            content,
        }
    }
}

/// A content block, in requests and in assembled responses. Thinking and redacted thinking
/// blocks are kept verbatim (with their signature) because the API requires them back
/// unchanged alongside the tool results of the same turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: Value,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: ToolResultContent,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    /// A call of a tool the API runs itself (`web_search`); sent back unchanged.
    ServerToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// What the API's web search returned (results or an error object), kept verbatim:
    /// the API requires it back unchanged, encrypted content included.
    WebSearchToolResult {
        tool_use_id: String,
        content: Value,
    },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    pub fn tool_result(
        tool_use_id: impl Into<String>,
        text: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: ToolResultContent::Text(text.into()),
            is_error,
            cache_control: None,
        }
    }
}

/// `tool_result.content`: a plain string or an array of text, image and document blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<ToolResultBlock>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolResultBlock {
    Text {
        text: String,
    },
    Image {
        source: Value,
    },
    /// A PDF (`source`: base64 data of `application/pdf`).
    Document {
        source: Value,
    },
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `Null` for a server tool, which has a `type` in [`ToolDefinition::extra`] instead.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
    /// A server tool's own fields (`type`, `allowed_domains`, `max_uses`...).
    #[serde(flatten, default)]
    pub extra: serde_json::Map<String, Value>,
}

impl ToolDefinition {
    /// The Messages API's server-side web search (`web_search_20250305`), limited to
    /// `allowed` domains (none: any) and never `blocked` ones.
    pub fn web_search(allowed: &[String], blocked: &[String], max_uses: u32) -> Self {
        let mut extra = serde_json::Map::new();
        extra.insert("type".into(), Value::from("web_search_20250305"));
        if !allowed.is_empty() {
            extra.insert("allowed_domains".into(), Value::from(allowed.to_vec()));
        }
        if !blocked.is_empty() {
            extra.insert("blocked_domains".into(), Value::from(blocked.to_vec()));
        }
        extra.insert("max_uses".into(), Value::from(max_uses));
        Self {
            name: "web_search".into(),
            description: None,
            input_schema: Value::Null,
            cache_control: None,
            extra,
        }
    }
}

/// Extended thinking: `{"type":"enabled","budget_tokens":N}`, `{"type":"adaptive"}` (the
/// model decides how much to think) or `{"type":"disabled"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThinkingConfig {
    Enabled {
        budget_tokens: u32,
        /// `summarized` or `omitted`: whether thinking text comes back (`--thinking-display`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display: Option<String>,
    },
    Adaptive {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display: Option<String>,
    },
    Disabled,
}

/// The request's `output_config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputConfig {
    /// `low`, `medium`, `high`, `xhigh` or `max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// An advisory token budget for the agentic task: the model sees what remains and
    /// winds down (`--task-budget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_budget: Option<TaskBudget>,
}

/// `output_config.task_budget`: `{"type": "tokens", "total": N}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TaskBudget {
    Tokens { total: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// Why the model stopped. Unknown reasons are kept as `Other` (forward compatible).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    PauseTurn,
    Refusal,
    StopSequence,
    Other(String),
}

impl StopReason {
    pub fn as_str(&self) -> &str {
        match self {
            Self::EndTurn => "end_turn",
            Self::ToolUse => "tool_use",
            Self::MaxTokens => "max_tokens",
            Self::PauseTurn => "pause_turn",
            Self::Refusal => "refusal",
            Self::StopSequence => "stop_sequence",
            Self::Other(other) => other,
        }
    }
}

impl From<&str> for StopReason {
    fn from(value: &str) -> Self {
        match value {
            "end_turn" => Self::EndTurn,
            "tool_use" => Self::ToolUse,
            "max_tokens" => Self::MaxTokens,
            "pause_turn" => Self::PauseTurn,
            "refusal" => Self::Refusal,
            "stop_sequence" => Self::StopSequence,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Self::from(raw.as_ref()))
    }
}

/// Token accounting for one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

/// The complete assistant turn, assembled from the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantMessage {
    pub id: String,
    pub model: String,
    /// Blocks in index order; unknown block types are left out.
    pub content: Vec<ContentBlock>,
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
    pub usage: Usage,
    /// Tool calls whose joined input was not valid JSON. Their `ToolUse` block in `content`
    /// carries `{}` as input (so the turn can still be sent back); the loop answers each with
    /// an `is_error` tool_result built from this error.
    pub tool_input_errors: Vec<crate::model::ToolInputError>,
}

impl AssistantMessage {
    /// The message as it goes back into the conversation.
    pub fn to_message(&self) -> Message {
        Message::assistant(self.content.clone())
    }

    /// The error for a tool call whose input did not parse, if any.
    pub fn tool_input_error(&self, tool_use_id: &str) -> Option<&crate::model::ToolInputError> {
        self.tool_input_errors
            .iter()
            .find(|e| e.tool_use_id == tool_use_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_serialises_exactly_with_none_fields_skipped() {
        let mut req = MessagesRequest::new("m", 1024, vec![Message::user_text("hi")]);
        req.system = vec![SystemBlock::Text {
            text: "sys".into(),
            cache_control: Some(CacheControl::ephemeral()),
        }];
        req.tools = vec![ToolDefinition {
            name: "Read".into(),
            description: Some("reads".into()),
            input_schema: json!({"type": "object"}),
            cache_control: None,
            extra: Default::default(),
        }];
        req.messages
            .push(Message::user(vec![ContentBlock::tool_result(
                "t1", "boom", true,
            )]));
        let got = serde_json::to_value(&req).unwrap();
        let want = json!({
            "model": "m",
            "max_tokens": 1024,
            "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": true}
                ]}
            ],
            "tools": [{"name": "Read", "description": "reads", "input_schema": {"type": "object"}}],
            "stream": true
        });
        assert_eq!(got, want);
    }

    #[test]
    fn thinking_config_and_blocks_round_trip() {
        let cfg = ThinkingConfig::Enabled {
            budget_tokens: 2048,
            display: None,
        };
        assert_eq!(
            serde_json::to_value(&cfg).unwrap(),
            json!({"type":"enabled","budget_tokens":2048})
        );
        let blocks = vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: "sig".into(),
            },
            ContentBlock::RedactedThinking {
                data: "opaque".into(),
            },
            ContentBlock::ToolUse {
                id: "t".into(),
                name: "Bash".into(),
                input: json!({"command":"ls"}),
            },
        ];
        let text = serde_json::to_string(&blocks).unwrap();
        let back: Vec<ContentBlock> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, blocks);
    }

    #[test]
    fn stop_reason_keeps_unknown_values() {
        let r: StopReason = serde_json::from_str("\"model_context_window_exceeded\"").unwrap();
        assert_eq!(r, StopReason::Other("model_context_window_exceeded".into()));
        assert_eq!(
            serde_json::to_string(&StopReason::ToolUse).unwrap(),
            "\"tool_use\""
        );
    }
}
