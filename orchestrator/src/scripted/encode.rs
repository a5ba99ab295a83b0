//! Encoding a scripted reply as the API streams it: SSE frames, split like the real thing.

use serde_json::{Value, json};

use super::script::{Reply, ReplyBlock};

/// How finely a reply is cut up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunking {
    /// Characters per `text_delta` / `thinking_delta`.
    pub text_chars: usize,
    /// Bytes per `input_json_delta` fragment (rounded up to a character boundary: the
    /// fragment is a JSON string). Fragments split escapes and tokens anywhere.
    pub json_bytes: usize,
    /// A `ping` after every this many delta events (0: only the one after message_start).
    pub ping_every: usize,
    /// HTTP body write sizes cycle through 1..=transport_bytes, each written and flushed on
    /// its own, so the client sees chunk boundaries everywhere, inside UTF-8 characters
    /// and CRLFs included. 0: the whole body in one write.
    pub transport_bytes: usize,
}

impl Default for Chunking {
    fn default() -> Self {
        Self {
            text_chars: 5,
            json_bytes: 7,
            ping_every: 4,
            transport_bytes: 13,
        }
    }
}

/// The SSE frames of one reply, with where each block ends.
#[derive(Debug, Clone, Default)]
pub struct Frames {
    pub frames: Vec<Vec<u8>>,
    /// `block_ends[i]`: number of frames up to and including block i's `content_block_stop`.
    pub block_ends: Vec<usize>,
    /// Frame indices of the first tool call's `input_json_delta`s.
    pub first_tool_deltas: Vec<usize>,
}

impl Frames {
    pub fn concat(&self, upto: usize) -> Vec<u8> {
        self.frames[..upto.min(self.frames.len())].concat()
    }

    pub fn all(&self) -> Vec<u8> {
        self.frames.concat()
    }
}

/// One SSE frame: `event: TYPE\ndata: JSON\n\n`.
pub fn frame(data: &Value) -> Vec<u8> {
    let kind = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    format!("event: {kind}\ndata: {data}\n\n").into_bytes()
}

/// The error frame the API sends mid-stream.
pub fn error_frame(error_type: &str, message: &str) -> Vec<u8> {
    frame(&json!({"type": "error", "error": {"type": error_type, "message": message}}))
}

/// The whole stream of `reply`.
pub fn encode_reply(reply: &Reply, id: &str, model: &str, chunking: &Chunking) -> Vec<u8> {
    reply_frames(reply, id, model, chunking).all()
}

/// Frames of `reply`, from `message_start` to `message_stop`.
pub fn reply_frames(reply: &Reply, id: &str, model: &str, chunking: &Chunking) -> Frames {
    let mut enc = Encoder {
        out: Frames::default(),
        chunking,
        deltas: 0,
    };
    let usage = reply.usage;
    enc.push(json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "output_tokens": 1
        }
    }}));
    enc.push(json!({"type": "ping"}));
    for (index, block) in reply.blocks.iter().enumerate() {
        enc.block(index, block);
        let end = enc.out.frames.len();
        enc.out.block_ends.push(end);
    }
    enc.push(json!({"type": "message_delta",
        "delta": {"stop_reason": reply.stop_reason, "stop_sequence": reply.stop_sequence},
        "usage": {"output_tokens": usage.output_tokens}}));
    enc.push(json!({"type": "message_stop"}));
    enc.out
}

struct Encoder<'a> {
    out: Frames,
    chunking: &'a Chunking,
    deltas: usize,
}

