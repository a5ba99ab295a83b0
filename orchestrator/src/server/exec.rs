//! `POST /v1/sessions/{id}/exec`: one shell command in the session's sandbox, without the
//! model, under the same confinement and permission rules as the Bash tool (a deny rule
//! refuses it; a rule that would ask refuses it too, since nobody is asked here). Output
//! streams as SSE `output` events, then one `exit` event; a client that goes away cancels
//! the command (its whole process group).

use super::audit::{DecisionSource, ExecRecorder, Outcome};
use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::response::sse::Event;
use futures::{Stream, StreamExt};
use sandbox_agent::proto::{ExecRequest, ExitStatus, exec_event, output_chunk};
use serde::Deserialize;
use serde_json::json;

use crate::permissions::Decision;
use crate::tools::bash::effective_timeout;

use super::errors::ApiError;
use super::registry::Live;
use super::sessions::BusyGuard;

/// Most extra environment variables one call may set.
const MAX_ENV: usize = 256;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecBody {
    pub command: String,
    pub timeout_ms: Option<u64>,
    pub env: Option<BTreeMap<String, String>>,
}

/// Checks the call against the session's rules and starts it.
pub async fn start(
    live: Live,
    body: ExecBody,
    busy: BusyGuard,
    audit: Option<ExecRecorder>,
) -> Result<impl Stream<Item = Result<Event, Infallible>>, ApiError> {
    if body.command.trim().is_empty() {
        return Err(ApiError::bad_request("command must not be empty"));
    }
    let env = body.env.unwrap_or_default();
    if env.len() > MAX_ENV || env.keys().any(|k| k.is_empty() || k.contains(['=', '\0'])) {
        return Err(ApiError::bad_request(format!(
            "env: at most {MAX_ENV} variables, names without '=' or NUL"
        )));
    }
    let verdict = live
        .engine
        .decide("Bash", &json!({"command": body.command}), false);
    let mut audit = audit;
    if verdict.decision != Decision::Allow
        && let Some(recorder) = audit.take()
    {
        let source = if verdict.rule.is_some() {
            DecisionSource::Rule
        } else {
            DecisionSource::Mode
        };
        recorder.denied(source);
    }
    match verdict.decision {
        Decision::Allow => {}
        Decision::Deny => {
            return Err(ApiError::forbidden(format!(
                "Permission denied: {}",
                verdict.reason
            )));
        }
        Decision::Ask => {
            return Err(ApiError::forbidden(format!(
                "this command needs approval under the session's rules ({}); exec cannot ask",
                verdict.reason
            )));
        }
    }
    let (timeout_ms, _) = effective_timeout(body.timeout_ms);
    let mut all_env = live.ctx.env().clone();
    all_env.extend(env);
    let exec_id = uuid::Uuid::new_v4().to_string();
    let req = ExecRequest {
        exec_id: exec_id.clone(),
        command: body.command,
        timeout_ms,
        env: all_env,
        ..Default::default()
    };
    let client = live.ctx.client();
    let stream = client
        .clone()
        .exec(req)
        .await
        .map_err(|e| ApiError::internal(format!("starting the command: {e}")))?;
    let guard = CancelOnDrop {
        client: Some(client),
        exec_id,
        _busy: busy,
        audit,
    };
    Ok(events(stream, guard))
}

fn events<S, E>(stream: S, guard: CancelOnDrop) -> impl Stream<Item = Result<Event, Infallible>>
where
    S: Stream<Item = Result<sandbox_agent::proto::ExecEvent, E>> + Send + 'static,
    E: std::fmt::Display,
{
    let stream = Box::pin(stream);
    futures::stream::unfold(Some((stream, guard)), |state| async move {
        let (mut stream, mut guard) = state?;
        loop {
            let event = match stream.next().await {
                None => {
                    guard.finished(Outcome::Error, None);
                    let e = Event::default().event("error").data(
                        json!({"message": "the command's output stream ended without an exit status"})
                            .to_string(),
                    );
                    return Some((Ok(e), None));
                }
                Some(Err(e)) => {
                    guard.finished(Outcome::Error, None);
                    let e = Event::default()
                        .event("error")
                        .data(json!({"message": e.to_string()}).to_string());
                    return Some((Ok(e), None));
                }
                Some(Ok(event)) => event,
            };
            match event.event {
                Some(exec_event::Event::Output(chunk)) => {
                    let name = if chunk.stream == output_chunk::Stream::Stderr as i32 {
                        "stderr"
                    } else {
                        "stdout"
                    };
                    if let Some(audit) = guard.audit.as_mut() {
                        audit.output(&chunk.data);
                    }
                    let data =
                        json!({"stream": name, "data": String::from_utf8_lossy(&chunk.data)});
                    let e = Event::default().event("output").data(data.to_string());
                    return Some((Ok(e), Some((stream, guard))));
                }
                Some(exec_event::Event::Exit(status)) => {
                    guard.client = None;
                    guard.finished(outcome_of(&status), status.code);
                    let e = Event::default()
                        .event("exit")
                        .data(exit_json(&status).to_string());
                    return Some((Ok(e), None));
                }
                None => {}
            }
        }
    })
}

fn exit_json(status: &ExitStatus) -> serde_json::Value {
    json!({
        "code": status.code,
        "signal": status.signal,
        "timed_out": status.timed_out,
        "cancelled": status.cancelled,
        "duration_ms": status.duration_ms,
    })
}

/// Cancels the command when the client goes away before its exit status.
struct CancelOnDrop {
    client: Option<sandbox_agent::client::AgentClient>,
    exec_id: String,
    _busy: BusyGuard,
    /// Written when the command ends; dropped unfinished, it records an interruption.
    audit: Option<ExecRecorder>,
}

impl CancelOnDrop {
    fn finished(&mut self, outcome: Outcome, code: Option<i32>) {
        if let Some(audit) = self.audit.as_mut() {
            audit.finish(outcome, code);
        }
    }
}

/// How an exit status reads in the audit record.
fn outcome_of(status: &ExitStatus) -> Outcome {
    if status.timed_out {
        Outcome::TimedOut
    } else if status.cancelled {
        Outcome::Interrupted
    } else if status.code == Some(0) {
        Outcome::Ok
    } else {
        Outcome::Error
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(mut client) = self.client.take() {
            let exec_id = std::mem::take(&mut self.exec_id);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = client.cancel(&exec_id).await;
                });
            }
        }
    }
}
