use serde_json::{Value, json};

use super::*;

fn sse(data: &Value) -> String {
    format!(
        "event: {}\ndata: {}\n\n",
        data["type"].as_str().unwrap(),
        data
    )
}

fn start() -> String {
    sse(&json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 25, "output_tokens": 1, "cache_read_input_tokens": 7}
    }}))
}

fn stop(reason: &str) -> String {
    sse(&json!({"type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": null},
        "usage": {"output_tokens": 42}}))
        + &sse(&json!({"type": "message_stop"}))
}

fn tool_block(index: usize, id: &str, fragments: &[&str]) -> String {
    let mut out = sse(&json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": "Bash", "input": {}}}));
    for fragment in fragments {
        out += &sse(&json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": fragment}}));
    }
    out + &sse(&json!({"type": "content_block_stop", "index": index}))
}

fn decode(chunks: &[&[u8]], emit: bool) -> Result<Vec<StreamEvent>, ModelError> {
    let mut decoder = StreamDecoder::new(emit);
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, &mut out)?;
    }
    Ok(out)
}

fn message(text: &str) -> AssistantMessage {
    let events = decode(&[text.as_bytes()], false).unwrap();
    assert!(
        matches!(events.as_slice(), [StreamEvent::Message(_)]),
        "{events:?}"
    );
    match events.into_iter().next() {
        Some(StreamEvent::Message(m)) => m,
        _ => unreachable!(),
    }
}

const INPUT: &str = r#"{"command":"echo \"h\u00e9llo\" 世界 🦀","description":"a\\b\nc"}"#;

fn full_stream() -> String {
    let mut text = start();
    text += &sse(&json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
    text += &sse(&json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "Let me "}}));
    text += ": keep-alive comment\n";
    text += &sse(&json!({"type": "ping"}));
    text += &sse(&json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "think ✓"}}));
    text += &sse(&json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}));
    text += &sse(&json!({"type": "content_block_stop", "index": 0}));
    text += &sse(&json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va=="}}));
    text += &sse(&json!({"type": "content_block_stop", "index": 1}));
    text += &sse(&json!({"type": "content_block_start", "index": 2,
        "content_block": {"type": "text", "text": ""}}));
    for piece in ["Run", "ning ", "ls ✨"] {
        text += &sse(&json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "text_delta", "text": piece}}));
    }
    text += &sse(&json!({"type": "content_block_stop", "index": 2}));
    let (a, b) = INPUT.split_at(INPUT.find("世").unwrap() + 3);
    text += &tool_block(3, "toolu_1", &[a, b]);
    text + &stop("tool_use")
}

fn expected_full() -> AssistantMessage {
    AssistantMessage {
        id: "msg_1".into(),
        model: "claude-test".into(),
        content: vec![
            ContentBlock::Thinking {
                thinking: "Let me think ✓".into(),
                signature: "EqQBCgIYAhIM".into(),
            },
            ContentBlock::RedactedThinking {
                data: "EmwKAhgBEgy3va==".into(),
            },
            ContentBlock::text("Running ls ✨"),
            ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "Bash".into(),
                input: serde_json::from_str(INPUT).unwrap(),
            },
        ],
        stop_reason: Some(StopReason::ToolUse),
        stop_sequence: None,
        usage: Usage {
            input_tokens: 25,
            output_tokens: 42,
            cache_read_input_tokens: 7,
            cache_creation_input_tokens: 0,
        },
        tool_input_errors: vec![],
    }
}

#[test]
fn assembles_every_block_kind() {
    assert_eq!(message(&full_stream()), expected_full());
}

#[test]
fn transport_split_at_every_byte_gives_the_same_message() {
    let text = full_stream();
    let bytes = text.as_bytes();
    let want = decode(&[bytes], true).unwrap();
    for split in 0..=bytes.len() {
        let (a, b) = bytes.split_at(split);
        assert_eq!(decode(&[a, b], true).unwrap(), want, "split at {split}");
    }
    let singles: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(decode(&singles, true).unwrap(), want);
}

