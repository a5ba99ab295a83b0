//! The Messages API client: one streamed `POST {base}/v1/messages` per call, retried.
//!
//! Retry policy (see [`RetryPolicy`]): HTTP 429 and 5xx (529 included), connection errors,
//! and retryable stream failures (`overloaded_error` / `api_error` events, a cut or idle
//! connection) are retried with full-jitter backoff, honouring `retry-after(-ms)`, until the
//! budget is spent; then [`ModelError::RetriesExhausted`] names the last failure. Other 4xx
//! are returned at once with the API's `error.type` and message.
//!
//! A stream that fails after deltas were already yielded is restarted from scratch (the
//! request is resent whole; a model call has no side effects, tools only run once the
//! message is complete) and the consumer gets [`StreamEvent::Restarted`] to discard what it
//! showed. A stream that fails before yielding anything is restarted silently.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderValue};

use super::error::{ModelError, chain};
use super::observe::Observer;
use super::retry::{RetryPolicy, parse_retry_after};
use super::stream::{StreamDecoder, StreamEvent};
use super::types::{AssistantMessage, MessagesRequest};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// Used when neither `ANTHROPIC_MODEL` nor `--model` names one.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Error bodies are read up to this size: enough for any API error, bounded against a
/// hostile endpoint.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How the client authenticates.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// `x-api-key: KEY` (ANTHROPIC_API_KEY).
    ApiKey(String),
    /// `Authorization: Bearer TOKEN` (ANTHROPIC_AUTH_TOKEN).
    BearerToken(String),
}

// Secrets never reach logs through Debug.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            Self::BearerToken(_) => f.write_str("BearerToken(<redacted>)"),
        }
    }
}

/// Where and how to reach the model.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Without the `/v1/messages` suffix; a path prefix (a proxy) is kept.
    pub base_url: String,
    pub credentials: Credentials,
    /// Used when a request leaves `model` empty.
    pub model: String,
    pub retry: RetryPolicy,
    pub connect_timeout: Duration,
    /// Longest silence on an open connection (the API pings while it thinks).
    pub read_timeout: Duration,
    /// Told of failed attempts, retries and finished calls (the server's metrics).
    pub observer: Option<Observer>,
    /// Beta features asked for in the `anthropic-beta` header (`--betas`).
    pub betas: Vec<String>,
    /// The model a call moves to once the asked one answered "overloaded"
    /// [`OVERLOADS_BEFORE_FALLBACK`] times in a row (`--fallback-model`).
    pub fallback_model: Option<String>,
    /// Streams also yield the API's events as they came ([`StreamEvent::Raw`]).
    pub raw_events: bool,
}

/// Overloaded answers in a row before a call moves to the fallback model: one is often
/// a passing spike the backoff rides out; several say the model is saturated.
pub const OVERLOADS_BEFORE_FALLBACK: u32 = 3;

impl ModelConfig {
    pub fn new(base_url: impl Into<String>, credentials: Credentials) -> Self {
        Self {
            base_url: base_url.into(),
            credentials,
            model: DEFAULT_MODEL.to_owned(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(300),
            observer: None,
            betas: Vec::new(),
            fallback_model: None,
            raw_events: false,
        }
    }

    /// From the process environment.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any variable lookup (tests pass a map). Reads `ANTHROPIC_BASE_URL`,
    /// `ANTHROPIC_API_KEY` (preferred) or `ANTHROPIC_AUTH_TOKEN`, `ANTHROPIC_MODEL`; empty
    /// values count as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let var = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let credentials = match (var("ANTHROPIC_API_KEY"), var("ANTHROPIC_AUTH_TOKEN")) {
            (Some(key), _) => Credentials::ApiKey(key),
            (None, Some(token)) => Credentials::BearerToken(token),
            (None, None) => return Err(ModelError::MissingCredentials),
        };
        let base = var("ANTHROPIC_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let mut config = Self::new(base, credentials);
        if let Some(model) = var("ANTHROPIC_MODEL") {
            config.model = model;
        }
        Ok(config)
    }

