//! The model client against the scripted Messages-API server: streaming, retries, faults,
//! auth styles, and the exact request that goes out.

// Helpers shared by the tests panic on failure: that panic is the report we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cordon::model::{
    AssistantMessage, CacheControl, ContentBlock, Credentials, Message, MessagesRequest, Metadata,
    ModelClient, ModelConfig, ModelError, RetryPolicy, StopReason, StreamEvent, SystemBlock,
    ThinkingConfig, ToolDefinition, Usage,
};
use cordon_tests::scripted_model::{Options, Reply, ReplyUsage, ScriptedModel, Turn};
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY: &str = "sk-scripted-test";

fn fast_retries(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: Duration::from_millis(50),
    }
}

fn client_with(model: &ScriptedModel, credentials: Credentials, max_retries: u32) -> ModelClient {
    let mut config = ModelConfig::new(model.base_url(), credentials);
    config.retry = fast_retries(max_retries);
    ModelClient::new(config).unwrap()
}

fn client(model: &ScriptedModel) -> ModelClient {
    client_with(model, Credentials::ApiKey(KEY.into()), 8)
}

fn request() -> MessagesRequest {
    MessagesRequest::new(
        "claude-scripted",
        1024,
        vec![Message::user_text("list files")],
    )
}

/// A reply with every block kind, non-ASCII everywhere.
fn rich_reply() -> Reply {
    Reply::default()
        .with_thinking("The user wants ✓ files; 世界 🦀", "EqQBCgIYAhIM==")
        .with_redacted_thinking("EmwKAhgBEgy3va/opaque")
        .with_text("Listing the files — héllo 🦀")
        .with_tool_use(
            "toolu_01",
            "Bash",
            json!({"command": "ls -la \"dir with spaces\" | grep 'é'", "description": "列出文件\n\\"}),
        )
        .usage(ReplyUsage {
            input_tokens: 120,
            output_tokens: 64,
            cache_read_input_tokens: 100,
            cache_creation_input_tokens: 3,
        })
}

fn expected(reply: &Reply, id: &str) -> AssistantMessage {
    use cordon_tests::scripted_model::ReplyBlock;
    let content = reply
        .blocks
        .iter()
        .map(|block| match block.clone() {
            ReplyBlock::Text(text) => ContentBlock::text(text),
            ReplyBlock::ToolUse { id, name, input } => ContentBlock::ToolUse { id, name, input },
            ReplyBlock::Thinking {
                thinking,
                signature,
            } => ContentBlock::Thinking {
                thinking,
                signature,
            },
            ReplyBlock::RedactedThinking(data) => ContentBlock::RedactedThinking { data },
            ReplyBlock::ServerToolUse { id, name, input } => {
                ContentBlock::ServerToolUse { id, name, input }
            }
            ReplyBlock::WebSearchToolResult {
                tool_use_id,
                content,
            } => ContentBlock::WebSearchToolResult {
                tool_use_id,
                content,
            },
        })
        .collect();
    AssistantMessage {
        id: id.into(),
        model: "claude-scripted".into(),
        content,
        stop_reason: Some(StopReason::from(reply.stop_reason.as_str())),
        stop_sequence: None,
        usage: Usage {
            input_tokens: reply.usage.input_tokens,
            output_tokens: reply.usage.output_tokens,
            cache_read_input_tokens: reply.usage.cache_read_input_tokens,
            cache_creation_input_tokens: reply.usage.cache_creation_input_tokens,
        },
        tool_input_errors: vec![],
    }
}

async fn collect(client: &ModelClient) -> Vec<Result<StreamEvent, ModelError>> {
    client.stream(&request()).await.unwrap().collect().await
}

