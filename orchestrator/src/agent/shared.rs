//! [`LoopShared`]: what a client may read or change while a run goes on, through the
//! Agent SDK's control requests (`set_model`, `get_context_usage`), without holding the
//! loop itself (a run borrows it for its whole length).

use std::sync::{Arc, Mutex, PoisonError};

use super::ContextReport;

/// Shared between the loop and whoever answers the client's requests.
#[derive(Debug, Clone, Default)]
pub struct LoopShared {
    model: Arc<Mutex<Option<String>>>,
    usage: Arc<Mutex<Option<ContextReport>>>,
}

impl LoopShared {
    /// The model for the next calls (`None`: back to the session's default).
    pub fn set_model(&self, model: Option<String>) {
        *self.model.lock().unwrap_or_else(PoisonError::into_inner) = model;
    }

    /// The model chosen with [`LoopShared::set_model`], if any.
    pub fn model(&self) -> Option<String> {
        self.model
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What occupied the context window after the latest model call (or at the start).
    pub fn context_usage(&self) -> Option<ContextReport> {
        self.usage
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn record_usage(&self, report: ContextReport) {
        *self.usage.lock().unwrap_or_else(PoisonError::into_inner) = Some(report);
    }
}
