//! `cordon serve` under load: 100 concurrent sessions on the local sandbox against the
//! zero-latency scripted model, 2,000 Bash tool calls in all (the scripted model hands
//! its turns out in arrival order from one queue, so each session gets about 20), while
//! every session's view is polled.
//!
//! Measured, side by side in the same run:
//! - API latency p50/p99 under that load (create, message, GET session polls), and the
//!   same GET on an idle server first (the baseline);
//! - tool-call latency as a client sees it (tool_call event to its tool_result event);
//! - sessions started per second (create to the sandbox up, all 100 at once);
//! - lost events: every tool_call has exactly one tool_result in the event stream, in the
//!   replay from the first event, and in the session's transcript; must be zero.
//!
//! Then `kill -9` under that load: every session gets another message (5 more calls
//! each), the server is SIGKILLed once a quarter of them are done and restarted on the
//! same data directory. Measured: kill to listening again, and a new message to each of
//! the 100 sessions until all have answered; checked: every session listed, every tool
//! call in every transcript with its result, `cordon audit verify` passing.
//!
//! Run: `cargo build --release --bins && cargo bench -p cordon-tests --bench server_load`
//! (or `cargo test --bench server_load` for a debug-build run).
#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/server/fixture.rs"]
#[allow(dead_code)]
mod fixture;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cordon_tests::scripted_model::{Options, ScriptedModel, Turn};
use fixture::{Api, Server, audit_verifies, unanswered_in_transcript};
use futures::StreamExt;
use serde_json::{Value, json};

const SESSIONS: usize = 100;
const CALLS_PER_SESSION: usize = 20;
const CALLS_BEFORE_KILL: usize = 5;

#[derive(Default)]
struct Samples {
    api: Vec<Duration>,
    tool: Vec<Duration>,
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn timed<T>(samples: &Mutex<Samples>, f: impl std::future::Future<Output = T>) -> T {
    let t = Instant::now();
    let out = f.await;
    samples.lock().unwrap().api.push(t.elapsed());
    out
}

/// One session: create, send the prompt, follow its events to the end of the turn.
/// Returns (time to sandbox up, tool calls seen, calls without exactly one result).
async fn one_session(
    api: Api,
    samples: Arc<Mutex<Samples>>,
    begin: Instant,
) -> (String, Duration, usize, usize) {
    let id = timed(&samples, api.create(json!({"permission_mode": "default"}))).await;
    let (status, _) = timed(
        &samples,
        api.post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "work"}),
        ),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED);
    let resp = api
        .request(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .send()
        .await
        .unwrap();
    let mut stream = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
    let mut started = None;
    let mut open: HashMap<String, Instant> = HashMap::new();
    let mut results: HashMap<String, usize> = HashMap::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        let data: Value = serde_json::from_str(&event.data).unwrap();
        match event.event.as_str() {
            "lifecycle" if started.is_none() && data["state"] != "starting" => {
                started = Some(begin.elapsed());
            }
            "tool_call" => {
                open.insert(data["tool_use_id"].as_str().unwrap().into(), Instant::now());
            }
            "tool_result" => {
                let tid = data["tool_use_id"].as_str().unwrap().to_string();
                if let Some(t) = open.get(&tid) {
                    samples.lock().unwrap().tool.push(t.elapsed());
                }
                *results.entry(tid).or_default() += 1;
            }
            "result" => break,
            _ => {}
        }
    }
    let lost = open.keys().filter(|k| results.get(*k) != Some(&1)).count();
    (id, started.unwrap_or_default(), open.len(), lost)
}

/// Replays a session's events from the first and counts calls without one result.
async fn lost_in_replay(api: &Api, id: &str) -> usize {
    let events = api.events_until(id, Some(0), |e| e.kind == "result").await;
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e.kind == "tool_call")
        .map(|e| &e.data)
        .collect();
    calls
        .iter()
        .filter(|c| {
            events
                .iter()
                .filter(|e| e.kind == "tool_result" && e.data["tool_use_id"] == c["tool_use_id"])
                .count()
                != 1
        })
        .count()
}

