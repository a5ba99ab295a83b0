//! Landlock, seccomp, rlimits and the confinement report. (Being implemented.)

use crate::config::AgentConfig;
use crate::proto::ConfinementReport;

#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("{0}")]
    Unsupported(String),
}

/// Confines the calling (still single-threaded) process; returns what is enforced.
pub fn confine_self(_config: &AgentConfig) -> Result<ConfinementReport, ConfineError> {
    Ok(ConfinementReport::default())
}
