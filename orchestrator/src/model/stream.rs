//! Assembling one streamed assistant message from its server-sent events.
//!
//! [`MessageAssembler`] consumes the decoded events (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`, `ping`, `error`) and keeps every block verbatim: text,
//! tool calls (their `input_json_delta` fragments joined and parsed at `content_block_stop`),
//! thinking with its signature, redacted thinking, and the server tool blocks
//! (`server_tool_use`, `web_search_tool_result`) the API requires back unchanged. Unknown event, block and delta types are
//! ignored so a newer API does not break us. [`StreamDecoder`] puts the SSE parser in front.

use serde_json::Value;

use super::error::{ModelError, ToolInputError};
use super::sse::{SseEvent, SseParser};
use super::types::{AssistantMessage, ContentBlock, StopReason, Usage};
use super::wire::{self, WireBlock, WireDelta, WireEvent, WireUsage};

/// What the stream yields to its consumer.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta {
        index: usize,
        text: String,
    },
    ThinkingDelta {
        index: usize,
        thinking: String,
    },
    ToolUseStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolInputDelta {
        index: usize,
        partial_json: String,
    },
    /// The connection failed after deltas were yielded and the request was sent again:
    /// discard every delta received since the previous `Restarted` (or the start). The
    /// final `Message` only ever holds the last, complete attempt.
    Restarted {
        attempt: u32,
        reason: String,
    },
    /// The API's event as it came (`message_start`, `content_block_delta`, ...; no pings),
    /// when the decoder was asked for them ([`StreamDecoder::with_raw_events`]): what a
    /// client asking for partial messages is shown.
    Raw(Value),
    /// The complete message; always the last event of a successful stream.
    Message(AssistantMessage),
}

enum BlockState {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        start_input: Option<Value>,
        /// A `server_tool_use` (the API runs it; the loop never does).
        server: bool,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted {
        data: String,
    },
    Done(ContentBlock),
    Ignored,
}

struct Block {
    index: usize,
    state: BlockState,
}

/// Builds one [`AssistantMessage`] from decoded events.
pub struct MessageAssembler {
    emit_deltas: bool,
    raw_events: bool,
    started: Option<(String, String)>,
    usage: Usage,
    blocks: Vec<Block>,
    stop_reason: Option<StopReason>,
    stop_sequence: Option<String>,
    tool_input_errors: Vec<ToolInputError>,
    finished: bool,
}

impl MessageAssembler {
    /// `emit_deltas`: also yield per-delta events (for live output), not only the message.
    pub fn new(emit_deltas: bool) -> Self {
        Self {
            emit_deltas,
            raw_events: false,
            started: None,
            usage: Usage::default(),
            blocks: Vec::new(),
            stop_reason: None,
            stop_sequence: None,
            tool_input_errors: Vec::new(),
            finished: false,
        }
    }

