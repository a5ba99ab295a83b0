//! [`Controller`]: the one way out to the client. Every record (session output, our
//! requests, our responses) goes through one channel to one writer task, so lines never
//! interleave; requests we send are matched to the client's answers by request id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::protocol;

/// Why a request to the client got no answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ControlError {
    #[error("the client closed the connection")]
    Closed,
    #[error("the client answered with an error: {0}")]
    Client(String),
}

type Pending = HashMap<String, oneshot::Sender<Result<Value, String>>>;

/// The sending side of a stream-json connection.
#[derive(Debug)]
pub struct Controller {
    out: mpsc::UnboundedSender<Value>,
    pending: Mutex<Pending>,
    next_id: AtomicU64,
    closed: std::sync::atomic::AtomicBool,
}

impl Controller {
    /// A controller and the receiver its writer task drains (see [`write_lines`]).
    pub fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<Value>) {
        let (out, rx) = mpsc::unbounded_channel();
        let controller = Arc::new(Self {
            out,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        (controller, rx)
    }

    /// Queues one record for the client.
    pub fn send(&self, record: Value) {
        // The writer only goes away at shutdown; a record sent then has no reader.
        let _ = self.out.send(record);
    }

    /// Ends the writer after the records queued so far (other holders of the controller
    /// may outlive the session; their later records are dropped).
    pub fn shutdown(&self) {
        self.close();
        let _ = self.out.send(Value::Null);
    }

    /// Sends a control_request and waits for the client's answer.
    pub async fn request(&self, request: Value) -> Result<Value, ControlError> {
        let id = format!(
            "cordon_req_{}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.lock();
            if self.closed.load(Ordering::Acquire) {
                return Err(ControlError::Closed);
            }
            pending.insert(id.clone(), tx);
        }
        self.send(protocol::request_envelope(&id, request));
        match rx.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(ControlError::Client(message)),
            Err(_) => Err(ControlError::Closed),
        }
    }

    /// Delivers the client's answer to the request waiting on `request_id`; false when
    /// none waits (a late or unknown answer, which is ignored).
    pub fn resolve(&self, request_id: &str, result: Result<Value, String>) -> bool {
        match self.lock().remove(request_id) {
            Some(tx) => tx.send(result).is_ok(),
            None => false,
        }
    }

    /// The client is gone (stdin closed): every waiting request fails, later ones too.
    pub fn close(&self) {
        let mut pending = self.lock();
        self.closed.store(true, Ordering::Release);
        pending.clear();
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Single map operations under the lock: a poisoned map is still consistent.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writer task: one JSON object per line, flushed after each, until
/// [`Controller::shutdown`] or until every holder of the controller is gone.
pub async fn write_lines<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<Value>,
    mut writer: W,
) -> std::io::Result<()> {
    while let Some(record) = rx.recv().await {
        if record.is_null() {
            break;
        }
        let mut line = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        writer.write_all(&line).await?;
        writer.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn requests_are_matched_to_answers_by_id() {
        let (controller, mut rx) = Controller::new();
        let c = controller.clone();
        let waiting =
            tokio::spawn(async move { c.request(json!({"subtype": "can_use_tool"})).await });
        let sent = rx.recv().await.unwrap();
        assert_eq!(sent["type"], "control_request");
        assert_eq!(sent["request"]["subtype"], "can_use_tool");
        let id = sent["request_id"].as_str().unwrap().to_string();
        assert!(!controller.resolve("other", Ok(json!({}))));
        assert!(controller.resolve(&id, Ok(json!({"behavior": "allow"}))));
        assert_eq!(waiting.await.unwrap(), Ok(json!({"behavior": "allow"})));
    }

    #[tokio::test]
    async fn closing_fails_waiting_and_later_requests() {
        let (controller, mut rx) = Controller::new();
        let c = controller.clone();
        let waiting = tokio::spawn(async move { c.request(json!({})).await });
        let _ = rx.recv().await.unwrap();
        controller.close();
        assert_eq!(waiting.await.unwrap(), Err(ControlError::Closed));
        assert_eq!(
            controller.request(json!({})).await,
            Err(ControlError::Closed)
        );
    }

    #[tokio::test]
    async fn the_writer_puts_one_object_per_line() {
        let (controller, rx) = Controller::new();
        controller.send(json!({"a": "x\ny"}));
        controller.send(json!({"b": 2}));
        controller.shutdown();
        controller.send(json!({"late": true}));
        let mut buf = Vec::new();
        write_lines(rx, &mut buf).await.unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            serde_json::from_str::<Value>(lines[0]).unwrap()["a"],
            "x\ny"
        );
    }
}
