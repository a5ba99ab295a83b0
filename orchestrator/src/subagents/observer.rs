//! [`SubagentObserver`]: a sub-agent's loop moments as hooks. Only the end of its turn
//! is one (SubagentStop, which may keep it going as Stop does for the session); the
//! session's UserPromptSubmit, Stop and PreCompact hooks are the parent's alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use crate::agent::gate::{LoopObserver, StopVerdict};
use crate::hooks::{HookEvent, Hooks, input};

/// Fires SubagentStop when the sub-agent `agent_type`, run by `agent_id`, ends its turn.
pub struct SubagentObserver {
    hooks: Arc<Hooks>,
    agent_type: String,
    agent_id: String,
    /// A SubagentStop hook kept the sub-agent going once already.
    active: AtomicBool,
}

impl SubagentObserver {
    pub fn new(hooks: Arc<Hooks>, agent_type: &str, agent_id: &str) -> Self {
        Self {
            hooks,
            agent_type: agent_type.into(),
            agent_id: agent_id.into(),
            active: AtomicBool::new(false),
        }
    }
}

#[tonic::async_trait]
impl LoopObserver for SubagentObserver {
    async fn stop(&self, _text: &str) -> StopVerdict {
        let mut fields = input::stop(self.active.load(Ordering::SeqCst));
        fields.insert("agent_type".into(), json!(self.agent_type));
        fields.insert("agent_id".into(), json!(self.agent_id));
        let results = self.hooks.fire(HookEvent::SubagentStop, None, fields).await;
        let mut reasons = Vec::new();
        for (_, out) in results {
            if out.stop.is_some() {
                return StopVerdict::Stop;
            }
            reasons.extend(out.block);
        }
        if reasons.is_empty() {
            return StopVerdict::Stop;
        }
        self.active.store(true, Ordering::SeqCst);
        StopVerdict::Continue {
            reason: reasons.join("\n"),
        }
    }
}