/// Every event of one streamed request, none of which may be an error.
async fn ok_events(model: &ScriptedModel) -> Vec<StreamEvent> {
    collect(&client(model))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

/// A model whose first answer is `first` (a failure) and whose second is `reply`.
async fn failing_once(first: Turn, reply: &Reply) -> ScriptedModel {
    ScriptedModel::start(vec![first, Turn::Reply(reply.clone())])
        .await
        .unwrap()
}

#[tokio::test]
async fn streams_a_rich_reply_split_into_tiny_writes() {
    let model = ScriptedModel::start(vec![Turn::Reply(rich_reply())])
        .await
        .unwrap();
    let events = ok_events(&model).await;
    let (last, deltas) = events.split_last().unwrap();
    assert_eq!(
        last,
        &StreamEvent::Message(expected(&rich_reply(), "msg_scripted_1"))
    );
    let text: String = deltas
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Listing the files — héllo 🦀");
    assert!(
        deltas
            .iter()
            .any(|e| matches!(e, StreamEvent::ToolUseStart { id, .. } if id == "toolu_01"))
    );
    assert!(
        !deltas
            .iter()
            .any(|e| matches!(e, StreamEvent::Restarted { .. }))
    );
    model.shutdown().await;
}

#[tokio::test]
async fn request_body_and_headers_are_exactly_what_was_sent() {
    let model = ScriptedModel::start(vec![Turn::text("done")])
        .await
        .unwrap();
    let mut req = request();
    req.system = vec![SystemBlock::Text {
        text: "You are terse.".into(),
        cache_control: Some(CacheControl::ephemeral()),
    }];
    req.tools = vec![ToolDefinition {
        name: "Bash".into(),
        description: Some("Runs a command".into()),
        input_schema: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        cache_control: Some(CacheControl::ephemeral()),
        extra: Default::default(),
    }];
    req.messages
        .push(Message::assistant(vec![ContentBlock::ToolUse {
            id: "toolu_0".into(),
            name: "Bash".into(),
            input: json!({"command": "ls"}),
        }]));
    req.messages
        .push(Message::user(vec![ContentBlock::tool_result(
            "toolu_0",
            "no such dir",
            true,
        )]));
    req.thinking = Some(ThinkingConfig::Enabled {
        budget_tokens: 2048,
        display: None,
    });
    req.stop_sequences = vec!["STOP".into()];
    req.metadata = Some(Metadata {
        user_id: Some("u-1".into()),
    });
    req.stream = false;
    let message = client(&model).complete(&req).await.unwrap();
    assert_eq!(message.content, vec![ContentBlock::text("done")]);

    let seen = model.requests();
    assert_eq!(seen.len(), 1);
    let mut sent = req.clone();
    sent.stream = true;
    assert_eq!(seen[0].body, serde_json::to_value(&sent).unwrap());
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].header("x-api-key"), Some(KEY));
    assert_eq!(seen[0].header("authorization"), None);
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen[0].header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn bearer_token_auth_is_sent_as_authorization() {
    let options = Options {
        expected_key: Some(KEY.into()),
        ..Default::default()
    };
    let model = ScriptedModel::start_with(vec![Turn::text("ok")], options)
        .await
        .unwrap();
    let client = client_with(&model, Credentials::BearerToken(KEY.into()), 0);
    client.complete(&request()).await.unwrap();
    let seen = model.requests();
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(seen[0].header("x-api-key"), None);
}

#[tokio::test]
async fn wrong_key_is_401_and_not_retried() {
    let options = Options {
        expected_key: Some(KEY.into()),
        ..Default::default()
    };
    let model = ScriptedModel::start_with(vec![Turn::text("ok")], options)
        .await
        .unwrap();
    let err = client_with(&model, Credentials::ApiKey("sk-wrong".into()), 8)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Api { status: 401, error_type, .. } if error_type == "authentication_error"),
        "{err}"
    );
    assert_eq!(model.requests().len(), 1);
    assert_eq!(model.remaining_turns(), 1);
}

