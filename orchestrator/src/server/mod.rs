//! `cordon serve`: the multi-tenant HTTP API.
//!
//! # Layout
//! - [`api`]: the handlers, one per route; [`errors`]: the JSON error shape;
//! - [`auth`]: API keys (hashed, compared in constant time) and the [`auth::Caller`];
//! - [`store`]: tenants, keys, sessions and events in SQLite behind the [`store::Store`] trait;
//! - [`registry`]: the sessions of every tenant, their start, pause and end, the reaper;
//! - [`sessions`]: one session's state machine; [`runner`]: its sandbox and turns;
//! - [`events`]: numbered, persisted events and SSE with `Last-Event-ID` replay;
//! - [`prompter`]: permission questions answered over HTTP;
//! - [`exec`], [`files`], [`archive`]: the sandbox without the model; [`workspace`]: paths beneath the root;
//! - [`quota`]: per-tenant quotas; [`listener`]: TLS and the connection cap;
//! - [`audit`]: the per-tenant hash-chained audit trail (`cordon audit verify`);
//! - [`metrics`]: the Prometheus registry behind `GET /metrics`;
//! - [`web`]: the page served at `/ui/` (sessions, live transcript, approvals).
//!
//! The server takes a bound listener and a shutdown future ([`serve`]); tests bind port 0.

pub mod api;
pub mod archive;
pub mod audit;
pub mod auth;
pub mod body_oracle;
pub mod errors;
pub mod events;
pub mod exec;
pub mod files;
pub mod listener;
pub mod metrics;
pub mod openapi;
pub mod ops;
pub mod ops_api;
pub mod prompter;
pub mod quota;
pub mod registry;
pub mod runner;
pub mod sessions;
pub mod store;
pub mod web;
pub mod workspace;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use registry::ServerState;

/// Limits every request is held to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest JSON body.
    pub json_body_bytes: usize,
    /// The largest file upload.
    pub file_body_bytes: usize,
    /// The largest archive upload.
    pub archive_body_bytes: usize,
    /// How long a handler may take to answer (an event or exec stream, once answered,
    /// runs on).
    pub request_timeout: Duration,
    /// How often the reaper looks for idle and expired sessions.
    pub reap_every: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            json_body_bytes: 1024 * 1024,
            file_body_bytes: usize::try_from(files::MAX_FILE_BYTES).unwrap_or(usize::MAX),
            archive_body_bytes: usize::try_from(archive::MAX_ARCHIVE_BYTES).unwrap_or(usize::MAX),
            request_timeout: Duration::from_secs(300),
            reap_every: Duration::from_millis(250),
        }
    }
}

/// The routes, with auth on every one but the health checks.
pub fn router(state: Arc<ServerState>, limits: Limits) -> Router {
    let files = Router::new()
        .route(
            "/v1/sessions/{id}/files/{*path}",
            get(api::get_file).put(api::put_file),
        )
        .layer(DefaultBodyLimit::max(limits.file_body_bytes));
    let archives = Router::new()
        .route(
            "/v1/sessions/{id}/archive",
            get(api::get_archive).put(api::put_archive),
        )
        .layer(DefaultBodyLimit::max(limits.archive_body_bytes));
    let json = Router::new()
        .route("/v1/openapi.json", get(api::openapi))
        .route("/v1/sessions", post(api::create).get(api::list))
        .route("/v1/sessions/{id}", get(api::get).delete(api::delete))
        .route("/v1/sessions/{id}/messages", post(api::message))
        .route("/v1/sessions/{id}/events", get(api::events))
        .route(
            "/v1/sessions/{id}/permissions/{request_id}",
            post(api::permission),
        )
        .route("/v1/sessions/{id}/interrupt", post(api::interrupt))
        .route("/v1/sessions/{id}/fork", post(api::fork))
        .route("/v1/sessions/{id}/rewind", post(api::rewind))
        .route("/v1/sessions/{id}/exec", post(api::exec))
        .route("/v1/sessions/{id}/pause", post(ops_api::pause))
        .route("/v1/sessions/{id}/resume", post(ops_api::resume))
        .route("/v1/audit", get(ops_api::audit))
        .route("/metrics", get(ops_api::metrics))
        .layer(DefaultBodyLimit::max(limits.json_body_bytes));
    let timeout = limits.request_timeout;
    Router::new()
        .route("/healthz", get(api::healthz))
        .route("/readyz", get(api::readyz))
        .merge(files)
        .merge(archives)
        .merge(json)
        .merge(web::router())
        .fallback(api::fallback)
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            answer_within(timeout, req, next)
        }))
        .with_state(state)
}

/// A handler that has not answered in time gets a 503; a handler that panics (a bug)
/// becomes a 500 with the JSON shape, never a dropped connection.
async fn answer_within(timeout: Duration, req: Request, next: Next) -> Response {
    use futures::FutureExt;
    let run = std::panic::AssertUnwindSafe(next.run(req)).catch_unwind();
    match tokio::time::timeout(timeout, run).await {
        Ok(Ok(response)) => response,
        Ok(Err(_)) => errors::ApiError::internal("the handler failed").into_response(),
        Err(_) => errors::ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!("no answer within {} s", timeout.as_secs()),
        )
        .into_response(),
    }
}

/// Serves until `shutdown` completes: then stops accepting, ends open event streams,
/// lets requests under way finish, and pauses every running session (its sandbox ends;
/// its transcript is complete to the last turn; the next server resumes it).
pub async fn serve<L>(
    listener: L,
    state: Arc<ServerState>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let reaper = tokio::spawn(state.clone().reap(limits.reap_every));
    let closing = state.clone();
    let app = router(state.clone(), limits);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            closing.close_streams();
        })
        .await?;
    reaper.abort();
    state.shutdown().await;
    Ok(())
}
