//! Checkpoints in the loop: the workspace is captured when a prompt is submitted (before
//! any of its changes) and recorded against the prompt's user message once the transcript
//! has given it a uuid. A failed snapshot is logged and never stops the run.

use std::sync::{Arc, Mutex};

use super::{Captured, Checkpoints};
use crate::agent::gate::{LoopObserver, PromptVerdict};

/// A [`LoopObserver`] that takes one checkpoint per user prompt.
#[derive(Debug, Clone)]
pub struct CheckpointObserver {
    store: Arc<Checkpoints>,
    pending: Arc<Mutex<Option<Captured>>>,
}

impl CheckpointObserver {
    pub fn new(store: Checkpoints) -> Self {
        Self {
            store: Arc::new(store),
            pending: Arc::new(Mutex::new(None)),
        }
    }

    pub fn store(&self) -> &Checkpoints {
        &self.store
    }

    async fn capture(&self) -> Option<Captured> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || store.capture()).await {
            Ok(Ok(captured)) => Some(captured),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "checkpoint failed; this prompt cannot be rewound");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint task failed");
                None
            }
        }
    }
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