#[tokio::test]
async fn rate_limits_are_retried_honouring_retry_after() {
    let turns = vec![
        Turn::rate_limited(0),
        Turn::rate_limited_ms(10),
        Turn::text("after the wait"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let message = client(&model).complete(&request()).await.unwrap();
    assert_eq!(message.content, vec![ContentBlock::text("after the wait")]);
    assert_eq!(message.id, "msg_scripted_3");
    assert_eq!(model.requests().len(), 3);
}

#[tokio::test]
async fn overloaded_529_and_500_are_retried() {
    let turns = vec![
        Turn::overloaded(),
        Turn::server_error(),
        Turn::Reply(rich_reply()),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let message = client(&model).complete(&request()).await.unwrap();
    assert_eq!(message, expected(&rich_reply(), "msg_scripted_3"));
    let bodies: Vec<_> = model.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 3);
    assert!(
        bodies.iter().all(|b| b == &bodies[0]),
        "every retry resends the same body"
    );
}

#[tokio::test]
async fn exhausted_budget_names_the_last_status_and_message() {
    let model = ScriptedModel::start(vec![Turn::overloaded(); 4])
        .await
        .unwrap();
    let err = client_with(&model, Credentials::ApiKey(KEY.into()), 2)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::RetriesExhausted { attempts: 3, .. }),
        "{err:?}"
    );
    assert_eq!(err.status(), Some(529));
    assert_eq!(err.error_type(), Some("overloaded_error"));
    let text = err.to_string();
    assert!(
        text.contains("529") && text.contains("Overloaded") && text.contains("3 attempts"),
        "{text}"
    );
    assert_eq!(model.requests().len(), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_carry_the_api_error() {
    for (status, error_type) in [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
    ] {
        let turns = vec![
            Turn::status(status, error_type, "scripted refusal"),
            Turn::text("never"),
        ];
        let model = ScriptedModel::start(turns).await.unwrap();
        let err = client(&model).complete(&request()).await.unwrap_err();
        match &err {
            ModelError::Api {
                status: got,
                error_type: kind,
                message,
                ..
            } => {
                assert_eq!(
                    (*got, kind.as_str(), message.as_str()),
                    (status, error_type, "scripted refusal")
                );
            }
            other => panic!("{status}: {other:?}"),
        }
        assert!(!err.is_retryable());
        assert_eq!(model.requests().len(), 1, "{status} must not be retried");
    }
}

#[tokio::test]
async fn mid_stream_overload_before_any_delta_restarts_silently() {
    let reply = rich_reply();
    let model = failing_once(Turn::overloaded_mid_stream(reply.clone(), 0), &reply).await;
    let events = ok_events(&model).await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::Restarted { .. }))
    );
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Message(expected(&reply, "msg_scripted_2")))
    );
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn mid_stream_overload_after_deltas_restarts_with_a_marker() {
    let reply = rich_reply();
    let model = failing_once(Turn::overloaded_mid_stream(reply.clone(), 3), &reply).await;
    let events = ok_events(&model).await;
    let marker = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Restarted { .. }))
        .expect("a restart marker");
    assert!(
        matches!(&events[marker], StreamEvent::Restarted { attempt: 1, reason } if reason.contains("overloaded_error"))
    );
    assert!(
        events[..marker]
            .iter()
            .any(|e| matches!(e, StreamEvent::TextDelta { .. }))
    );
    let text_after: String = events[marker..]
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text_after, "Listing the files — héllo 🦀");
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Message(expected(&reply, "msg_scripted_2")))
    );
}

#[tokio::test]
async fn complete_retries_a_mid_stream_overload() {
    let reply = rich_reply();
    let model = failing_once(Turn::overloaded_mid_stream(reply.clone(), 2), &reply).await;
    let message = client(&model).complete(&request()).await.unwrap();
    assert_eq!(message, expected(&reply, "msg_scripted_2"));
}

#[tokio::test]
async fn connection_cut_in_the_middle_of_a_tool_input_is_retried() {
    let reply = rich_reply();
    let model = failing_once(Turn::cut_in_tool_input(reply.clone()), &reply).await;
    let events = ok_events(&model).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::Restarted { .. }))
    );
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Message(expected(&reply, "msg_scripted_2")))
    );
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn cut_streams_past_the_budget_end_in_a_clear_error() {
    let reply = rich_reply();
    let model = ScriptedModel::start(vec![Turn::cut_in_tool_input(reply); 2])
        .await
        .unwrap();
    let events = collect(&client_with(&model, Credentials::ApiKey(KEY.into()), 1)).await;
    let err = events.last().unwrap().as_ref().unwrap_err();
    assert!(
        matches!(err, ModelError::RetriesExhausted { attempts: 2, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("reading the model response stream failed"),
        "{err}"
    );
}

#[tokio::test]
async fn an_exhausted_script_says_so() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let err = client_with(&model, Credentials::ApiKey(KEY.into()), 1)
        .complete(&request())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(500));
    assert!(err.to_string().contains("no turn left"), "{err}");
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let base = model.base_url();
    model.shutdown().await;
    let mut config = ModelConfig::new(base, Credentials::ApiKey(KEY.into()));
    config.retry = fast_retries(2);
    let err = ModelClient::new(config)
        .unwrap()
        .complete(&request())
        .await
        .unwrap_err();
    let ModelError::RetriesExhausted { attempts: 3, last } = &err else {
        panic!("{err:?}")
    };
    assert!(
        matches!(
            **last,
            ModelError::Send {
                retryable: true,
                ..
            }
        ),
        "{last:?}"
    );
}