    /// The `--model` flag: overrides the environment.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    fn messages_url(&self) -> Result<reqwest::Url, ModelError> {
        let invalid = |reason: String| ModelError::InvalidBaseUrl {
            url: self.base_url.clone(),
            reason,
        };
        let base = reqwest::Url::parse(self.base_url.trim_end_matches('/'))
            .map_err(|e| invalid(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.query().is_some() {
            return Err(invalid("expected an http(s) url without a query".into()));
        }
        let joined = format!("{}/v1/messages", base.as_str().trim_end_matches('/'));
        reqwest::Url::parse(&joined).map_err(|e| invalid(e.to_string()))
    }

    fn default_headers(&self) -> Result<HeaderMap, ModelError> {
        let mut headers = HeaderMap::new();
        let (name, value) = match &self.credentials {
            Credentials::ApiKey(key) => ("x-api-key", key.clone()),
            Credentials::BearerToken(token) => ("authorization", format!("Bearer {token}")),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| ModelError::InvalidCredential)?;
        // Keeps the secret out of reqwest/hyper debug output and HPACK tables.
        value.set_sensitive(true);
        headers.insert(name, value);
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        if !self.betas.is_empty() {
            let betas = HeaderValue::from_str(&self.betas.join(","))
                .map_err(|_| ModelError::InvalidBeta(self.betas.join(",")))?;
            headers.insert("anthropic-beta", betas);
        }
        Ok(headers)
    }
}

/// The stream [`ModelClient::stream`] returns.
pub type ModelStream = BoxStream<'static, Result<StreamEvent, ModelError>>;

/// A Messages API client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    url: reqwest::Url,
    config: ModelConfig,
}

