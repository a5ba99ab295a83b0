//! What the scripted model plays: turns made of replies and faults.

use serde_json::Value;

/// One content block of a scripted reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyBlock {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking(String),
    /// A `server_tool_use` block, its input streamed as `input_json_delta` fragments as
    /// the API does.
    ServerToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// A `web_search_tool_result` block, whole in its `content_block_start`.
    WebSearchToolResult {
        tool_use_id: String,
        content: Value,
    },
}

/// Token counts reported in `message_start` (input, cache) and `message_delta` (output).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplyUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

/// A successful streamed reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// `None`: `msg_scripted_<request number>`.
    pub id: Option<String>,
    /// `None`: echo the request's `model`.
    pub model: Option<String>,
    pub blocks: Vec<ReplyBlock>,
    pub stop_reason: String,
    pub stop_sequence: Option<String>,
    pub usage: ReplyUsage,
}

impl Default for Reply {
    fn default() -> Self {
        Self {
            id: None,
            model: None,
            blocks: Vec::new(),
            stop_reason: "end_turn".into(),
            stop_sequence: None,
            usage: ReplyUsage {
                input_tokens: 10,
                output_tokens: 5,
                ..Default::default()
            },
        }
    }
}

impl Reply {
    /// A text-only reply ending the turn.
    pub fn text(text: impl Into<String>) -> Self {
        Self::default().with_text(text)
    }

    /// A reply calling one tool (`stop_reason: tool_use`).
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::default().with_tool_use(id, name, input)
    }

    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(ReplyBlock::Text(text.into()));
        self
    }

    /// Adds a tool call and sets `stop_reason: tool_use`.
    pub fn with_tool_use(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Self {
        self.blocks.push(ReplyBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        });
        self.stop_reason = "tool_use".into();
        self
    }

    pub fn with_thinking(
        mut self,
        thinking: impl Into<String>,
        signature: impl Into<String>,
    ) -> Self {
        let (thinking, signature) = (thinking.into(), signature.into());
        self.blocks.push(ReplyBlock::Thinking {
            thinking,
            signature,
        });
        self
    }

    pub fn with_redacted_thinking(mut self, data: impl Into<String>) -> Self {
        self.blocks.push(ReplyBlock::RedactedThinking(data.into()));
        self
    }

    /// Adds a server-side web search: its `server_tool_use` (id `id`, input `{query}`)
    /// and the `web_search_tool_result` holding `results`.
    pub fn with_web_search(mut self, id: impl Into<String>, query: &str, results: Value) -> Self {
        let id = id.into();
        self.blocks.push(ReplyBlock::ServerToolUse {
            id: id.clone(),
            name: "web_search".into(),
            input: serde_json::json!({"query": query}),
        });
        self.blocks.push(ReplyBlock::WebSearchToolResult {
            tool_use_id: id,
            content: results,
        });
        self
    }

    pub fn stop(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = reason.into();
        self
    }

    pub fn usage(mut self, usage: ReplyUsage) -> Self {
        self.usage = usage;
        self
    }

    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// A failure the scripted model plays instead of (or in the middle of) a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// HTTP 429 `rate_limit_error` with optional `retry-after` / `retry-after-ms` values.
    RateLimited {
        retry_after: Option<String>,
        retry_after_ms: Option<String>,
    },
    /// HTTP 529 `overloaded_error`.
    Overloaded,
    /// HTTP 500 `api_error`.
    ServerError,
    /// Any status with a JSON error body (400, 401, 403, 404, 413...).
    Status {
        status: u16,
        error_type: String,
        message: String,
    },
    /// Streams `message_start` and the first `after_blocks` blocks of `reply`, then an
    /// `event: error` with `error_type` (e.g. `overloaded_error`), then ends the body.
    ErrorEvent {
        reply: Reply,
        after_blocks: usize,
        error_type: String,
        message: String,
    },
    /// Streams `reply` up to the middle of its first tool call's input (cutting one event
    /// in half) and then drops the connection.
    CutInToolInput { reply: Reply },
}

/// One model call's worth of script.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    Reply(Reply),
    Fault(Fault),
}

impl Turn {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Reply(Reply::text(text))
    }

    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::Reply(Reply::tool_use(id, name, input))
    }

    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self::Fault(Fault::RateLimited {
            retry_after: Some(retry_after_secs.to_string()),
            retry_after_ms: None,
        })
    }

    pub fn rate_limited_ms(retry_after_ms: u64) -> Self {
        Self::Fault(Fault::RateLimited {
            retry_after: None,
            retry_after_ms: Some(retry_after_ms.to_string()),
        })
    }

    pub fn overloaded() -> Self {
        Self::Fault(Fault::Overloaded)
    }

    pub fn server_error() -> Self {
        Self::Fault(Fault::ServerError)
    }

    pub fn status(status: u16, error_type: impl Into<String>, message: impl Into<String>) -> Self {
        let (error_type, message) = (error_type.into(), message.into());
        Self::Fault(Fault::Status {
            status,
            error_type,
            message,
        })
    }

    /// `reply`'s first `after_blocks` blocks, then `event: error` overloaded_error.
    pub fn overloaded_mid_stream(reply: Reply, after_blocks: usize) -> Self {
        Self::Fault(Fault::ErrorEvent {
            reply,
            after_blocks,
            error_type: "overloaded_error".into(),
            message: "Overloaded".into(),
        })
    }

    pub fn cut_in_tool_input(reply: Reply) -> Self {
        Self::Fault(Fault::CutInToolInput { reply })
    }
}
