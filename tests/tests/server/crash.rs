//! A `kill -9` of `cordon serve` in the middle of a load (several sessions each running
//! Bash tool calls against the scripted model), then a restart on the same data
//! directory: every session is listed and resumes, every tool result a client saw is in
//! its transcript, every tool call there has its result, and the audit chain verifies.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use futures::StreamExt;
use serde_json::{Value, json};

use super::fixture::{Api, HANG, Server, audit_verifies, unanswered_in_transcript};

const SESSIONS: usize = 8;
const CALLS_PER_SESSION: usize = 6;

/// What a client following one session saw before the server died.
#[derive(Default)]
struct Seen {
    /// Tool calls whose result event arrived.
    results: BTreeSet<String>,
    /// Whether the turn's result event arrived.
    finished: bool,
}

/// Follows `id`'s events from the first until the stream breaks (the server is killed),
/// counting tool results into `total` as they come.
async fn follow(api: Api, id: String, total: Arc<AtomicUsize>) -> Seen {
    let resp = api
        .request(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .send()
        .await
        .unwrap();
    let mut stream = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
    let mut seen = Seen::default();
    while let Some(Ok(event)) = stream.next().await {
        let data: Value = serde_json::from_str(&event.data).unwrap();
        match event.event.as_str() {
            "tool_result" => {
                seen.results
                    .insert(data["tool_use_id"].as_str().unwrap().to_string());
                total.fetch_add(1, Ordering::SeqCst);
            }
            "result" => seen.finished = true,
            _ => {}
        }
    }
    seen
}

/// Tool calls with a result that is not an error in `id`'s transcript (an error result is
/// what a resume writes for a call that never finished).
fn completed_in_transcript(data: &std::path::Path, id: &str) -> BTreeSet<String> {
    fn walk(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                if m.get("type").and_then(Value::as_str) == Some("tool_result")
                    && m.get("is_error") != Some(&Value::Bool(true))
                    && let Some(call) = m.get("tool_use_id").and_then(Value::as_str)
                {
                    out.insert(call.to_string());
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(data.join("sessions").join(format!("{id}.jsonl")));
    let mut out = BTreeSet::new();
    for line in text.unwrap().lines() {
        walk(&serde_json::from_str(line).unwrap_or(Value::Null), &mut out);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_then_every_session_resumes_with_its_turns_and_audit() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let quotas = json!({"max_sessions": SESSIONS + 2, "session_starts_per_minute": 100});
    let mut server = Server::start_with(&model, json!({}), quotas).await;
    let alpha = server.api("alpha");
    // The scripted model hands out turns in arrival order: every session gets tool calls
    // until the calls run out, then a closing text.
    let mut turns: Vec<Turn> = (0..SESSIONS * CALLS_PER_SESSION)
        .map(|i| {
            let command = format!("sleep 0.2; echo call-{i}");
            Turn::tool_use(format!("t{i}"), "Bash", json!({"command": command}))
        })
        .collect();
    turns.extend((0..SESSIONS).map(|_| Turn::text("done before")));
    model.push_turns(turns);
    let mut ids = Vec::new();
    for n in 0..SESSIONS {
        ids.push(alpha.create(json!({"labels": {"n": n.to_string()}})).await);
    }
    let total = Arc::new(AtomicUsize::new(0));
    let mut followers = Vec::new();
    for id in &ids {
        alpha
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"content": "work"}),
            )
            .await;
        followers.push(tokio::spawn(follow(
            alpha.clone(),
            id.clone(),
            total.clone(),
        )));
    }

    // Kill once a quarter of the calls are done: no session has had its closing text yet
    // (those come after every call), so every one of them is mid-turn.
    let deadline = tokio::time::Instant::now() + HANG;
    while total.load(Ordering::SeqCst) < SESSIONS * CALLS_PER_SESSION / 4 {
        assert!(tokio::time::Instant::now() < deadline, "the load never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill_and_restart().await;
    let mut seen = Vec::new();
    for f in followers {
        seen.push(f.await.unwrap());
    }
    assert!(
        seen.iter().all(|s| !s.finished),
        "a turn ended before the kill"
    );
    let in_flight: usize = ids
        .iter()
        .map(|id| unanswered_in_transcript(server.data.path(), id).len())
        .sum();
    eprintln!(
        "killed after {} tool results; {in_flight} tool calls were in flight",
        total.load(Ordering::SeqCst)
    );

    // Every session is listed.
    let alpha = server.api("alpha");
    let (_, list) = alpha.get("/v1/sessions?limit=100").await;
    let listed: BTreeSet<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids.iter().map(String::as_str).collect(), "{list}");

    // Each resumes: a new message gets an answer (after whatever calls the model still
    // had queued, then a closing text).
    model.push_turns((0..SESSIONS).map(|_| Turn::text("done after")));
    let mut last = Vec::new();
    for id in &ids {
        let (_, view) = alpha.get(&format!("/v1/sessions/{id}")).await;
        last.push(view["last_event_id"].as_u64().unwrap());
        alpha
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"content": "again"}),
            )
            .await;
    }
    for ((id, before), last) in ids.iter().zip(&seen).zip(last) {
        let events = alpha
            .events_until(id, Some(last), |e| e.kind == "result")
            .await;
        let result = events.last().unwrap();
        assert_eq!(result.data["is_error"], false, "{result:?}");
        assert!(
            result.data["text"].as_str().unwrap().starts_with("done "),
            "{result:?}"
        );
        // Every tool call in the transcript has its result, and every result a client saw
        // before the kill is there.
        let unanswered = unanswered_in_transcript(server.data.path(), id);
        assert!(unanswered.is_empty(), "{id}: {unanswered:?}");
        let completed = completed_in_transcript(server.data.path(), id);
        let missing: Vec<_> = before.results.difference(&completed).collect();
        assert!(missing.is_empty(), "{id}: results lost: {missing:?}");
    }
    let verified = audit_verifies(server.data.path());
    assert!(verified.contains("tenant alpha:"), "{verified}");
}
