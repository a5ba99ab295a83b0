//! The HTTP API under `/v1`: one handler per route, each parsing its request into typed
//! input (JSON errors for anything malformed) and calling the registry.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use super::audit::{AdminAction, AuditDecision, AuditEvent, ExecRecorder, PermissionAnswerAudit};
use super::auth::{self, Caller};
use super::errors::{ApiError, Body};
use super::exec::{self, ExecBody};
use super::files;
use super::prompter::Answer;
use super::quota::Rate;
use super::registry::ServerState;
use super::sessions::{SessionConfig, State as SessionState};

pub type AppState = Arc<ServerState>;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let key = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(auth::bearer)
            .ok_or_else(ApiError::unauthorized)?;
        auth::verify(state.store.as_ref(), key)
            .map_err(|e| ApiError::internal(format!("checking the key: {e}")))?
            .ok_or_else(ApiError::unauthorized)
    }
}

/// Path parameters that reject with the JSON error shape.
pub struct Params<T>(pub T);

impl<T, S> FromRequestParts<S> for Params<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(value) = Path::<T>::from_request_parts(parts, state).await?;
        Ok(Params(value))
    }
}

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn readyz(State(state): State<AppState>) -> Response {
    if state.ready() && super::ops::backend_ready(state.default_backend).await {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(request): Body<SessionConfig>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let session = state.create(&caller, request)?;
    state.ops.admin(
        &caller.tenant,
        &caller.key_id,
        AdminAction::SessionCreate,
        &session.id,
    );
    Ok((StatusCode::CREATED, Json(session.view())))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only sessions in this state.
    state: Option<String>,
    /// `k=v` pairs separated by commas: only sessions carrying all of them.
    labels: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    limit: Option<usize>,
}

pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
    let wanted_state = match q.state.as_deref() {
        Some(s) => Some(
            SessionState::parse(s)
                .ok_or_else(|| ApiError::bad_request(format!("unknown state {s:?}")))?,
        ),
        None => None,
    };
    let mut wanted_labels = BTreeMap::new();
    for pair in q
        .labels
        .iter()
        .flat_map(|l| l.split(','))
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| ApiError::bad_request(format!("label filter {pair:?} is not k=v")))?;
        wanted_labels.insert(k.to_string(), v.to_string());
    }
    let limit = q.limit.unwrap_or(100).clamp(1, 500);
    let sessions = state.list(&caller);
    let start = match &q.cursor {
        Some(c) => sessions
            .iter()
            .position(|s| &s.id == c)
            .map(|i| i + 1)
            .ok_or_else(|| ApiError::bad_request("unknown cursor"))?,
        None => 0,
    };
    let matching: Vec<_> = sessions[start..]
        .iter()
        .filter(|s| wanted_state.is_none_or(|w| s.state().0 == w))
        .filter(|s| {
            let labels = s.labels();
            wanted_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .take(limit + 1)
        .collect();
    let more = matching.len() > limit;
    let page: Vec<Value> = matching.iter().take(limit).map(|s| s.view()).collect();
    let next = more.then(|| matching[limit - 1].id.clone());
    Ok(Json(json!({"sessions": page, "next_cursor": next})))
}

pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(state.get(&caller, &id)?.view()))
}

pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let session = state.get(&caller, &id)?;
    state.end(&session, "deleted").await;
    state.ops.admin(
        &caller.tenant,
        &caller.key_id,
        AdminAction::SessionDelete,
        &id,
    );
    Ok(Json(session.view()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    content: String,
}

pub async fn message(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
    Body(body): Body<MessageBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if body.content.trim().is_empty() {
        return Err(ApiError::bad_request("content must not be empty"));
    }
    let session = state.get(&caller, &id)?;
    state.send(&session, body.content).await?;
    Ok((StatusCode::ACCEPTED, Json(session.view())))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this event id (as the `Last-Event-ID` header does).
    after: Option<u64>,
}

pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(q) = query?;
    let session = state.get(&caller, &id)?;
    let after = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be an event id"))?,
        None => q.after.unwrap_or(0),
    };
    let stream = session.events.stream(after);
    Ok(Sse::new(state.until_closing(stream))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

pub async fn permission(
    State(state): State<AppState>,
    caller: Caller,
    Params((id, request_id)): Params<(String, String)>,
    Body(answer): Body<Answer>,
) -> Result<Json<Value>, ApiError> {
    let session = state.get(&caller, &id)?;
    // Questions wait only while the sandbox runs; answering never starts one.
    let engine = state.engine_for(&session).await?;
    let tool = session.pending.tool_of(&request_id);
    if !session.pending.answer(
        &request_id,
        &answer,
        &session.rules,
        &engine,
        &session.workspace,
    ) {
        return Err(ApiError::not_found("permission request"));
    }
    state.ops.append(
        &caller.tenant,
        &AuditEvent::PermissionAnswer(PermissionAnswerAudit {
            key_id: Some(caller.key_id.clone()),
            session: id.clone(),
            request_id: request_id.clone(),
            tool: tool.unwrap_or_default(),
            decision: match answer.decision {
                super::prompter::Decision::Allow => AuditDecision::Allow,
                super::prompter::Decision::Deny => AuditDecision::Deny,
            },
            always: answer.always,
        }),
    );
    Ok(Json(
        json!({"request_id": request_id, "decision": answer.decision}),
    ))
}

pub async fn interrupt(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let session = state.get(&caller, &id)?;
    let interrupted = state.interrupt(&session).await;
    Ok(Json(json!({"interrupted": interrupted})))
}

pub async fn fork(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let source = state.get(&caller, &id)?;
    let session = state.fork(&caller, &source)?;
    Ok((StatusCode::CREATED, Json(session.view())))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewindBody {
    /// The user message to go back before; absent: list the checkpoints.
    to: Option<String>,
}

pub async fn rewind(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
    Body(body): Body<RewindBody>,
) -> Result<Json<Value>, ApiError> {
    let session = state.get(&caller, &id)?;
    Ok(Json(state.rewind(&session, body.to.as_deref()).await?))
}

pub async fn exec(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
    Body(body): Body<ExecBody>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let session = state.get(&caller, &id)?;
    let quotas = state.quotas(&caller.tenant)?;
    state
        .limiter
        .take(&caller.tenant, Rate::Exec, quotas.exec_per_minute)?;
    let busy = session.busy();
    let live = state.ensure_running(&session).await?;
    let recorder = state
        .ops
        .scoped(&caller.tenant, Some(&caller.key_id), &id)
        .map(|(scope, sinks)| ExecRecorder::new(scope, sinks, &body.command));
    let stream = exec::start(live, body, busy, recorder).await?;
    Ok(Sse::new(stream.boxed()))
}

pub async fn get_file(
    State(state): State<AppState>,
    caller: Caller,
    Params((id, path)): Params<(String, String)>,
) -> Result<Response, ApiError> {
    let session = state.get(&caller, &id)?;
    let engine = state.engine_for(&session).await?;
    let bytes = files::read(&engine, &session.workspace, &path)?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

pub async fn put_file(
    State(state): State<AppState>,
    caller: Caller,
    Params((id, path)): Params<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let session = state.get(&caller, &id)?;
    let engine = state.engine_for(&session).await?;
    files::write(&engine, &session.workspace, &path, &body)?;
    Ok(Json(json!({"path": path, "bytes": body.len()})))
}

pub async fn get_archive(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
) -> Result<Response, ApiError> {
    let session = state.get(&caller, &id)?;
    if session.state().0 == SessionState::Ended {
        return Err(ApiError::conflict("the session has ended"));
    }
    let workspace = session.workspace.clone();
    let skip =
        crate::sandbox::footprint::of_session(&state.data, &session.id).relative_to(&workspace);
    let tar = tokio::task::spawn_blocking(move || super::archive::pack(&workspace, &skip))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
    Ok(([(header::CONTENT_TYPE, "application/x-tar")], tar).into_response())
}

pub async fn put_archive(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let session = state.get(&caller, &id)?;
    let engine = state.engine_for(&session).await?;
    let workspace = session.workspace.clone();
    let done =
        tokio::task::spawn_blocking(move || super::archive::unpack(&engine, &workspace, &body))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??;
    Ok(Json(json!(done)))
}

pub async fn openapi() -> Json<Value> {
    Json(super::openapi::document())
}

/// Anything else under the API: a JSON 404.
pub async fn fallback() -> ApiError {
    ApiError::not_found("route")
}