    /// True once `message_stop` has produced the message.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Decodes one SSE event's JSON payload and applies it.
    pub fn handle_sse(
        &mut self,
        event: SseEvent<'_>,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if self.raw_events && !matches!(event.event, "ping" | "error") && !self.finished {
            // The client sees the event as the API sent it; one it cannot parse is
            // left to the decoder below to report.
            if let Ok(raw) = serde_json::from_slice::<Value>(event.data) {
                out.push(StreamEvent::Raw(raw));
            }
        }
        match wire::decode(event.data) {
            Ok(Ok(wire)) => self.apply(wire, out),
            Ok(Err(missing)) => Err(ModelError::Protocol(format!(
                "{} event without {missing}",
                event.event
            ))),
            // Forward compatible: a payload we cannot read under a name we do not know is
            // somebody else's extension, not a broken stream.
            Err(_) if !event.event.is_empty() && !wire::is_known(event.event) => Ok(()),
            Err(source) => Err(ModelError::DecodeEvent {
                event: event.event.to_owned(),
                source,
            }),
        }
    }

    fn apply(
        &mut self,
        event: WireEvent<'_>,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if self.finished {
            return Ok(());
        }
        match event {
            WireEvent::MessageStart { message } => {
                if let Some(usage) = &message.usage {
                    merge_usage(&mut self.usage, usage);
                }
                self.started = Some((message.id, message.model));
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, out)?,
            WireEvent::ContentBlockDelta { index, delta } => self.delta(index, delta, out)?,
            WireEvent::ContentBlockStop { index } => {
                let block = self.block_mut(index)?;
                let state = std::mem::replace(&mut block.state, BlockState::Ignored);
                let done = finish_block(state, &mut self.tool_input_errors);
                self.block_mut(index)?.state = done;
            }
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if delta.stop_sequence.is_some() {
                    self.stop_sequence = delta.stop_sequence;
                }
                if let Some(usage) = &usage {
                    merge_usage(&mut self.usage, usage);
                }
            }
            WireEvent::MessageStop => out.push(StreamEvent::Message(self.finish()?)),
            WireEvent::Error { error } => {
                return Err(ModelError::StreamErrorEvent {
                    error_type: error.kind,
                    message: error.message,
                });
            }
            WireEvent::Ping | WireEvent::Unknown => {}
        }
        Ok(())
    }

    fn start_block(
        &mut self,
        index: usize,
        block: WireBlock<'_>,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if self.blocks.iter().any(|b| b.index == index) {
            return Err(ModelError::Protocol(format!(
                "content block {index} started twice"
            )));
        }
        let state = match block {
            WireBlock::Text { text } => BlockState::Text(text.into_owned()),
            WireBlock::ToolUse { id, name, input } => {
                if self.emit_deltas {
                    out.push(StreamEvent::ToolUseStart {
                        index,
                        id: id.clone(),
                        name: name.clone(),
                    });
                }
                BlockState::ToolUse {
                    id,
                    name,
                    json: String::new(),
                    start_input: input,
                    server: false,
                }
            }
            WireBlock::ServerToolUse { id, name, input } => BlockState::ToolUse {
                id,
                name,
                json: String::new(),
                start_input: input,
                server: true,
            },
            WireBlock::WebSearchToolResult {
                tool_use_id,
                content,
            } => BlockState::Done(ContentBlock::WebSearchToolResult {
                tool_use_id,
                content,
            }),
            WireBlock::Thinking {
                thinking,
                signature,
            } => BlockState::Thinking {
                thinking: thinking.into_owned(),
                signature: signature.into_owned(),
            },
            WireBlock::RedactedThinking { data } => BlockState::Redacted { data },
            WireBlock::Unknown => BlockState::Ignored,
        };
        self.blocks.push(Block { index, state });
        Ok(())
    }

    fn delta(
        &mut self,
        index: usize,
        delta: WireDelta<'_>,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        let emit = self.emit_deltas;
        let block = self.block_mut(index)?;
        match (&mut block.state, delta) {
            (BlockState::Text(text), WireDelta::TextDelta { text: piece }) => {
                text.push_str(&piece);
                if emit {
                    out.push(StreamEvent::TextDelta {
                        index,
                        text: piece.into_owned(),
                    });
                }
            }
            (
                BlockState::ToolUse { json, server, .. },
                WireDelta::InputJsonDelta { partial_json },
            ) => {
                json.push_str(&partial_json);
                if emit && !*server {
                    let partial_json = partial_json.into_owned();
                    out.push(StreamEvent::ToolInputDelta {
                        index,
                        partial_json,
                    });
                }
            }
            (
                BlockState::Thinking { thinking, .. },
                WireDelta::ThinkingDelta { thinking: piece },
            ) => {
                thinking.push_str(&piece);
                if emit {
                    out.push(StreamEvent::ThinkingDelta {
                        index,
                        thinking: piece.into_owned(),
                    });
                }
            }
            (
                BlockState::Thinking { signature, .. },
                WireDelta::SignatureDelta { signature: s },
            ) => {
                signature.push_str(&s);
            }
            (_, WireDelta::Unknown) | (BlockState::Ignored, _) => {}
            (BlockState::Done(_), _) => {
                return Err(ModelError::Protocol(format!(
                    "delta for stopped block {index}"
                )));
            }
            _ => {
                return Err(ModelError::Protocol(format!(
                    "delta type does not match content block {index}"
                )));
            }
        }
        Ok(())
    }

    fn block_mut(&mut self, index: usize) -> Result<&mut Block, ModelError> {
        // Blocks arrive in order and the current one is last: search from the end.
        self.blocks
            .iter_mut()
            .rev()
            .find(|b| b.index == index)
            .ok_or_else(|| ModelError::Protocol(format!("event for unknown content block {index}")))
    }

    fn finish(&mut self) -> Result<AssistantMessage, ModelError> {
        let Some((id, model)) = self.started.take() else {
            return Err(ModelError::Protocol(
                "message_stop before message_start".into(),
            ));
        };
        self.finished = true;
        let mut blocks = std::mem::take(&mut self.blocks);
        blocks.sort_by_key(|b| b.index);
        let mut content = Vec::with_capacity(blocks.len());
        for block in blocks {
            // A block never stopped is finished as it stands rather than lost.
            if let BlockState::Done(done) = finish_block(block.state, &mut self.tool_input_errors) {
                content.push(done);
            }
        }
        Ok(AssistantMessage {
            id,
            model,
            content,
            stop_reason: self.stop_reason.take(),
            stop_sequence: self.stop_sequence.take(),
            usage: self.usage,
            tool_input_errors: std::mem::take(&mut self.tool_input_errors),
        })
    }
}

