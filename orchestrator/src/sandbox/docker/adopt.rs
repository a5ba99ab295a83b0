//! After an orchestrator crash: find the containers it left (by their `cordon.session`
//! label) and remove them, with their run directories and workspace grants, so none leak.
//!
//! Several orchestrator processes may share one engine and one `$CORDON_HOME` (two
//! `cordon run` sessions, a server and a CLI, parallel tests). Each container is labelled
//! with its owner (pid and process start time); reconcile removes only containers whose
//! owner is gone, never a live one of another process.
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
    /// The process that created it, when labelled.
    pub owner: Option<Owner>,
}

/// An orchestrator process, named so that a reused pid is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// Field 22 of `/proc/PID/stat`: the start time in clock ticks since boot.
    pub start: u64,
}

impl Owner {
    /// Whether this process still runs (same pid, same start time).
    pub fn is_alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

/// This process as an [`Owner`].
pub fn this_process() -> Option<Owner> {
    let pid = std::process::id();
    Some(Owner {
        pid,
        start: start_time(pid)?,
    })
}

/// The start time of process `pid`, `None` when there is no such process.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Field 22 of a `/proc/PID/stat` line. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`: the next field is number 3.
fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
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
                owner: owner_label(&labels),
            })
        })
        .collect())
}

/// Whether the container called `name` is a leftover that a new start of the same session
/// may replace: one this process made earlier (a sandbox that died and could not be
/// removed then, e.g. while the Docker daemon restarted), or one whose owner process is
/// gone. A container another live process owns is never taken.
pub async fn replaceable(docker: &bollard::Docker, name: &str) -> bool {
    let Ok(info) = docker.inspect_container(name, None).await else {
        return false;
    };
    let labels = info.config.and_then(|c| c.labels).unwrap_or_default();
    match owner_label(&labels) {
        Some(owner) => this_process().is_some_and(|me| me == owner) || !owner.is_alive(),
        None => false,
    }
}

fn owner_label(labels: &HashMap<String, String>) -> Option<Owner> {
    Some(Owner {
        pid: labels.get(labels::OWNER_PID)?.parse().ok()?,
        start: labels.get(labels::OWNER_START)?.parse().ok()?,
    })
}

