//! Checkpoints in the loop: the workspace is captured when a prompt is submitted (before
//! any of its changes) and recorded against the prompt's user message once the transcript
//! has given it a uuid. A failed snapshot is logged and never stops the run. With the
//! session's sandbox attached, each capture runs while it is frozen (no sandbox process
//! runs during a snapshot).

use std::sync::{Arc, Mutex};

use super::{Captured, CheckpointError, Checkpoints};
use crate::agent::gate::{LoopObserver, PromptVerdict};
use crate::sandbox::Supervisor;

/// A [`LoopObserver`] that takes one checkpoint per user prompt.
#[derive(Clone)]
pub struct CheckpointObserver {
    store: Arc<Checkpoints>,
    pending: Arc<Mutex<Option<Captured>>>,
    sandbox: Option<Arc<Supervisor>>,
}

impl CheckpointObserver {
    pub fn new(store: Checkpoints) -> Self {
        Self {
            store: Arc::new(store),
            pending: Arc::new(Mutex::new(None)),
            sandbox: None,
        }
    }

    /// The same observer, freezing `sandbox` during each capture.
    pub fn with_sandbox(mut self, sandbox: Arc<Supervisor>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    pub fn store(&self) -> &Checkpoints {
        &self.store
    }

    async fn capture(&self) -> Option<Captured> {
        match capture_quiet(&self.store, self.sandbox.as_ref()).await {
            Ok(captured) => Some(captured),
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint failed; this prompt cannot be rewound");
                None
            }
        }
    }
}

/// Runs `work` on the store while no sandbox process runs: frozen through `sandbox` when
/// given (a live session), else as is (the caller knows no sandbox runs).
pub async fn while_quiet<T: Send + 'static>(
    store: &Arc<Checkpoints>,
    sandbox: Option<&Arc<Supervisor>>,
    work: impl FnOnce(&Checkpoints) -> Result<T, CheckpointError> + Send + 'static,
) -> Result<T, String> {
    let store = store.clone();
    let run = move || work(&store);
    let out = match sandbox {
        Some(sup) => sup.frozen(run).await.map_err(|e| e.to_string())?,
        None => tokio::task::spawn_blocking(run)
            .await
            .map_err(|e| format!("checkpoint task failed: {e}"))?,
    };
    out.map_err(|e| e.to_string())
}

async fn capture_quiet(
    store: &Arc<Checkpoints>,
    sandbox: Option<&Arc<Supervisor>>,
) -> Result<Captured, String> {
    while_quiet(store, sandbox, Checkpoints::capture).await
}

#[tonic::async_trait]
impl LoopObserver for CheckpointObserver {
    async fn user_prompt(&self, _prompt: &str) -> PromptVerdict {
        let captured = self.capture().await;
        if let Ok(mut pending) = self.pending.lock() {
            *pending = captured;
        }
        PromptVerdict::Continue { context: None }
    }

    async fn prompt_recorded(&self, user_message_uuid: &str) {
        let pending = self.pending.lock().ok().and_then(|mut p| p.take());
        let captured = match pending {
            Some(c) => Some(c),
            None => self.capture().await,
        };
        let Some(captured) = captured else { return };
        let store = self.store.clone();
        let uuid = user_message_uuid.to_string();
        match tokio::task::spawn_blocking(move || store.record(&uuid, captured)).await {
            Ok(Ok(cp)) if !cp.skipped.is_empty() => {
                tracing::warn!(skipped = ?cp.skipped, "files over 50 MiB are not checkpointed");
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "recording the checkpoint failed"),
            Err(e) => tracing::warn!(error = %e, "checkpoint task failed"),
        }
    }
}