async fn idle_baseline(api: &Api, id: &str) -> Vec<Duration> {
    let mut out = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        api.get(&format!("/v1/sessions/{id}")).await;
        out.push(t.elapsed());
    }
    out.sort();
    out
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

async fn run() {
    let mut turns: Vec<Turn> = (0..SESSIONS * CALLS_PER_SESSION)
        .map(|i| {
            Turn::tool_use(
                format!("t{i}"),
                "Bash",
                json!({"command": format!("echo {i}")}),
            )
        })
        .collect();
    turns.extend((0..SESSIONS).map(|_| Turn::text("done")));
    let model = ScriptedModel::start_with(
        Vec::new(),
        Options {
            zero_latency: true,
            ..Options::default()
        },
    )
    .await
    .unwrap();
    let quotas = json!({"max_sessions": SESSIONS + 10, "session_starts_per_minute": 10 * SESSIONS, "exec_per_minute": 10_000});
    let mut server = Server::start_with(&model, json!({}), quotas).await;
    let api = server.api("alpha");

    // Baseline: the same GET on a quiet server.
    let probe = api.create(json!({})).await;
    let baseline = idle_baseline(&api, &probe).await;
    api.delete(&format!("/v1/sessions/{probe}")).await;

    model.push_turns(turns);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let begin = Instant::now();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Pollers: GET the session list while the load runs (API latency under load).
    let pollers: Vec<_> = (0..4)
        .map(|_| {
            let (api, samples, done) = (api.clone(), samples.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    timed(&samples, api.get("/v1/sessions?limit=20")).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect();
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|_| tokio::spawn(one_session(api.clone(), samples.clone(), begin)))
        .collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let wall = begin.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for p in pollers {
        p.await.unwrap();
    }

    let calls: usize = outcomes.iter().map(|o| o.2).sum();
    let lost_live: usize = outcomes.iter().map(|o| o.3).sum();
    let mut lost_replay = 0;
    let mut lost_transcript = 0;
    for (id, ..) in &outcomes {
        lost_replay += lost_in_replay(&api, id).await;
        lost_transcript += unanswered_in_transcript(server.data.path(), id).len();
    }
    let mut starts: Vec<Duration> = outcomes.iter().map(|o| o.1).collect();
    starts.sort();
    let all_started = starts.last().copied().unwrap_or_default();
    let mut s = std::mem::take(&mut *samples.lock().unwrap());
    s.api.sort();
    s.tool.sort();
    println!(
        "server_load: {SESSIONS} concurrent sessions, {calls} tool calls in {:.1} s",
        wall.as_secs_f64()
    );
    println!(
        "  API latency under load: p50 {} p99 {} ({} requests); idle baseline GET: p50 {} p99 {}",
        ms(pct(&s.api, 0.5)),
        ms(pct(&s.api, 0.99)),
        s.api.len(),
        ms(pct(&baseline, 0.5)),
        ms(pct(&baseline, 0.99)),
    );
    println!(
        "  tool-call latency (tool_call to tool_result event): p50 {} p99 {}",
        ms(pct(&s.tool, 0.5)),
        ms(pct(&s.tool, 0.99)),
    );
    println!(
        "  sessions started: all {SESSIONS} in {:.2} s = {:.1} sessions/s (median start {})",
        all_started.as_secs_f64(),
        SESSIONS as f64 / all_started.as_secs_f64().max(1e-9),
        ms(pct(&starts, 0.5)),
    );
    println!("  lost events: live {lost_live}, replay {lost_replay}, transcript {lost_transcript}");
    assert_eq!(
        calls,
        SESSIONS * CALLS_PER_SESSION,
        "every scripted tool call ran"
    );
    assert_eq!(
        lost_live + lost_replay + lost_transcript,
        0,
        "no event may be lost"
    );
    let ids: Vec<String> = outcomes.into_iter().map(|o| o.0).collect();
    kill_under_load(&mut server, &model, &ids).await;
    model.shutdown().await;
}

/// Sends `content` to every session in `ids`.
async fn message_all(api: &Api, ids: &[String], content: &str) {
    for id in ids {
        let (status, body) = api
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"content": content}),
            )
            .await;
        assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{id}: {body}");
    }
}