/// Removes every labelled container of this installation (its run directory lies under
/// `run_root`, i.e. the same `$CORDON_HOME`) whose owner process is gone and whose session
/// is not in `keep`, and any labelled container whose run directory no longer exists and
/// whose owner is gone; returns what it removed. A container whose owner process is alive
/// is never removed (this process included: another backend instance may be using it),
/// even while its run directory is missing: its owner may be between creating the
/// container and its run directory, or tearing both down.
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
        // Unlabelled (older) containers count as ownerless.
        let owner_alive = orphan.owner.is_some_and(|o| o.is_alive());
        let removable = !owner_alive && (ours || unreachable);
        if !removable || keep.contains(&orphan.session_id) {
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
            clean_run_dir(run_root, dir);
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

/// Revokes the workspace grant recorded in `dir/session.json`, removes the placeholders it
/// records, then removes `dir`.
///
/// The record is host-only (the container sees `dir/sock` alone), but it is still checked
/// before anything is done on its word: a tampered record or container label must not
/// make Cordon change ACLs or delete files elsewhere on the host. Only a run directory of
/// this installation (a direct child of `run_root` named like one) is touched, and the
/// recorded workspace must be canonical and pass the location policy
/// ([`crate::workspace_location`]); the placeholders are then removed only beneath it.
fn clean_run_dir(run_root: &Path, dir: &Path) {
    if !is_run_dir_of(run_root, dir) {
        tracing::warn!(
            "not cleaning {}: not a run directory under {}",
            dir.display(),
            run_root.display()
        );
        return;
    }
    let record = std::fs::read(dir.join("session.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<SessionRecord>(&b).ok());
    // The additional directories' records, each acted on only beneath its own directory
    // once that passes the same policy.
    for (i, extra) in record.iter().flat_map(|r| r.additional.iter()).enumerate() {
        match recorded_workspace_ok(run_root, extra) {
            Ok(()) => {
                let records = dir.join(format!("extra-{i}"));
                super::masks::vet_git(&records, extra);
                super::masks::remove_placeholders(&records, extra);
            }
            Err(why) => tracing::warn!(
                "{}: placeholders left alone: the recorded additional directory {} {why}",
                dir.display(),
                extra.display()
            ),
        }
    }
    if let Some(SessionRecord {
        uid,
        workspace: Some(ws),
        acl,
        ..
    }) = record
    {
        match recorded_workspace_ok(run_root, &ws) {
            Ok(()) => {
                let undone = match acl {
                    Some(true) => access::revoke(&ws, uid, &dir.join(container::ACL_BACKUP)),
                    Some(false) => Ok(()),
                    None => access::revoke_legacy(&ws, uid),
                };
                if let Err(e) = undone {
                    tracing::warn!("revoking workspace access of uid {uid}: {e}");
                }
                // The container is gone: vet the git dirs its session made, then clean up.
                super::masks::vet_git(dir, &ws);
                super::masks::remove_placeholders(dir, &ws);
            }
            Err(why) => tracing::warn!(
                "{}: grant and placeholders left alone: the recorded workspace {} {why}",
                dir.display(),
                ws.display()
            ),
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Whether `dir` is one of this installation's run directories: `run_root/cordon-...`.
fn is_run_dir_of(run_root: &Path, dir: &Path) -> bool {
    dir.parent() == Some(run_root)
        && dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n.strip_prefix("cordon-")
                .is_some_and(|id| container::container_name(id) == n)
        })
}

/// Whether a workspace read from run state may be acted on.
fn recorded_workspace_ok(run_root: &Path, ws: &Path) -> Result<(), String> {
    if std::fs::canonicalize(ws).ok().as_deref() != Some(ws) {
        return Err("is not a canonical path of an existing directory".into());
    }
    crate::workspace_location::Forbidden::from_env()
        .with_data_dir(run_root)
        .check(ws)
        .map_err(|e| format!("is refused ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_even_with_odd_command_names() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 200 18446744073709551615";
        assert_eq!(parse_start_time(stat), Some(987_654));
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn only_this_installations_run_dirs_are_cleaned() {
        let root = Path::new("/h/.cordon/docker/run");
        assert!(is_run_dir_of(root, &root.join("cordon-abc_1.x")));
        for bad in [
            PathBuf::from("/h/.cordon/docker/run/../../../etc"),
            root.join("cordon-a/b"),
            root.join("other"),
            PathBuf::from("/etc/cordon-x"),
            root.to_path_buf(),
        ] {
            assert!(!is_run_dir_of(root, &bad), "{}", bad.display());
        }
    }

    /// A tampered session record naming a workspace of `/` (or one through a link)
    /// removes no placeholder it lists outside a real workspace; the run dir still goes.
    #[test]
    fn a_tampered_session_record_cannot_delete_host_files() {
        let run_root = tempfile::tempdir().unwrap();
        let run_root = run_root.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let outside = outside.path().canonicalize().unwrap();
        std::fs::write(outside.join("victim"), "").unwrap();
        std::os::unix::fs::symlink(&outside, run_root.join("ws-link")).unwrap();
        for ws in [PathBuf::from("/"), run_root.join("ws-link")] {
            let dir = run_root.join("cordon-s1");
            std::fs::create_dir_all(&dir).unwrap();
            let record = serde_json::json!({"session_id": "s1", "uid": 300_123, "workspace": ws});
            std::fs::write(dir.join("session.json"), record.to_string()).unwrap();
            let placeholders =
                serde_json::json!([{"path": outside.join("victim"), "kind": "file"}]);
            std::fs::write(dir.join("placeholders.json"), placeholders.to_string()).unwrap();
            clean_run_dir(&run_root, &dir);
            assert!(!dir.exists());
            assert!(outside.join("victim").exists(), "{}", ws.display());
        }
    }

    #[test]
    fn this_process_is_alive_and_a_different_start_is_not() {
        let me = this_process().unwrap();
        assert!(me.is_alive());
        let reused = Owner {
            start: me.start + 1,
            ..me
        };
        assert!(!reused.is_alive(), "a reused pid is not the owner");
        let gone = Owner {
            pid: u32::MAX - 1,
            start: me.start,
        };
        assert!(!gone.is_alive());
    }
}