impl Encoder<'_> {
    fn push(&mut self, data: Value) {
        self.out.frames.push(frame(&data));
    }

    fn delta(&mut self, index: usize, delta: Value) {
        self.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        self.deltas += 1;
        if self.chunking.ping_every > 0 && self.deltas.is_multiple_of(self.chunking.ping_every) {
            self.push(json!({"type": "ping"}));
        }
    }

    fn block(&mut self, index: usize, block: &ReplyBlock) {
        match block {
            ReplyBlock::Text(text) => {
                self.start(index, json!({"type": "text", "text": ""}));
                for piece in char_pieces(text, self.chunking.text_chars) {
                    self.delta(index, json!({"type": "text_delta", "text": piece}));
                }
            }
            ReplyBlock::ToolUse { id, name, input } => {
                self.start(
                    index,
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                );
                let first_tool = self.out.first_tool_deltas.is_empty();
                let json = input.to_string();
                // The real API opens with an empty fragment.
                let fragments =
                    std::iter::once("").chain(byte_pieces(&json, self.chunking.json_bytes));
                for fragment in fragments {
                    if first_tool {
                        self.out.first_tool_deltas.push(self.out.frames.len());
                    }
                    self.delta(
                        index,
                        json!({"type": "input_json_delta", "partial_json": fragment}),
                    );
                }
            }
            ReplyBlock::Thinking {
                thinking,
                signature,
            } => {
                self.start(
                    index,
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                );
                for piece in char_pieces(thinking, self.chunking.text_chars) {
                    self.delta(index, json!({"type": "thinking_delta", "thinking": piece}));
                }
                self.delta(
                    index,
                    json!({"type": "signature_delta", "signature": signature}),
                );
            }
            ReplyBlock::RedactedThinking(data) => {
                self.start(index, json!({"type": "redacted_thinking", "data": data}));
            }
            ReplyBlock::ServerToolUse { id, name, input } => {
                self.start(
                    index,
                    json!({"type": "server_tool_use", "id": id, "name": name, "input": {}}),
                );
                let json = input.to_string();
                for fragment in byte_pieces(&json, self.chunking.json_bytes) {
                    self.delta(
                        index,
                        json!({"type": "input_json_delta", "partial_json": fragment}),
                    );
                }
            }
            ReplyBlock::WebSearchToolResult {
                tool_use_id,
                content,
            } => {
                self.start(
                    index,
                    json!({"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": content}),
                );
            }
        }
        self.push(json!({"type": "content_block_stop", "index": index}));
    }

    fn start(&mut self, index: usize, block: Value) {
        self.push(json!({"type": "content_block_start", "index": index, "content_block": block}));
    }
}

/// Pieces of `n` characters (at least one).
pub fn char_pieces(text: &str, n: usize) -> Vec<&str> {
    let n = n.max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    for (count, (pos, _)) in text.char_indices().enumerate() {
        if count > 0 && count.is_multiple_of(n) {
            pieces.push(&text[start..pos]);
            start = pos;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Pieces of about `n` bytes, each end moved forward to the next character boundary.
pub fn byte_pieces(text: &str, n: usize) -> Vec<&str> {
    let n = n.max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + n).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(&text[start..end]);
        start = end;
    }
    pieces
}

/// Splits a body into transport writes of sizes 1, 2, ..., `max`, 1, 2, ...
pub fn transport_pieces(body: &[u8], max: usize) -> Vec<bytes::Bytes> {
    if max == 0 {
        return vec![bytes::Bytes::copy_from_slice(body)];
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut size = 1;
    while start < body.len() {
        let end = (start + size).min(body.len());
        pieces.push(bytes::Bytes::copy_from_slice(&body[start..end]));
        start = end;
        size = size % max + 1;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_text_exactly() {
        let text = "héllo 世界 🦀 done";
        assert_eq!(char_pieces(text, 3).concat(), text);
        assert_eq!(char_pieces(text, 3)[0], "hél");
        for n in 1..8 {
            assert_eq!(byte_pieces(text, n).concat(), text);
        }
        let body = text.as_bytes();
        let joined: Vec<u8> = transport_pieces(body, 4)
            .iter()
            .flat_map(|b| b.to_vec())
            .collect();
        assert_eq!(joined, body);
    }

    #[test]
    fn frames_record_block_ends_and_tool_deltas() {
        let reply = Reply::text("hi").with_tool_use("t", "Bash", json!({"command": "ls"}));
        let frames = reply_frames(&reply, "m", "model", &Chunking::default());
        assert_eq!(frames.block_ends.len(), 2);
        assert!(!frames.first_tool_deltas.is_empty());
        let text = String::from_utf8(frames.all()).unwrap();
        assert!(text.starts_with("event: message_start\ndata: "));
        assert!(text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    }
}
