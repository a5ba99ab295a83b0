//! The audit trail: every tool call, exec, permission answer and admin action, as an
//! append-only hash chain per tenant in SQLite (`DATA/audit.db`, WAL).
//!
//! - [`record`]: what a record says ([`AuditEvent`]); keys appear as key ids only.
//! - [`redact`]: the redacted, capped input preview (policy in `policies/audit-redaction.json`).
//! - [`chain`]: the canonical encoding each record's hash covers.
//! - [`log`]: [`AuditLog`], appending and exporting.
//! - [`verify`]: walking every chain; what `cordon audit verify` runs.
//!
//! Each record carries its tenant's sequence number and the previous record's hash, so an
//! edit (the hash no longer matches), a deletion (a gap, and the next record's link breaks)
//! and a reordering (sequence numbers are hashed) are all detected. A per-tenant head row,
//! written in the same transaction, catches the removal of the newest records; an attacker
//! who can rewrite the whole file can rewrite the heads too, which is why `verify` prints
//! each chain's head hash for the operator to keep elsewhere.

pub mod chain;
pub mod exec;
pub mod gate;
pub mod log;
pub mod record;
pub mod redact;
pub mod verify;

pub use exec::ExecRecorder;
pub use gate::{AuditGate, AuditScope, AuditSinks};
pub use log::{AuditError, AuditLog, StoredRecord};
pub use record::{
    AdminAction, AdminAudit, AuditDecision, AuditEvent, DecisionSource, ExecAudit, Outcome,
    PermissionAnswerAudit, ToolCallAudit,
};
pub use verify::{ChainProblem, VerifyReport};

#[cfg(test)]
#[path = "tamper_tests.rs"]
mod tamper_tests;