impl ModelClient {
    pub fn new(config: ModelConfig) -> Result<Self, ModelError> {
        let url = config.messages_url()?;
        let http = reqwest::Client::builder()
            .default_headers(config.default_headers()?)
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .build()
            .map_err(ModelError::BuildClient)?;
        Ok(Self { http, url, config })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Sends the request (with `stream: true`) and returns its events: deltas as they come,
    /// then [`StreamEvent::Message`]. Errors before the response head (after retries) come
    /// back here; later ones as the stream's last item.
    pub async fn stream(&self, req: &MessagesRequest) -> Result<ModelStream, ModelError> {
        self.start(req, true).await
    }

    /// The complete message, without deltas.
    pub async fn complete(&self, req: &MessagesRequest) -> Result<AssistantMessage, ModelError> {
        let mut events = self.start(req, false).await?;
        while let Some(event) = events.next().await {
            if let StreamEvent::Message(message) = event? {
                return Ok(message);
            }
        }
        Err(ModelError::StreamIncomplete)
    }

    async fn start(
        &self,
        req: &MessagesRequest,
        emit_deltas: bool,
    ) -> Result<ModelStream, ModelError> {
        let mut body = self.request_body(req)?;
        let mut fallback = self.fallback_body(req)?;
        let mut retries = 0;
        let began = Instant::now();
        let response = match self.open(&mut body, &mut fallback, &mut retries).await {
            Ok(response) => response,
            Err(err) => {
                self.finished(began, false);
                return Err(err);
            }
        };
        let state = StreamState {
            began,
            client: self.clone(),
            body,
            fallback,
            response: Some(response.bytes_stream().boxed()),
            decoder: self.decoder(emit_deltas),
            emit_deltas,
            pending: VecDeque::new(),
            scratch: Vec::new(),
            retries,
            yielded: false,
            done: false,
        };
        Ok(futures::stream::unfold(state, |mut state| async move {
            let item = state.next_event().await?;
            Some((item, state))
        })
        .boxed())
    }

    fn decoder(&self, emit_deltas: bool) -> StreamDecoder {
        let decoder = StreamDecoder::new(emit_deltas);
        if self.config.raw_events && emit_deltas {
            decoder.with_raw_events()
        } else {
            decoder
        }
    }

    /// The body sent instead once the model is overloaded: the same request for the
    /// fallback model (none without one, or when it is the model asked for).
    fn fallback_body(&self, req: &MessagesRequest) -> Result<Option<Bytes>, ModelError> {
        let Some(fallback) = &self.config.fallback_model else {
            return Ok(None);
        };
        let asked = if req.model.is_empty() {
            &self.config.model
        } else {
            &req.model
        };
        if asked == fallback {
            return Ok(None);
        }
        let mut req = req.clone();
        req.model = fallback.clone();
        self.request_body(&req).map(Some)
    }

    fn request_body(&self, req: &MessagesRequest) -> Result<Bytes, ModelError> {
        let encoded = if req.stream && !req.model.is_empty() {
            serde_json::to_vec(req)
        } else {
            let mut req = req.clone();
            req.stream = true;
            if req.model.is_empty() {
                req.model = self.config.model.clone();
            }
            serde_json::to_vec(&req)
        };
        encoded
            .map(Bytes::from)
            .map_err(ModelError::SerializeRequest)
    }

    /// Sends until a success status, retrying per the policy; `retries` counts across the
    /// whole call (reconnections mid-stream included). After
    /// [`OVERLOADS_BEFORE_FALLBACK`] overloaded answers in a row, `body` becomes the
    /// `fallback` one (taken: the call stays on the fallback model) and is sent at once.
    async fn open(
        &self,
        body: &mut Bytes,
        fallback: &mut Option<Bytes>,
        retries: &mut u32,
    ) -> Result<reqwest::Response, ModelError> {
        let mut overloads = 0;
        loop {
            match self.send_once(body).await {
                Ok(response) => return Ok(response),
                Err(err) if err.is_overloaded() && fallback.is_some() => {
                    overloads += 1;
                    if overloads >= OVERLOADS_BEFORE_FALLBACK
                        && let Some(next) = fallback.take()
                    {
                        tracing::warn!(
                            model = ?self.config.fallback_model,
                            "the model is overloaded; moving to the fallback model"
                        );
                        *body = next;
                        continue;
                    }
                    self.backoff(err, retries).await?;
                }
                Err(err) => {
                    overloads = 0;
                    self.backoff(err, retries).await?;
                }
            }
        }
    }

    /// Tells the observer a call ended (started at `began`).
    fn finished(&self, began: Instant, ok: bool) {
        if let Some(Observer(o)) = &self.config.observer {
            o.finished(began.elapsed(), ok);
        }
    }

    /// Waits before the next retry, or returns the error that ends the call. Every failed
    /// attempt passes here, so this is where the observer hears of them.
    async fn backoff(&self, err: ModelError, retries: &mut u32) -> Result<(), ModelError> {
        let observer = self.config.observer.as_ref().map(|Observer(o)| o);
        if let Some(o) = observer {
            o.attempt_failed(&err);
        }
        if !err.is_retryable() {
            return Err(err);
        }
        let policy = &self.config.retry;
        if *retries >= policy.max_retries {
            return Err(ModelError::RetriesExhausted {
                attempts: *retries + 1,
                last: Box::new(err),
            });
        }
        let delay = policy.delay(*retries, err.retry_after());
        *retries += 1;
        if let Some(o) = observer {
            o.retried();
        }
        tracing::warn!(retry = *retries, delay_ms = delay.as_millis(), error = %err, "retrying model request");
        tokio::time::sleep(delay).await;
        Ok(())
    }

    async fn send_once(&self, body: &Bytes) -> Result<reqwest::Response, ModelError> {
        let response = self
            .http
            .post(self.url.clone())
            .body(body.clone())
            .send()
            .await
            .map_err(|source| ModelError::Send {
                detail: chain(&source),
                retryable: !source.is_builder() && !source.is_redirect(),
                source,
            })?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(api_error(response).await)
    }
}

/// Turns a non-success response into [`ModelError::Api`].
async fn api_error(mut response: reqwest::Response) -> ModelError {
    let status = response.status().as_u16();
    let retry_after = parse_retry_after(response.headers());
    let request_id = response
        .headers()
        .get("request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    #[derive(serde::Deserialize)]
    struct Envelope {
        error: Detail,
    }
    #[derive(serde::Deserialize)]
    struct Detail {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        message: String,
    }
    let (error_type, message) = match serde_json::from_slice::<Envelope>(&body) {
        Ok(envelope) => (envelope.error.kind, envelope.error.message),
        Err(_) => {
            let text = String::from_utf8_lossy(&body);
            ("http_error".to_owned(), text.chars().take(500).collect())
        }
    };
    ModelError::Api {
        status,
        error_type,
        message,
        retry_after,
        request_id,
    }
}

/// The state behind [`ModelStream`].
struct StreamState {
    /// When the call started (for the observer).
    began: Instant,
    client: ModelClient,
    body: Bytes,
    /// The fallback model's body, until the call moved to it.
    fallback: Option<Bytes>,
    response: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    decoder: StreamDecoder,
    emit_deltas: bool,
    pending: VecDeque<StreamEvent>,
    scratch: Vec<StreamEvent>,
    retries: u32,
    /// Events were yielded since the last restart marker.
    yielded: bool,
    done: bool,
}

impl StreamState {
    async fn next_event(&mut self) -> Option<Result<StreamEvent, ModelError>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if !matches!(event, StreamEvent::Restarted { .. }) {
                    self.yielded = true;
                }
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            let Err(err) = self.read_more().await else {
                continue;
            };
            if let Err(err) = self.restart(err).await {
                self.client.finished(self.began, false);
                self.done = true;
                self.response = None;
                return Some(Err(err));
            }
        }
    }

