//! Rewinding: the files (from the shadow store) and, optionally, the conversation (a new
//! session whose transcript stops before the chosen user message).

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::git::{Git, nul_split};
use super::{Captured, CheckpointError, RewindReport};
use crate::session::{RecordBody, SessionInfo, SessionStore};
use sandbox_agent::beneath::Beneath;

/// What existed when a checkpoint was taken but stayed out of its tree (ignored under its
/// own rules, too large, the sandbox's): never "created since".
#[derive(Debug, Clone, Default)]
pub(super) struct Kept(Vec<PathBuf>);

impl Kept {
    /// Parses the NUL-separated list the capture wrote (directories end in `/`).
    pub(super) fn parse(list: &[u8]) -> Self {
        Self(nul_split(list))
    }

    /// Whether `rel` is, or lies below, an entry of the list.
    pub(super) fn covers(&self, rel: &Path) -> bool {
        self.0.iter().any(|k| rel.starts_with(k))
    }
}

/// Makes the work tree match `target` where it differs from `now` (a fresh capture).
/// Without `kept` (a checkpoint older than the list), nothing is removed: what it cannot
/// tell apart from a pre-existing file is reported as kept instead.
pub(super) fn restore(
    git: &Git,
    target: &str,
    now: &Captured,
    kept: Option<&Kept>,
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
            // In the checkpoint, not now: created since, unless it existed then unrecorded.
            Some(b'A') if kept.is_some_and(|k| !k.covers(path)) => {
                report.removed.push(path.clone());
            }
            Some(b'A') => report.kept.push(path.clone()),
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
    let ws = Beneath::open(&git.work_tree).map_err(|e| CheckpointError::Restore {
        path: git.work_tree.clone(),
        why: e.to_string(),
    })?;
    for rel in &report.removed {
        remove_inside(&ws, rel, &target_dirs)?;
    }
    if !report.restored.is_empty() {
        write_back(git, &ws, target, &report.restored)?;
    }
    Ok(report)
}

/// Removes `rel` (a file or symlink created since the checkpoint) and then its parent
/// directories that became empty and did not exist in the checkpoint, all through held
/// directory descriptors: a symlink on the way ends the walk (nothing of ours is below it),
/// and a directory swapped in after it was opened is changed in place, inside the tree.
fn remove_inside(
    ws: &Beneath,
    rel: &Path,
    target_dirs: &BTreeSet<PathBuf>,
) -> Result<(), CheckpointError> {
    let refuse = |e: std::io::Error| CheckpointError::Restore {
        path: rel.to_path_buf(),
        why: e.to_string(),
    };
    ws.remove(rel).map_err(refuse)?;
    let mut dir = rel.parent();
    while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
        if target_dirs.contains(d) {
            break;
        }
        // Only an empty directory goes; a non-empty one stays (and so do its parents).
        ws.remove(d).map_err(refuse)?;
        dir = d.parent();
    }
    Ok(())
}

/// One entry of a tree: its mode and object.
struct Entry {
    mode: String,
    oid: String,
}

/// Writes `paths` of `tree` into the work tree through held directory descriptors,
/// replacing whatever is in the way (a symlink in place of a directory included) rather
/// than writing through it. As root in someone else's workspace, what is written and the
/// directories made for it are the workspace owner's, so the sandbox user (mapped to that
/// owner) can still change them.
fn write_back(
    git: &Git,
    ws: &Beneath,
    tree: &str,
    paths: &[PathBuf],
) -> Result<(), CheckpointError> {
    let wanted: BTreeSet<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let listing = git.run(
        "ls-tree",
        None,
        &["ls-tree", "-r", "-z", "--full-tree", tree],
        None,
    )?;
    let mut entries: HashMap<PathBuf, Entry> = HashMap::new();
    for line in listing.split(|b| *b == 0).filter(|l| !l.is_empty()) {
        let Some(tab) = line.iter().position(|b| *b == b'\t') else {
            continue;
        };
        let path = PathBuf::from(OsStr::from_bytes(&line[tab + 1..]));
        if !wanted.contains(path.as_path()) {
            continue;
        }
        let head = String::from_utf8_lossy(&line[..tab]);
        let mut parts = head.split(' ');
        let (Some(mode), Some(_kind), Some(oid)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        entries.insert(
            path,
            Entry {
                mode: mode.into(),
                oid: oid.into(),
            },
        );
    }
    let blobs = read_blobs(git, entries.values().map(|e| e.oid.as_str()))?;
    let owner = owner_for_writes(ws.path());
    for rel in paths {
        let Some(entry) = entries.get(rel) else {
            continue;
        };
        let content = blobs.get(&entry.oid).map_or(&[][..], Vec::as_slice);
        let done = match entry.mode.as_str() {
            "120000" => ws.write_symlink(rel, OsStr::from_bytes(content), owner),
            // A nested repository recorded as a gitlink: its directory, empty.
            "160000" => ws.make_dirs(rel, owner).map(drop),
            mode => ws.write_file(rel, content, mode == "100755", owner),
        };
        done.map_err(|e| CheckpointError::Restore {
            path: rel.clone(),
            why: e.to_string(),
        })?;
    }
    Ok(())
}

/// The contents of `oids`, read in one `git cat-file --batch`.
fn read_blobs<'a>(
    git: &Git,
    oids: impl Iterator<Item = &'a str>,
) -> Result<HashMap<String, Vec<u8>>, CheckpointError> {
    let mut input = Vec::new();
    for oid in oids {
        input.extend_from_slice(oid.as_bytes());
        input.push(b'\n');
    }
    let out = git.run("cat-file", None, &["cat-file", "--batch"], Some(&input))?;
    let mut blobs = HashMap::new();
    let mut at = 0;
    while at < out.len() {
        let Some(nl) = out[at..].iter().position(|b| *b == b'\n') else {
            break;
        };
        let header = String::from_utf8_lossy(&out[at..at + nl]).to_string();
        at += nl + 1;
        let mut parts = header.split(' ');
        let (Some(oid), Some(_kind), Some(size)) = (parts.next(), parts.next(), parts.next())
        else {
            // "<oid> missing": no content follows.
            continue;
        };
        let Ok(size) = size.parse::<usize>() else {
            continue;
        };
        let end = (at + size).min(out.len());
        blobs.insert(oid.to_string(), out[at..end].to_vec());
        at = end + 1;
    }
    Ok(blobs)
}

/// Who should own what a rewind writes: the workspace's owner when we are root writing
/// into someone else's workspace; otherwise whoever we are (no chown).
fn owner_for_writes(workspace: &Path) -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let meta = std::fs::metadata(workspace).ok()?;
    (meta.uid() != 0).then(|| (meta.uid(), meta.gid()))
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
        .position(|r| {
            r.uuid == user_message_uuid && r.is_turn() && matches!(r.body, RecordBody::User { .. })
        })
        .ok_or_else(|| RewindConversationError::UnknownMessage {
            session: session_id.into(),
            uuid: user_message_uuid.into(),
        })?;
    let (new_info, mut transcript) = store.create(&info.workspace, &info.model)?;
    for rec in loaded.records[..cut].iter().filter(|r| r.is_conversation()) {
        transcript.append(rec.body.clone())?;
    }
    transcript.sync()?;
    Ok(new_info)
}
