//! [`AuditGate`]: wraps a session's tool gate so every tool call leaves an audit record and
//! its metrics, whether it ran or was refused. It decides nothing itself: the inner gate's
//! verdict passes through unchanged.
//!
//! A refused call is recorded when the verdict is known (it never reaches `after`); a call
//! that runs is recorded once its result is known, with the time from the end of the
//! decision to the result (the tool's own run, not the time a person took to answer).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde_json::Value;

use super::chain::digest;
use super::log::AuditLog;
use super::record::{AuditDecision, AuditEvent, DecisionSource, Outcome, ToolCallAudit};
use crate::agent::gate::{GateVerdict, ToolCallInfo, ToolGate};
use crate::server::metrics::Metrics;
use crate::tools::ToolOutput;

/// Who a session's records are written for.
#[derive(Debug, Clone)]
pub struct AuditScope {
    pub tenant: String,
    /// The key that created the session (its id, never the key).
    pub key_id: Option<String>,
    pub session: String,
}

/// Where records and measurements go.
#[derive(Clone)]
pub struct AuditSinks {
    pub log: Arc<AuditLog>,
    pub metrics: Option<Arc<Metrics>>,
}

struct Running {
    started: Instant,
    input: Value,
    source: DecisionSource,
}

/// A [`ToolGate`] that records what the gate it wraps decided and how each call ended.
pub struct AuditGate {
    inner: Arc<dyn ToolGate>,
    scope: AuditScope,
    sinks: AuditSinks,
    running: Mutex<HashMap<String, Running>>,
}

impl AuditGate {
    pub fn new(inner: Arc<dyn ToolGate>, scope: AuditScope, sinks: AuditSinks) -> Self {
        Self {
            inner,
            scope,
            sinks,
            running: Mutex::new(HashMap::new()),
        }
    }

    fn record(&self, call: &ToolCallInfo, input: &Value, fill: impl FnOnce(&mut ToolCallAudit)) {
        let mut rec = ToolCallAudit::new(
            self.scope.key_id.as_deref(),
            &self.scope.session,
            &call.tool_use_id,
            &call.name,
            input,
        );
        fill(&mut rec);
        if let Some(m) = &self.sinks.metrics {
            m.tool_call(&rec.tool, rec.outcome, rec.duration_ms as f64 / 1000.0);
        }
        // A failed append is logged loudly; the call itself has already been decided (or
        // has run), and failing the model's turn would not undo it.
        if let Err(e) = self
            .sinks
            .log
            .append(&self.scope.tenant, &AuditEvent::ToolCall(rec))
        {
            tracing::error!(session = %self.scope.session, error = %e, "writing an audit record failed");
        }
    }
}

#[tonic::async_trait]
impl ToolGate for AuditGate {
    /// A sub-agent in a mode of its own is audited as every other call is.
    fn in_mode(
        &self,
        mode: crate::permissions::PermissionMode,
    ) -> Result<Arc<dyn ToolGate>, String> {
        let inner = self.inner.in_mode(mode)?;
        Ok(Arc::new(AuditGate::new(
            inner,
            self.scope.clone(),
            self.sinks.clone(),
        )))
    }

    async fn before(&self, call: &ToolCallInfo) -> GateVerdict {
        let verdict = self.inner.before(call).await;
        let (decision, reason) = match &verdict {
            GateVerdict::Allow { reason, .. } => (AuditDecision::Allow, reason),
            GateVerdict::Deny { reason, .. } => (AuditDecision::Deny, reason),
        };
        let source = DecisionSource::from_gate_reason(reason);
        if let Some(m) = &self.sinks.metrics {
            m.permission_decision(source, decision);
        }
        match &verdict {
            GateVerdict::Deny { .. } => self.record(call, &call.input, |r| {
                r.decision = AuditDecision::Deny;
                r.decision_source = source;
                r.outcome = Outcome::Denied;
            }),
            GateVerdict::Allow { input, .. } => {
                self.running
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(
                        call.tool_use_id.clone(),
                        Running {
                            started: Instant::now(),
                            input: input.clone(),
                            source,
                        },
                    );
            }
        }
        verdict
    }

    async fn after(&self, call: &ToolCallInfo, output: ToolOutput) -> ToolOutput {
        let output = self.inner.after(call, output).await;
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&call.tool_use_id);
        let (input, source, ms) = match running {
            Some(r) => (
                r.input,
                r.source,
                u64::try_from(r.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            ),
            None => (call.input.clone(), DecisionSource::Rule, 0),
        };
        self.record(call, &input, |r| {
            r.decision_source = source;
            r.outcome = if output.is_error {
                Outcome::Error
            } else {
                Outcome::Ok
            };
            r.duration_ms = ms;
            r.output_sha256 = Some(digest(output.content.as_bytes()));
        });
        output
    }

    fn offers(&self, tool: &str) -> bool {
        self.inner.offers(tool)
    }
}

impl DecisionSource {
    /// Who decided, from the reason the session's policy gate gives with its verdict
    /// (`crate::policy_gate`): a person's answer, a hook, a rule, the sandbox's auto-allow,
    /// else the mode.
    pub fn from_gate_reason(reason: &str) -> Self {
        let r = reason.to_ascii_lowercase();
        if r.starts_with("approved by the user") || r.starts_with("refused by the user") {
            Self::User
        } else if r.contains("pretooluse hook") {
            Self::Hook
        } else if r.contains("(rule ") || r.contains("by rule ") {
            Self::Rule
        } else if r.contains("sandbox") {
            Self::Sandbox
        } else {
            Self::Mode
        }
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
