//! After an orchestrator crash: find the containers it left (by their `cordon.session`
//! label) and remove them, with their run directories and workspace grants, so none leak.
//!
//! Removal rather than re-adoption: a session's agent accepts one controller for its whole
//! life (the dead orchestrator was it), so a surviving container cannot be talked to
//! again; the next call of that session starts a fresh sandbox on the same workspace.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::ListContainersOptionsBuilder;

use super::container::{self, SessionRecord};
use super::{access, docker_err, labels};
use crate::sandbox::SandboxError;

/// One container a previous orchestrator left.
#[derive(Debug, Clone)]
pub struct Orphan {
    pub container_id: String,
    pub session_id: String,
    pub uid: Option<u32>,
    pub run_dir: Option<PathBuf>,
}

/// Every container carrying Cordon's session label, running or not.
pub async fn find(docker: &Docker) -> Result<Vec<Orphan>, SandboxError> {
    let filters = HashMap::from([("label".to_string(), vec![labels::SESSION.to_string()])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let list = docker
        .list_containers(Some(options))
        .await
        .map_err(docker_err("list containers"))?;
    Ok(list
        .into_iter()
        .filter_map(|c| {
            let labels = c.labels.unwrap_or_default();
            Some(Orphan {
                container_id: c.id?,
                session_id: labels.get(labels::SESSION)?.clone(),
                uid: labels.get(labels::UID).and_then(|u| u.parse().ok()),
                run_dir: labels.get(labels::RUN_DIR).map(PathBuf::from),
            })
        })
        .collect())
}

/// Removes every labelled container of this installation (its run directory lies under
/// `run_root`, i.e. the same `$CORDON_HOME`) whose session is not in `keep`, and any
/// labelled container whose run directory no longer exists; returns what it removed.
/// Live containers of other installations on the same engine are left alone.
pub async fn reconcile(
    docker: &Docker,
    run_root: &Path,
    keep: &HashSet<String>,
) -> Result<Vec<Orphan>, SandboxError> {
    let mut removed = Vec::new();
    for orphan in find(docker).await? {
        let ours = orphan
            .run_dir
            .as_ref()
            .is_some_and(|d| d.starts_with(run_root));
        // A container whose run directory is gone (any installation's) can never be
        // reached again: its socket went with the directory.
        let unreachable = orphan.run_dir.as_ref().is_some_and(|d| !d.exists());
        if !(ours || unreachable) || keep.contains(&orphan.session_id) {
            continue;
        }
        if let Err(e) = container::remove(docker, &orphan.container_id).await {
            tracing::warn!(
                "cannot remove orphaned container {}: {e}",
                orphan.container_id
            );
            continue;
        }
        if let Some(dir) = &orphan.run_dir {
            clean_run_dir(dir);
        }
        tracing::info!(
            "removed orphaned sandbox container {} of session {}",
            orphan.container_id,
            orphan.session_id
        );
        removed.push(orphan);
    }
    Ok(removed)
}

/// Revokes the workspace grant recorded in `dir/session.json`, then removes `dir`.
/// The record is host-only (the container sees `dir/sock` alone), so it is trustworthy.
fn clean_run_dir(dir: &Path) {
    let record = std::fs::read(dir.join("session.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<SessionRecord>(&b).ok());
    if let Some(SessionRecord {
        uid,
        workspace: Some(ws),
        ..
    }) = record
        && let Err(e) = access::revoke(&ws, uid)
    {
        tracing::warn!("revoking workspace access of uid {uid}: {e}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
