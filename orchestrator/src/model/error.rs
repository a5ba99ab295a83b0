//! Errors of the model client, and which of them are worth retrying.

use std::time::Duration;

use super::sse::SseError;

/// Everything that can go wrong talking to the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("no model credentials: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN")]
    MissingCredentials,
    #[error("invalid model base url {url:?}: {reason}")]
    InvalidBaseUrl { url: String, reason: String },
    #[error("model credential is not a valid http header value")]
    InvalidCredential,
    #[error("--betas {0:?} is not a valid anthropic-beta header value")]
    InvalidBeta(String),
    #[error("building the http client failed: {0}")]
    BuildClient(#[source] reqwest::Error),
    #[error("serialising the request failed: {0}")]
    SerializeRequest(#[source] serde_json::Error),
    /// Connecting, sending, or waiting for the response head failed.
    #[error("sending the model request failed: {detail}")]
    Send {
        detail: String,
        retryable: bool,
        #[source]
        source: reqwest::Error,
    },
    /// The API answered with a non-success status; `error_type` and `message` come from its
    /// JSON error body (`{"type":"error","error":{"type":..,"message":..}}`).
    #[error("the model api answered {status} {error_type}: {message}")]
    Api {
        status: u16,
        error_type: String,
        message: String,
        retry_after: Option<Duration>,
        request_id: Option<String>,
    },
    #[error("reading the model response stream failed: {detail}")]
    ReadStream {
        detail: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the model response stream ended before message_stop")]
    StreamIncomplete,
    /// An `event: error` in the middle of the stream.
    #[error("the model stream reported {error_type}: {message}")]
    StreamErrorEvent { error_type: String, message: String },
    #[error("parsing the model event stream failed: {0}")]
    Sse(#[from] SseError),
    #[error("decoding the model's {event} event failed: {source}")]
    DecodeEvent {
        event: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the model stream broke the protocol: {0}")]
    Protocol(String),
    #[error("model request failed after {attempts} attempts; last error: {last}")]
    RetriesExhausted {
        attempts: u32,
        last: Box<ModelError>,
    },
}

impl ModelError {
    /// Whether sending the same request again may succeed: overload, rate limits, server
    /// errors, broken connections. Client errors (400, 401, 403, 404, 413) are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Send { retryable, .. } => *retryable,
            Self::Api { status, .. } => is_retryable_status(*status),
            Self::ReadStream { .. } | Self::StreamIncomplete => true,
            Self::StreamErrorEvent { error_type, .. } => is_retryable_error_type(error_type),
            _ => false,
        }
    }

    /// The API said the model is overloaded (HTTP 529 or an `overloaded_error`).
    pub fn is_overloaded(&self) -> bool {
        self.status() == Some(529) || self.error_type() == Some("overloaded_error")
    }

    /// The delay the server asked for (`retry-after-ms` / `retry-after`), if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status behind this error, looking through `RetriesExhausted`.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            Self::RetriesExhausted { last, .. } => last.status(),
            _ => None,
        }
    }

    /// The API's `error.type`, looking through `RetriesExhausted`.
    pub fn error_type(&self) -> Option<&str> {
        match self {
            Self::Api { error_type, .. } | Self::StreamErrorEvent { error_type, .. } => {
                Some(error_type)
            }
            Self::RetriesExhausted { last, .. } => last.error_type(),
            _ => None,
        }
    }
}

/// 429 and every 5xx (529 is the API's "overloaded").
pub fn is_retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// Mid-stream error types that are transient.
pub fn is_retryable_error_type(error_type: &str) -> bool {
    matches!(
        error_type,
        "overloaded_error" | "api_error" | "rate_limit_error"
    )
}

/// The whole source chain of an error on one line: reqwest's own message alone ("error
/// sending request") hides the cause (refused, reset, tls).
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

/// A tool call whose joined `input_json_delta` fragments are not a JSON object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("input of tool call {tool_use_id} ({tool_name}) is not valid json: {reason}")]
pub struct ToolInputError {
    pub tool_use_id: String,
    pub tool_name: String,
    /// The joined fragments as received.
    pub raw_input: String,
    pub reason: String,
}