#[test]
fn tool_input_fragments_split_at_every_char_boundary() {
    let want: Value = serde_json::from_str(INPUT).unwrap();
    for split in (0..=INPUT.len()).filter(|&i| INPUT.is_char_boundary(i)) {
        let (a, b) = INPUT.split_at(split);
        let msg = message(&(start() + &tool_block(0, "t", &[a, b]) + &stop("tool_use")));
        let ContentBlock::ToolUse { input, .. } = &msg.content[0] else {
            panic!("{msg:?}")
        };
        assert_eq!(input, &want, "split at {split}");
    }
}

#[test]
fn empty_tool_input_is_an_empty_object() {
    let msg = message(&(start() + &tool_block(0, "t", &[]) + &stop("tool_use")));
    let block = ContentBlock::ToolUse {
        id: "t".into(),
        name: "Bash".into(),
        input: json!({}),
    };
    assert_eq!(msg.content, vec![block]);
    assert!(msg.tool_input_errors.is_empty());
}

#[test]
fn invalid_tool_json_is_a_typed_error_not_a_panic() {
    let text = start()
        + &tool_block(0, "bad", &[r#"{"command": "ls"#])
        + &tool_block(1, "arr", &["[1,2]"])
        + &tool_block(2, "ok", &[r#"{"command":"pwd"}"#])
        + &stop("tool_use");
    let msg = message(&text);
    assert_eq!(msg.content.len(), 3);
    assert_eq!(
        msg.content[0],
        ContentBlock::ToolUse {
            id: "bad".into(),
            name: "Bash".into(),
            input: json!({})
        }
    );
    let errors: Vec<(&str, &str)> = msg
        .tool_input_errors
        .iter()
        .map(|e| (e.tool_use_id.as_str(), e.raw_input.as_str()))
        .collect();
    assert_eq!(
        errors,
        vec![("bad", r#"{"command": "ls"#), ("arr", "[1,2]")]
    );
    assert!(
        msg.tool_input_error("bad")
            .unwrap()
            .to_string()
            .contains("not valid json")
    );
    assert!(msg.tool_input_error("ok").is_none());
}

#[test]
fn unknown_events_blocks_and_deltas_are_ignored() {
    let mut text = start();
    text += &sse(&json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "code_interpreter_call", "id": "s", "input": {}}}));
    text += &sse(&json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "{\"q\":"}}));
    text += &sse(&json!({"type": "content_block_stop", "index": 0}));
    text += &sse(&json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "text", "text": "hi"}}));
    text += &sse(&json!({"type": "content_block_delta", "index": 1,
        "delta": {"type": "citations_delta", "citation": {"x": 1}}}));
    text += &sse(&json!({"type": "content_block_stop", "index": 1}));
    text += &sse(&json!({"type": "brand_new_event", "stuff": [1, 2]}));
    text += "event: weird\ndata: this is not json\n\n";
    text += &stop("end_turn");
    let msg = message(&text);
    assert_eq!(msg.content, vec![ContentBlock::text("hi")]);
    assert_eq!(msg.stop_reason, Some(StopReason::EndTurn));
}

#[test]
fn deltas_are_emitted_in_order_when_asked() {
    let text = start() + &tool_block(0, "t", &["{\"a\"", ":1}"]) + &stop("tool_use");
    let events = decode(&[text.as_bytes()], true).unwrap();
    let (last, deltas) = events.split_last().unwrap();
    assert!(matches!(last, StreamEvent::Message(_)));
    assert_eq!(
        deltas,
        &[
            StreamEvent::ToolUseStart {
                index: 0,
                id: "t".into(),
                name: "Bash".into()
            },
            StreamEvent::ToolInputDelta {
                index: 0,
                partial_json: "{\"a\"".into()
            },
            StreamEvent::ToolInputDelta {
                index: 0,
                partial_json: ":1}".into()
            },
        ]
    );
}

