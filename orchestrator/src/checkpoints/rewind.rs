//! Rewinding: the files (from the shadow store) and, optionally, the conversation (a new
//! session whose transcript stops before the chosen user message).

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::git::{Git, nul_split};
use super::{Captured, CheckpointError, RewindReport};
use crate::session::{RecordBody, SessionInfo, SessionStore};

/// Makes the work tree match `target` where it differs from `now` (a fresh capture).
pub(super) fn restore(
    git: &Git,
    target: &str,
    now: &Captured,
) -> Result<RewindReport, CheckpointError> {
    let out = git.run(
        "diff-tree",
        None,
        &[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-status",
            target,
            &now.tree,
        ],
        None,
    )?;
    let mut report = RewindReport {
        skipped: now.skipped.clone(),
        ..RewindReport::default()
    };
    let fields = nul_split(&out);
    for pair in fields.chunks(2) {
        let [status, path] = pair else { continue };
        match status.as_os_str().as_bytes().first() {
            // In the checkpoint, not now: created since.
            Some(b'A') => report.removed.push(path.clone()),
            // Deleted, changed, or changed type since.
            Some(_) => report.restored.push(path.clone()),
            None => {}
        }
    }
    let target_dirs: BTreeSet<PathBuf> = nul_split(&git.run(
        "ls-tree",
        None,
        &["ls-tree", "-r", "-d", "-z", "--name-only", target],
        None,
    )?)
    .into_iter()
    .collect();
    for rel in &report.removed {
        remove_inside(&git.work_tree, rel, &target_dirs)?;
    }
    if !report.restored.is_empty() {
        checkout(git, target, &report.restored)?;
        give_back(&git.work_tree, &report.restored);
    }
    Ok(report)
}

/// Writes `paths` of `tree` into the work tree through a temporary index. git's checkout
/// replaces whatever is in the way (a symlink in place of a directory included) rather
/// than writing through it.
fn checkout(git: &Git, tree: &str, paths: &[PathBuf]) -> Result<(), CheckpointError> {
    let index = git.git_dir.join("rewind.index");
    let _ = std::fs::remove_file(&index);
    git.run("read-tree", Some(&index), &["read-tree", tree], None)?;
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p.as_os_str().as_bytes());
        input.push(0);
    }
    let result = git.run(
        "checkout-index",
        Some(&index),
        &["checkout-index", "-f", "-z", "--stdin"],
        Some(&input),
    );
    let _ = std::fs::remove_file(&index);
    result.map(drop)
}

/// Removes `rel` (a file or symlink created since the checkpoint) and then its parent
/// directories that became empty and did not exist in the checkpoint. Refuses paths with
/// a symlink or `..` on the way, so nothing outside the workspace is ever touched.
fn remove_inside(
    workspace: &Path,
    rel: &Path,
    target_dirs: &BTreeSet<PathBuf>,
) -> Result<(), CheckpointError> {
    let refuse = |why: &str| CheckpointError::Restore {
        path: rel.to_path_buf(),
        why: why.into(),
    };
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(refuse("not a plain relative path"));
    }
    let mut at = workspace.to_path_buf();
    let parent_count = rel.components().count().saturating_sub(1);
    for comp in rel.components().take(parent_count) {
        at.push(comp);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            // Already gone (or replaced): nothing of ours to remove below it.
            Ok(m) if m.file_type().is_symlink() => return Ok(()),
            _ => return Ok(()),
        }
    }
    let full = workspace.join(rel);
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.is_dir() => {
            // A nested repository recorded as a gitlink: removed only when empty.
            let _ = std::fs::remove_dir(&full);
        }
        Ok(_) => std::fs::remove_file(&full).map_err(|e| refuse(&e.to_string()))?,
        Err(_) => {}
    }
    let mut dir = rel.parent();
    while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
        if target_dirs.contains(d) || std::fs::remove_dir(workspace.join(d)).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// When a root-run rewind wrote files into someone else's workspace, hand them (and the
/// directories it created for them) to the workspace's owner, so the sandbox user, which
/// is mapped to that owner, can still change them.
fn give_back(workspace: &Path, restored: &[PathBuf]) {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let Ok(meta) = std::fs::metadata(workspace) else {
        return;
    };
    if meta.uid() == 0 {
        return;
    }
    let owner = (meta.uid(), meta.gid());
    for rel in restored {
        let mut at = workspace.to_path_buf();
        for comp in rel.components() {
            at.push(comp);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.uid() == 0) {
                let _ = std::os::unix::fs::lchown(&at, Some(owner.0), Some(owner.1));
            }
        }
    }
}

/// Why a conversation could not be rewound.
#[derive(Debug, thiserror::Error)]
pub enum RewindConversationError {
    #[error("reading the session: {0}")]
    Session(#[from] crate::session::StoreError),
    #[error("reading the transcript: {0}")]
    Transcript(#[from] crate::session::TranscriptError),
    #[error("session {session} has no user message {uuid}")]
    UnknownMessage { session: String, uuid: String },
}

/// Starts a new session whose conversation is the original's up to (not including) the
/// user message `user_message_uuid`; the original transcript is left as it is. Returns
/// the new session.
pub fn rewind_conversation(
    store: &SessionStore,
    session_id: &str,
    user_message_uuid: &str,
) -> Result<SessionInfo, RewindConversationError> {
    let info = store.get(session_id)?;
    let loaded = crate::session::Loaded::read(&info.transcript)?;
    let cut = loaded
        .records
        .iter()
        .position(|r| r.uuid == user_message_uuid && matches!(r.body, RecordBody::User { .. }))
        .ok_or_else(|| RewindConversationError::UnknownMessage {
            session: session_id.into(),
            uuid: user_message_uuid.into(),
        })?;
    let (new_info, mut transcript) = store.create(&info.workspace, &info.model)?;
    for rec in loaded.records[..cut]
        .iter()
        .filter(|r| r.is_turn() || matches!(r.body, RecordBody::Compaction { .. }))
    {
        transcript.append(rec.body.clone())?;
    }
    transcript.sync()?;
    Ok(new_info)
}
