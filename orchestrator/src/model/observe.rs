//! Watching the model client's requests from outside: [`RequestObserver`] hears of every
//! failed attempt, every retry and the end of every call, where they happen in the client
//! (the server's metrics are one such observer). [`ModelError::kind`] names a failure with
//! a small, fixed vocabulary fit for a metric label.

use std::sync::Arc;
use std::time::Duration;

use super::error::ModelError;

/// Told about a client's requests as they go. Called on the request's task: keep it cheap.
pub trait RequestObserver: Send + Sync {
    /// One attempt failed with `error` (it may still be retried).
    fn attempt_failed(&self, error: &ModelError);
    /// The request is sent again after a failure.
    fn retried(&self);
    /// A call ended after `elapsed` (retries included): its message complete (`ok`), or
    /// failed for good.
    fn finished(&self, elapsed: Duration, ok: bool);
}

/// A shared observer, carried in [`super::ModelConfig`] (printed as a placeholder).
#[derive(Clone)]
pub struct Observer(pub Arc<dyn RequestObserver>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer(..)")
    }
}

impl ModelError {
    /// A label for this failure: `http_<status>` for an API answer, otherwise the step
    /// that failed. Never text from the response, so a label set stays bounded.
    pub fn kind(&self) -> String {
        match self {
            Self::Api { status, .. } => format!("http_{status}"),
            Self::RetriesExhausted { last, .. } => last.kind(),
            Self::Send { .. } => "send".into(),
            Self::ReadStream { .. } => "read_stream".into(),
            Self::StreamIncomplete => "stream_incomplete".into(),
            Self::StreamErrorEvent { .. } => "stream_error_event".into(),
            Self::Sse(_) | Self::DecodeEvent { .. } | Self::Protocol(_) => "protocol".into(),
            _ => "client".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_name_the_status_or_the_step_never_the_body() {
        let api = ModelError::Api {
            status: 529,
            error_type: "anything the server says".into(),
            message: "m".into(),
            retry_after: None,
            request_id: None,
        };
        assert_eq!(api.kind(), "http_529");
        let exhausted = ModelError::RetriesExhausted {
            attempts: 3,
            last: Box::new(api),
        };
        assert_eq!(exhausted.kind(), "http_529");
        assert_eq!(ModelError::StreamIncomplete.kind(), "stream_incomplete");
        let event = ModelError::StreamErrorEvent {
            error_type: "x".into(),
            message: "y".into(),
        };
        assert_eq!(event.kind(), "stream_error_event");
        assert_eq!(ModelError::MissingCredentials.kind(), "client");
    }
}
