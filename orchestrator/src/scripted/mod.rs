//! A scripted Messages-API server (tests, benchmarks and the offline demo): plays a list of [`Turn`]s, one per request,
//! streaming replies exactly as the API does (SSE frames, deltas, pings, cut into small
//! flushed writes) or playing faults (429, 529, 500, mid-stream `error`, a dropped
//! connection). Every request is recorded with its headers and JSON body.
//!
//! ```no_run
//! # async fn demo() {
//! use cordon::scripted::{ScriptedModel, Turn};
//! let model = ScriptedModel::start(vec![Turn::overloaded(), Turn::text("hi")]).await.unwrap();
//! // point ANTHROPIC_BASE_URL at model.base_url() ...
//! let seen = model.requests();
//! model.shutdown().await;
//! # }
//! ```

mod body;
pub mod encode;
mod script;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use encode::Chunking;
pub use script::{Fault, Reply, ReplyBlock, ReplyUsage, Turn};

/// Server settings.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// When set, the `x-api-key` or bearer token must equal it (else 401).
    pub expected_key: Option<String>,
    pub chunking: Chunking,
    /// Benchmarks: every body in one write, no yielding between pieces.
    pub zero_latency: bool,
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Lower-case names, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The parsed JSON body (`Null` when it was not JSON).
    pub body: Value,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Shared {
    turns: Mutex<VecDeque<Turn>>,
    /// Conversations with their own script, by a marker their first message contains
    /// (sub-agents running beside their parent, in whatever order their requests come).
    routes: Mutex<Vec<(String, VecDeque<Turn>)>>,
    requests: Mutex<Vec<RecordedRequest>>,
    options: Options,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not hide the recording from the next assertion.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running scripted model; shut down on drop.
pub struct ScriptedModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ScriptedModel {
    /// Binds 127.0.0.1:0 and serves `turns` with default options.
    pub async fn start(turns: Vec<Turn>) -> std::io::Result<Self> {
        Self::start_with(turns, Options::default()).await
    }

    pub async fn start_with(turns: Vec<Turn>, options: Options) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            turns: Mutex::new(turns.into()),
            routes: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            options,
        });
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::max(256 * 1024 * 1024))
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(err) = serve.await {
                tracing::warn!(%err, "scripted model server failed");
            }
        });
        Ok(Self {
            addr,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT` (no trailing slash), for ANTHROPIC_BASE_URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Appends turns to the script.
    pub fn push_turns(&self, turns: impl IntoIterator<Item = Turn>) {
        lock(&self.shared.turns).extend(turns);
    }

    /// Plays `turns` to the requests whose first message contains `marker` (the first
    /// matching route wins); every other request plays the main script.
    pub fn route(&self, marker: impl Into<String>, turns: impl IntoIterator<Item = Turn>) {
        lock(&self.shared.routes).push((marker.into(), turns.into_iter().collect()));
    }

    /// Turns not yet played.
    pub fn remaining_turns(&self) -> usize {
        lock(&self.shared.turns).len()
    }

    /// Stops accepting, lets open responses finish, and waits for the server task.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let number = {
        let mut requests = lock(&shared.requests);
        requests.push(recorded.clone());
        requests.len()
    };
    if let Some(rejection) = check_request(&shared.options, &method, &recorded, &headers) {
        return rejection;
    }
    let first = recorded.body["messages"][0].to_string();
    let routed = {
        let mut routes = lock(&shared.routes);
        routes
            .iter_mut()
            .find(|(marker, _)| first.contains(marker.as_str()))
            .map(|(_, turns)| turns.pop_front())
    };
    let Some(turn) = routed.unwrap_or_else(|| lock(&shared.turns).pop_front()) else {
        let message = format!("scripted model: the script has no turn left for request #{number}");
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "api_error", &message);
    };
    let id = format!("msg_scripted_{number}");
    let model = recorded
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted");
    body::play(turn, &id, model, &shared.options)
}

/// What the real API refuses before looking at the script: wrong route, no or wrong
/// credentials, no version header, a body that is not JSON.
fn check_request(
    options: &Options,
    method: &Method,
    recorded: &RecordedRequest,
    headers: &HeaderMap,
) -> Option<Response> {
    if method != Method::POST || recorded.path != "/v1/messages" {
        let message = format!("scripted model: no route for {method} {}", recorded.path);
        return Some(error_response(
            StatusCode::NOT_FOUND,
            "not_found_error",
            &message,
        ));
    }
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            let auth = headers.get("authorization")?.to_str().ok()?;
            auth.strip_prefix("Bearer ")
        });
    let authorised = match (key, &options.expected_key) {
        (None, _) => false,
        (Some(key), Some(expected)) => key == expected,
        (Some(_), None) => true,
    };
    if !authorised {
        let message = "invalid x-api-key or bearer token";
        return Some(error_response(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            message,
        ));
    }
    if recorded.header("anthropic-version").is_none() {
        let message = "anthropic-version: header is required";
        return Some(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            message,
        ));
    }
    if recorded.body.is_null() {
        let message = "the request body is not valid json";
        return Some(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            message,
        ));
    }
    None
}

/// A JSON error body as the API sends it.
pub(crate) fn error_response(status: StatusCode, error_type: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": error_type, "message": message}});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}
