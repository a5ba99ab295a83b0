//! What operates the server alongside the API: the audit log and the metrics registry
//! ([`Ops`]), and whether the backend can start sandboxes (`/readyz`).

use std::path::Path;
use std::sync::Arc;

use super::audit::{
    AdminAction, AdminAudit, AuditError, AuditEvent, AuditLog, AuditScope, AuditSinks,
};
use super::metrics::{Metrics, MetricsError};
use crate::sandbox::BackendKind;

#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("opening the audit log: {0}")]
    Audit(#[from] AuditError),
    #[error("setting up metrics: {0}")]
    Metrics(#[from] MetricsError),
}

/// The audit log and metrics of one server. `Default` has neither (the request-body fuzz
/// oracle); `cordon serve` always opens both.
#[derive(Clone, Default)]
pub struct Ops {
    pub audit: Option<Arc<AuditLog>>,
    pub metrics: Option<Arc<Metrics>>,
}

impl Ops {
    /// The audit log in `data` (`audit.db`) and a fresh registry.
    pub fn open(data: &Path) -> Result<Self, OpsError> {
        Ok(Self {
            audit: Some(Arc::new(AuditLog::open(data)?)),
            metrics: Some(Arc::new(Metrics::new()?)),
        })
    }

    /// Where a session's records go, when there is an audit log.
    pub fn sinks(&self) -> Option<AuditSinks> {
        self.audit.as_ref().map(|log| AuditSinks {
            log: log.clone(),
            metrics: self.metrics.clone(),
        })
    }

    /// The scope and sinks for `session` of `tenant`, acted on by `key_id`.
    pub fn scoped(
        &self,
        tenant: &str,
        key_id: Option<&str>,
        session: &str,
    ) -> Option<(AuditScope, AuditSinks)> {
        let sinks = self.sinks()?;
        Some((
            AuditScope {
                tenant: tenant.into(),
                key_id: key_id.map(str::to_string),
                session: session.into(),
            },
            sinks,
        ))
    }

    /// Records an administrative action in `tenant`'s chain (logged, not fatal, on failure).
    pub fn admin(&self, tenant: &str, actor: &str, action: AdminAction, target: &str) {
        self.append(
            tenant,
            &AuditEvent::Admin(AdminAudit {
                actor: actor.into(),
                action,
                target: target.into(),
            }),
        );
    }

    pub fn append(&self, tenant: &str, event: &AuditEvent) {
        if let Some(log) = &self.audit
            && let Err(e) = log.append(tenant, event)
        {
            tracing::error!(tenant, error = %e, "writing an audit record failed");
        }
    }

    /// Whether the audit database answers (none counts as ready).
    pub fn audit_ready(&self) -> bool {
        self.audit.as_ref().is_none_or(|log| log.ping())
    }
}

/// Whether `backend` can start a sandbox now: the Docker engine answers a ping, or the
/// local backend's agent binary is there.
pub async fn backend_ready(backend: BackendKind) -> bool {
    match backend {
        BackendKind::Local => crate::paths::find_agent_binary().is_ok(),
        BackendKind::Docker => match crate::sandbox::docker::connect().await {
            Ok(docker) => docker.ping().await.is_ok(),
            Err(_) => false,
        },
    }
}
