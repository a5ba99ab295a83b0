//! Running commands. (Being implemented.)

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::Mutex;

use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::proto::*;

pub type EventStream =
    Pin<Box<dyn Stream<Item = Result<ExecEvent, tonic::Status>> + Send + 'static>>;

/// Starts, tracks and kills the commands of one agent.
#[derive(Debug)]
pub struct Executor {
    _config: AgentConfig,
}

impl Executor {
    pub fn new(config: &AgentConfig) -> Self {
        Self {
            _config: config.clone(),
        }
    }

    pub async fn start(
        &self,
        _req: ExecRequest,
        _cwd: Arc<Mutex<PathBuf>>,
    ) -> Result<EventStream, AgentError> {
        Err(AgentError::internal("not implemented yet"))
    }

    pub fn cancel(&self, _exec_id: &str) -> bool {
        false
    }

    pub fn kill_all(&self) {}
}