#[test]
fn error_event_mid_stream_is_typed_and_retryable() {
    let text = start()
        + &sse(
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
    let err = decode(&[text.as_bytes()], true).unwrap_err();
    assert!(
        matches!(&err, ModelError::StreamErrorEvent { error_type, message }
        if error_type == "overloaded_error" && message == "Overloaded")
    );
    assert!(err.is_retryable());
    let text =
        sse(&json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}));
    assert!(!decode(&[text.as_bytes()], true).unwrap_err().is_retryable());
}

#[test]
fn malformed_known_event_and_protocol_violations_are_errors() {
    let text = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\n\n";
    assert!(matches!(
        decode(&[text.as_bytes()], true),
        Err(ModelError::DecodeEvent { .. })
    ));
    let orphan = start()
        + &sse(&json!({"type": "content_block_delta", "index": 5,
            "delta": {"type": "text_delta", "text": "x"}}));
    assert!(matches!(
        decode(&[orphan.as_bytes()], true),
        Err(ModelError::Protocol(_))
    ));
    let no_start = sse(&json!({"type": "message_stop"}));
    assert!(matches!(
        decode(&[no_start.as_bytes()], true),
        Err(ModelError::Protocol(_))
    ));
}

#[test]
fn thinking_blocks_round_trip_into_the_next_request_unchanged() {
    let msg = message(&full_stream());
    let json = serde_json::to_value(msg.to_message()).unwrap();
    assert_eq!(json["role"], "assistant");
    assert_eq!(
        json["content"][0],
        json!({"type": "thinking", "thinking": "Let me think ✓", "signature": "EqQBCgIYAhIM"})
    );
    assert_eq!(
        json["content"][1],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va=="})
    );
}

#[test]
fn server_tool_blocks_are_kept_and_go_back_unchanged() {
    let result = json!([{"type": "web_search_result", "url": "https://docs.test/a",
        "title": "A", "encrypted_content": "Eq0x==", "page_age": null}]);
    let text = start()
        + &sse(
            &json!({"type": "content_block_start", "index": 0, "content_block":
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
        )
        + &sse(&json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"query\":"}}))
        + &sse(&json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "\"rust\"}"}}))
        + &sse(&json!({"type": "content_block_stop", "index": 0}))
        + &sse(
            &json!({"type": "content_block_start", "index": 1, "content_block":
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": result}}),
        )
        + &sse(&json!({"type": "content_block_stop", "index": 1}))
        + &stop("end_turn");
    let events = decode(&[text.as_bytes()], true).unwrap();
    // Server tool calls are not the loop's to run: no ToolUseStart, no input deltas.
    assert_eq!(events.len(), 1, "{events:?}");
    let msg = message(&text);
    let json = serde_json::to_value(msg.to_message()).unwrap();
    assert_eq!(
        json["content"],
        json!([
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
             "input": {"query": "rust"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": result}
        ])
    );
}

#[test]
fn raw_events_come_as_sent_before_what_they_decode_to_without_pings() {
    let text = start()
        + "event: ping\ndata: {\"type\": \"ping\"}\n\n"
        + &tool_block(0, "toolu_1", &["{\"command\":", "\"ls\"}"])
        + &stop("tool_use");
    let mut decoder = StreamDecoder::new(true).with_raw_events();
    let mut out = Vec::new();
    decoder.feed(text.as_bytes(), &mut out).unwrap();
    let raw: Vec<&Value> = out
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Raw(v) => Some(v),
            _ => None,
        })
        .collect();
    let kinds: Vec<&str> = raw.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(raw[2]["delta"]["partial_json"], "{\"command\":");
    // Each raw event comes before the events it decodes to; the message is still last.
    let first_delta = out
        .iter()
        .position(|e| matches!(e, StreamEvent::ToolInputDelta { .. }))
        .unwrap();
    assert!(matches!(out[first_delta - 1], StreamEvent::Raw(_)));
    assert!(matches!(out.last(), Some(StreamEvent::Message(_))));
    // Without asking, none.
    let plain = decode(&[text.as_bytes()], true).unwrap();
    assert!(!plain.iter().any(|e| matches!(e, StreamEvent::Raw(_))));
}
