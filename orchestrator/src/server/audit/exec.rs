//! [`ExecRecorder`]: the audit record and metrics of one `POST .../exec`, filled in as the
//! command's output streams and written once it ends: at its exit status, at an error, or
//! when the client goes away first (recorded as interrupted, since the command is then
//! cancelled).

use std::time::Instant;

use sha2::{Digest, Sha256};

use super::gate::{AuditScope, AuditSinks};
use super::record::{AuditDecision, AuditEvent, DecisionSource, ExecAudit, Outcome};

pub struct ExecRecorder {
    scope: AuditScope,
    sinks: AuditSinks,
    record: Option<ExecAudit>,
    output: Sha256,
    started: Instant,
}

impl ExecRecorder {
    pub fn new(scope: AuditScope, sinks: AuditSinks, command: &str) -> Self {
        let record = ExecAudit::new(scope.key_id.as_deref(), &scope.session, command);
        Self {
            scope,
            sinks,
            record: Some(record),
            output: Sha256::new(),
            started: Instant::now(),
        }
    }

    /// The rules refused the command: recorded now, nothing ran.
    pub fn denied(mut self, source: DecisionSource) {
        if let Some(rec) = self.record.as_mut() {
            rec.decision = AuditDecision::Deny;
            rec.decision_source = source;
        }
        self.finish(Outcome::Denied, None);
    }

    /// A chunk of stdout or stderr, in the order streamed.
    pub fn output(&mut self, bytes: &[u8]) {
        self.output.update(bytes);
    }

    /// The command ended (or failed to report how); writes the record.
    pub fn finish(&mut self, outcome: Outcome, exit_code: Option<i32>) {
        let Some(mut rec) = self.record.take() else {
            return;
        };
        rec.outcome = outcome;
        rec.exit_code = exit_code;
        rec.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if outcome != Outcome::Denied {
            let digest = std::mem::take(&mut self.output).finalize();
            rec.output_sha256 = Some(format!("sha256:{}", hex::encode(digest)));
        }
        if let Some(m) = &self.sinks.metrics {
            m.permission_decision(rec.decision_source, rec.decision);
            m.exec(outcome, rec.duration_ms as f64 / 1000.0);
        }
        if let Err(e) = self
            .sinks
            .log
            .append(&self.scope.tenant, &AuditEvent::Exec(rec))
        {
            tracing::error!(session = %self.scope.session, error = %e, "writing an exec audit record failed");
        }
    }
}

impl Drop for ExecRecorder {
    fn drop(&mut self) {
        self.finish(Outcome::Interrupted, None);
    }
}
