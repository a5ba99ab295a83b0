//! The operating routes: `GET /metrics`, `GET /v1/audit`, and pausing and resuming a
//! session by hand (the web page's buttons; idle sessions pause on their own).

use axum::Json;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{AppState, Params};
use super::audit::AdminAction;
use super::auth::Caller;
use super::errors::ApiError;
use super::metrics::Metrics;

/// The Prometheus exposition. Series labelled with a tenant are shown to that tenant's
/// keys only: another tenant's name, session counts or token use are not a key's business.
pub async fn metrics(State(state): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    let Some(metrics) = state.ops.metrics.clone() else {
        return Err(ApiError::not_found("metrics"));
    };
    metrics.set_session_counts(state.session_counts());
    metrics.set_warm_pool(i64::try_from(state.warm_pool_size()).unwrap_or(i64::MAX));
    let text = only_tenant(&metrics.render(), &caller.tenant);
    Ok(([(header::CONTENT_TYPE, Metrics::content_type())], text).into_response())
}

/// Drops the sample lines labelled with a tenant other than `tenant`.
pub fn only_tenant(exposition: &str, tenant: &str) -> String {
    let own = format!("tenant=\"{}\"", escape_label(tenant));
    exposition
        .lines()
        .filter(|line| line.starts_with('#') || !line.contains("tenant=\"") || line.contains(&own))
        .flat_map(|line| [line, "\n"])
        .collect()
}

/// A label value as the text format writes it.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Records after this sequence number (the last one of the previous page).
    after: Option<i64>,
    limit: Option<u32>,
}

/// The caller's tenant's audit records, oldest first, a page at a time.
pub async fn audit(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
    let Some(log) = state.ops.audit.clone() else {
        return Err(ApiError::not_found("audit log"));
    };
    let limit = q.limit.unwrap_or(500).clamp(1, 5000);
    let after = q.after.unwrap_or(0).max(0);
    let tenant = caller.tenant.clone();
    let records = tokio::task::spawn_blocking(move || log.export(&tenant, after, limit + 1))
        .await
        .map_err(|e| ApiError::internal(format!("reading the audit log: {e}")))?
        .map_err(|e| ApiError::internal(format!("reading the audit log: {e}")))?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = records.len() > limit;
    let page: Vec<_> = records.into_iter().take(limit).collect();
    let next = more.then(|| page.last().map(|r| r.seq)).flatten();
    Ok(Json(json!({"records": page, "next_after": next})))
}

/// Stops the session's sandbox now (workspace and transcript kept); its next call resumes it.
pub async fn pause(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let session = state.get(&caller, &id)?;
    state.pause(&session).await;
    state.ops.admin(
        &caller.tenant,
        &caller.key_id,
        AdminAction::SessionPause,
        &id,
    );
    Ok(Json(session.view()))
}

/// Starts the session's sandbox again (as its next call would).
pub async fn resume(
    State(state): State<AppState>,
    caller: Caller,
    Params(id): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let session = state.get(&caller, &id)?;
    state.ensure_running(&session).await?;
    state.ops.admin(
        &caller.tenant,
        &caller.key_id,
        AdminAction::SessionResume,
        &id,
    );
    Ok(Json(session.view()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_tenants_series_are_dropped() {
        let text = "# HELP cordon_sessions x\n# TYPE cordon_sessions gauge\n\
                    cordon_sessions{state=\"idle\",tenant=\"a\"} 1\n\
                    cordon_sessions{state=\"idle\",tenant=\"b\"} 2\n\
                    cordon_warm_pool_size 0\n";
        let out = only_tenant(text, "a");
        assert!(out.contains("tenant=\"a\"} 1"));
        assert!(!out.contains("tenant=\"b\""));
        assert!(out.contains("cordon_warm_pool_size 0"));
        assert!(out.contains("# TYPE cordon_sessions gauge"));
    }
}