/// Raw HTTP/1.1 against the scripted server: what the Python SDK sends.
async fn raw_post(model: &ScriptedModel, path: &str, auth: Option<&str>) -> String {
    let addr = model.base_url().trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let body = r#"{"model":"claude-scripted","max_tokens":5,"stream":true,"messages":[]}"#;
    let auth = auth.map(|a| format!("{a}\r\n")).unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nanthropic-version: 2023-06-01\r\n{auth}\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn server_accepts_bearer_and_beta_query_and_refuses_missing_auth() {
    let model = ScriptedModel::start(vec![Turn::text("hi")]).await.unwrap();
    let refused = raw_post(&model, "/v1/messages", None).await;
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(refused.contains("authentication_error"));
    let ok = raw_post(
        &model,
        "/v1/messages?beta=true",
        Some("authorization: Bearer t"),
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(
        ok.contains("text/event-stream") && ok.contains("message_stop"),
        "{ok}"
    );
    let seen = model.requests();
    assert_eq!(seen[1].query.as_deref(), Some("beta=true"));
    assert_eq!(seen[1].body["model"], "claude-scripted");
}

/// What a [`cordon::model::RequestObserver`] heard, in order.
#[derive(Default)]
struct Heard(std::sync::Mutex<Vec<String>>);

impl cordon::model::RequestObserver for Heard {
    fn attempt_failed(&self, error: &ModelError) {
        self.0
            .lock()
            .unwrap()
            .push(format!("failed {}", error.kind()));
    }
    fn retried(&self) {
        self.0.lock().unwrap().push("retried".into());
    }
    fn finished(&self, _elapsed: Duration, ok: bool) {
        self.0.lock().unwrap().push(format!("finished ok={ok}"));
    }
}

fn observed_client(
    model: &ScriptedModel,
    max_retries: u32,
) -> (ModelClient, std::sync::Arc<Heard>) {
    let heard = std::sync::Arc::new(Heard::default());
    let mut config = ModelConfig::new(model.base_url(), Credentials::ApiKey(KEY.into()));
    config.retry = fast_retries(max_retries);
    config.observer = Some(cordon::model::Observer(heard.clone()));
    (ModelClient::new(config).unwrap(), heard)
}

#[tokio::test]
async fn the_observer_hears_each_failed_attempt_retry_and_finished_call() {
    let reply = Reply::text("fine");
    let model = ScriptedModel::start(vec![
        Turn::overloaded(),
        Turn::overloaded_mid_stream(reply.clone(), 0),
        Turn::Reply(reply.clone()),
        Turn::overloaded(),
        Turn::overloaded(),
    ])
    .await
    .unwrap();
    let (client, heard) = observed_client(&model, 1);
    // A 529, retried; then a stream cut by an overload event, past the budget of one
    // retry: the call fails for good. The next call gets the reply at once.
    assert!(client.complete(&request()).await.is_err());
    let (client, heard_ok) = observed_client(&model, 3);
    client.complete(&request()).await.unwrap();
    assert_eq!(
        *heard.0.lock().unwrap(),
        [
            "failed http_529",
            "retried",
            "failed stream_error_event",
            "finished ok=false"
        ]
    );
    assert_eq!(*heard_ok.0.lock().unwrap(), ["finished ok=true"]);
    // No retries allowed: the first 529 ends the call.
    let (client, heard) = observed_client(&model, 0);
    assert!(client.complete(&request()).await.is_err());
    assert_eq!(
        *heard.0.lock().unwrap(),
        ["failed http_529", "finished ok=false"]
    );
}