/// The `kill -9` step: another message to every session, SIGKILL once a quarter of the
/// new calls are done, restart, then every session resumes.
async fn kill_under_load(server: &mut Server, model: &ScriptedModel, ids: &[String]) {
    let api = server.api("alpha");
    let calls = ids.len() * CALLS_BEFORE_KILL;
    model.push_turns((0..calls).map(|i| {
        let command = format!("sleep 0.1; echo k{i}");
        Turn::tool_use(format!("k{i}"), "Bash", json!({"command": command}))
    }));
    model.push_turns(ids.iter().map(|_| Turn::text("done before the kill")));
    let before = model.remaining_turns();
    // Sent all at once, so that the kill finds every session mid-turn; a post the kill
    // cuts off is not an error (the message may or may not have been queued).
    let posts: Vec<_> = ids
        .iter()
        .map(|id| {
            let rb = api
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/sessions/{id}/messages"),
                )
                .json(&json!({"content": "more"}));
            tokio::spawn(rb.send())
        })
        .collect();
    let deadline = Instant::now() + fixture::HANG * 4;
    while before - model.remaining_turns() < calls / 4 {
        assert!(Instant::now() < deadline, "the second load never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let done_at_kill = before - model.remaining_turns();
    let t = Instant::now();
    server.kill_and_restart().await;
    let restart = t.elapsed();
    for p in posts {
        let _ = p.await.unwrap();
    }
    let in_flight: usize = ids
        .iter()
        .map(|id| unanswered_in_transcript(server.data.path(), id).len())
        .sum();
    let api = server.api("alpha");
    let (_, list) = api.get("/v1/sessions?limit=1000").await;
    let listed = list["sessions"].as_array().unwrap().len();
    assert_eq!(
        listed,
        ids.len() + 1,
        "every session listed (and the probe)"
    );

    model.push_turns(ids.iter().map(|_| Turn::text("done after the kill")));
    let mut last = Vec::new();
    for id in ids {
        let (_, view) = api.get(&format!("/v1/sessions/{id}")).await;
        last.push(view["last_event_id"].as_u64().unwrap());
    }
    let t = Instant::now();
    message_all(&api, ids, "again").await;
    let waits: Vec<_> = ids
        .iter()
        .zip(last)
        .map(|(id, last)| {
            let (api, id) = (api.clone(), id.clone());
            tokio::spawn(async move {
                let events = api
                    .events_until(&id, Some(last), |e| e.kind == "result")
                    .await;
                assert_eq!(events.last().unwrap().data["is_error"], false);
            })
        })
        .collect();
    for w in waits {
        w.await.unwrap();
    }
    let resumed = t.elapsed();
    let unanswered: usize = ids
        .iter()
        .map(|id| unanswered_in_transcript(server.data.path(), id).len())
        .sum();
    let verified = audit_verifies(server.data.path());
    println!(
        "  kill -9 with {done_at_kill} of {} new model turns handed out ({in_flight} tool calls in flight): \
         listening again in {}, all {} sessions listed; a message to each answered in {:.2} s",
        calls + ids.len(),
        ms(restart),
        ids.len(),
        resumed.as_secs_f64(),
    );
    println!(
        "  after the restart: tool calls without a result in the transcripts {unanswered}; audit: {}",
        verified.lines().last().unwrap_or_default()
    );
    assert_eq!(
        unanswered, 0,
        "every tool call in a transcript has its result"
    );
}