    /// Reads one chunk into `pending`.
    async fn read_more(&mut self) -> Result<(), ModelError> {
        let Some(response) = self.response.as_mut() else {
            return Err(ModelError::StreamIncomplete);
        };
        match response.next().await {
            Some(Ok(chunk)) => {
                self.scratch.clear();
                self.decoder.feed(&chunk, &mut self.scratch)?;
                self.pending.extend(self.scratch.drain(..));
                if self.decoder.is_finished() {
                    self.client.finished(self.began, true);
                    self.done = true;
                    self.response = None;
                }
                Ok(())
            }
            Some(Err(source)) => Err(ModelError::ReadStream {
                detail: chain(&source),
                source,
            }),
            None => Err(ModelError::StreamIncomplete),
        }
    }

    /// Resends the request after a retryable stream failure.
    async fn restart(&mut self, err: ModelError) -> Result<(), ModelError> {
        self.response = None;
        let reason = err.to_string();
        self.client.backoff(err, &mut self.retries).await?;
        self.pending.clear();
        if self.yielded {
            self.yielded = false;
            self.pending.push_back(StreamEvent::Restarted {
                attempt: self.retries,
                reason,
            });
        }
        self.decoder = self.client.decoder(self.emit_deltas);
        let response = self
            .client
            .open(&mut self.body, &mut self.fallback, &mut self.retries)
            .await?;
        self.response = Some(response.bytes_stream().boxed());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn config_from_lookup_defaults_and_precedence() {
        let config = ModelConfig::from_lookup(lookup(&[("ANTHROPIC_AUTH_TOKEN", "tok")])).unwrap();
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert_eq!(config.model, DEFAULT_MODEL);
        assert_eq!(config.credentials, Credentials::BearerToken("tok".into()));
        let config = ModelConfig::from_lookup(lookup(&[
            ("ANTHROPIC_AUTH_TOKEN", "tok"),
            ("ANTHROPIC_API_KEY", "key"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/proxy/"),
            ("ANTHROPIC_MODEL", "claude-x"),
        ]))
        .unwrap()
        .with_model("claude-y");
        assert_eq!(config.credentials, Credentials::ApiKey("key".into()));
        assert_eq!(config.model, "claude-y");
        assert_eq!(
            config.messages_url().unwrap().as_str(),
            "http://127.0.0.1:9/proxy/v1/messages"
        );
    }

    #[test]
    fn missing_credentials_and_bad_urls_are_errors() {
        let err = ModelConfig::from_lookup(lookup(&[("ANTHROPIC_API_KEY", "")])).unwrap_err();
        assert!(matches!(err, ModelError::MissingCredentials));
        for url in ["not a url", "ftp://host", "http://host/?q=1"] {
            let config = ModelConfig::new(url, Credentials::ApiKey("k".into()));
            assert!(matches!(
                ModelClient::new(config),
                Err(ModelError::InvalidBaseUrl { .. })
            ));
        }
        let config = ModelConfig::new(DEFAULT_BASE_URL, Credentials::ApiKey("a\nb".into()));
        assert!(matches!(
            ModelClient::new(config),
            Err(ModelError::InvalidCredential)
        ));
    }

    #[test]
    fn debug_output_redacts_secrets() {
        let config = ModelConfig::new(DEFAULT_BASE_URL, Credentials::ApiKey("sk-secret".into()));
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn body_forces_stream_and_fills_the_model() {
        let client = ModelClient::new(ModelConfig::new(
            DEFAULT_BASE_URL,
            Credentials::ApiKey("k".into()),
        ))
        .unwrap();
        let mut req = MessagesRequest::new("", 10, vec![]);
        req.stream = false;
        let body: serde_json::Value =
            serde_json::from_slice(&client.request_body(&req).unwrap()).unwrap();
        assert_eq!(body["stream"], true);
        assert_eq!(body["model"], DEFAULT_MODEL);
    }
}