fn finish_block(state: BlockState, errors: &mut Vec<ToolInputError>) -> BlockState {
    let block = match state {
        BlockState::Text(text) => ContentBlock::Text {
            text,
            cache_control: None,
        },
        BlockState::ToolUse {
            id,
            name,
            json,
            start_input,
            server: true,
        } => {
            // The API already ran it: whatever input it reports is sent back as it came.
            let input = parse_tool_input(&json, start_input.clone()).unwrap_or_else(|_| {
                start_input.unwrap_or_else(|| Value::Object(Default::default()))
            });
            ContentBlock::ServerToolUse { id, name, input }
        }
        BlockState::ToolUse {
            id,
            name,
            json,
            start_input,
            server: false,
        } => {
            let input = match parse_tool_input(&json, start_input) {
                Ok(input) => input,
                Err(reason) => {
                    errors.push(ToolInputError {
                        tool_use_id: id.clone(),
                        tool_name: name.clone(),
                        raw_input: json,
                        reason,
                    });
                    Value::Object(serde_json::Map::new())
                }
            };
            ContentBlock::ToolUse { id, name, input }
        }
        BlockState::Thinking {
            thinking,
            signature,
        } => ContentBlock::Thinking {
            thinking,
            signature,
        },
        BlockState::Redacted { data } => ContentBlock::RedactedThinking { data },
        other @ (BlockState::Done(_) | BlockState::Ignored) => return other,
    };
    BlockState::Done(block)
}

/// No fragments: the input from `content_block_start` (normally `{}`), else `{}`. Fragments
/// must join into a JSON object: tool inputs are objects, anything else is an error the
/// model gets to see.
fn parse_tool_input(json: &str, start_input: Option<Value>) -> Result<Value, String> {
    if json.trim().is_empty() {
        return Ok(start_input.unwrap_or_else(|| Value::Object(serde_json::Map::new())));
    }
    match serde_json::from_str::<Value>(json) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("expected a json object".to_owned()),
        Err(err) => Err(err.to_string()),
    }
}

fn merge_usage(usage: &mut Usage, wire: &WireUsage) {
    let fields = [
        (&mut usage.input_tokens, wire.input_tokens),
        (&mut usage.output_tokens, wire.output_tokens),
        (
            &mut usage.cache_read_input_tokens,
            wire.cache_read_input_tokens,
        ),
        (
            &mut usage.cache_creation_input_tokens,
            wire.cache_creation_input_tokens,
        ),
    ];
    for (slot, value) in fields {
        if let Some(value) = value {
            *slot = value;
        }
    }
}

/// SSE parser plus assembler: feed raw response bytes, get [`StreamEvent`]s.
pub struct StreamDecoder {
    sse: SseParser,
    assembler: MessageAssembler,
}

impl StreamDecoder {
    pub fn new(emit_deltas: bool) -> Self {
        Self {
            sse: SseParser::new(),
            assembler: MessageAssembler::new(emit_deltas),
        }
    }

    /// Also yields every API event as it came ([`StreamEvent::Raw`]), before what it
    /// decodes to.
    pub fn with_raw_events(mut self) -> Self {
        self.assembler.raw_events = true;
        self
    }

    /// Feeds one network chunk (split anywhere); appends produced events to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), ModelError> {
        let Self { sse, assembler } = self;
        sse.feed(chunk, |event| assembler.handle_sse(event, out))
    }

    /// True once the message is complete (`message_stop` seen).
    pub fn is_finished(&self) -> bool {
        self.assembler.is_finished()
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
