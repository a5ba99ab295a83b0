//! Protected paths: entries inside the writable workspace that sandboxed processes may not
//! change (`.git/hooks`, `.git/config`, `.claude/`, shell rc files...). Landlock cannot carve
//! a read-only hole in a writable tree, so the sandbox's own mount namespace does it: a
//! read-only bind mount over each one.
//!
//! A mount needs a mount point. For a protected path that does not exist yet, the launcher
//! creates an empty placeholder on the host at the shallowest missing component (so a
//! missing `.git` is protected as a whole, and a sandboxed `git init` cannot plant hooks),
//! records it in the session's state dir before creating it, and removes it at teardown
//! only if it is still the empty entry it created. Stale records of dead sessions are
//! cleaned at the next start ([`super::state::sweep_stale`]).
//!
//! Every proper ancestor of a protected path (e.g. `.git` for `.git/hooks`) becomes a
//! read-write self bind mount too: a mount point cannot be renamed or removed, so a
//! sandboxed `mv .git .git.old && mkdir -p .git/hooks` cannot sidestep the protection.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::LaunchError;
use crate::beneath;

/// What kind of entry a protected path is (and what placeholder stands in for it).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
}

/// One protected path, relative to the workspace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProtectedPath {
    pub path: PathBuf,
    pub kind: EntryKind,
    /// What a missing file's placeholder holds (empty when `None`). A file whose mere
    /// existence changes what a host tool does (git's `commondir`) gets a harmless content
    /// instead of an empty placeholder, which that tool would refuse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
}

impl ProtectedPath {
    /// An entry whose placeholder (if it needs one) is empty.
    pub fn new(path: impl Into<PathBuf>, kind: EntryKind) -> Self {
        Self {
            path: path.into(),
            kind,
            placeholder: None,
        }
    }

    /// Relative, normal components only: no `..`, no root, no `.`.
    pub fn validate(&self) -> Result<(), LaunchError> {
        let ok = self.path.components().count() > 0
            && self
                .path
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if ok {
            Ok(())
        } else {
            Err(LaunchError::Protected {
                path: self.path.clone(),
                why: "must be a relative path of plain components".into(),
            })
        }
    }
}

/// A placeholder the launcher must create (relative to the workspace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub rel: PathBuf,
    pub kind: EntryKind,
    /// A file placeholder's content (empty when `None`).
    pub content: Option<String>,
}

/// The mounts to make inside the sandbox, all relative to the workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Read-only bind mounts, shallowest first.
    pub read_only: Vec<PathBuf>,
    /// Read-write self binds of ancestors (so they cannot be renamed), shallowest first.
    pub anchors: Vec<PathBuf>,
    /// Entries to create on the host before mounting.
    pub placeholders: Vec<Placeholder>,
    /// Entries hidden from every sandboxed read (denied-read rules), see
    /// [`super::denied`]; filled in after [`plan`].
    pub hidden: Vec<(PathBuf, EntryKind)>,
}

/// Decides what to mount and which placeholders to create for `list` in `workspace`.
/// Refuses symlinks on the way: a mount over a link would land wherever it points.
pub fn plan(workspace: &Path, list: &[ProtectedPath]) -> Result<Plan, LaunchError> {
    let mut sorted: Vec<&ProtectedPath> = list.iter().collect();
    sorted.sort_by_key(|p| p.path.components().count());
    let mut targets: Vec<PathBuf> = Vec::new();
    let mut placeholders = Vec::new();
    for entry in sorted {
        entry.validate()?;
        if targets.iter().any(|t| entry.path.starts_with(t)) {
            continue;
        }
        let comps: Vec<Component> = entry.path.components().collect();
        let mut rel = PathBuf::new();
        for (i, comp) in comps.iter().enumerate() {
            rel.push(comp);
            let last = i + 1 == comps.len();
            match std::fs::symlink_metadata(workspace.join(&rel)) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(LaunchError::Protected {
                        path: rel,
                        why: "is a symlink; refusing to start (a read-only mount over it \
                              would protect its target, not the link)"
                            .into(),
                    });
                }
                // The entry itself, or a non-directory ancestor (a `.git` file of a
                // worktree): protect it as it stands.
                Ok(m) if last || !m.is_dir() => {
                    targets.push(rel.clone());
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    let (kind, content) = if last {
                        (entry.kind, entry.placeholder.clone())
                    } else {
                        (EntryKind::Dir, None)
                    };
                    placeholders.push(Placeholder {
                        rel: rel.clone(),
                        kind,
                        content,
                    });
                    targets.push(rel.clone());
                    break;
                }
                Err(e) => {
                    return Err(LaunchError::Protected {
                        path: rel,
                        why: e.to_string(),
                    });
                }
            }
        }
    }
    let mut anchors = BTreeSet::new();
    for t in &targets {
        let mut a = t.parent();
        while let Some(p) = a.filter(|p| !p.as_os_str().is_empty()) {
            anchors.insert(p.to_path_buf());
            a = p.parent();
        }
    }
    let mut anchors: Vec<PathBuf> = anchors.into_iter().collect();
    anchors.sort_by_key(|p| p.components().count());
    Ok(Plan {
        read_only: targets,
        anchors,
        placeholders,
        hidden: Vec::new(),
    })
}

/// One placeholder as recorded in the state dir (absolute path).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PlaceholderRecord {
    pub path: PathBuf,
    pub kind: EntryKind,
    /// Device and inode once created; `None` while only intended.
    #[serde(default)]
    pub id: Option<(u64, u64)>,
    /// A file placeholder's content; removed only while it still holds exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

const RECORD: &str = "placeholders.json";

fn save(state_dir: &Path, records: &[PlaceholderRecord]) -> Result<(), LaunchError> {
    let err = |source| LaunchError::State {
        path: state_dir.join(RECORD),
        source,
    };
    let text = serde_json::to_vec(records).map_err(|e| err(e.into()))?;
    let tmp = state_dir.join(".placeholders.json.tmp");
    super::state::write_private(&tmp, &text).map_err(err)?;
    std::fs::rename(&tmp, state_dir.join(RECORD)).map_err(err)
}

/// Reads the record; a missing or damaged record means nothing to clean.
pub fn load(state_dir: &Path) -> Vec<PlaceholderRecord> {
    std::fs::read(state_dir.join(RECORD))
        .ok()
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default()
}

/// Creates the placeholders, recording them all before any exists so a crash never leaves
/// an unrecorded one (a record without an id still names a path to clean). Two writes of
/// the record in all, not one per placeholder: a session start creates a dozen. They belong
/// to `owner` (the workspace's owner), so a leftover is the user's to delete.
pub fn create_placeholders(
    state_dir: &Path,
    workspace: &Path,
    placeholders: &[Placeholder],
    owner: (u32, u32),
) -> Result<(), LaunchError> {
    if placeholders.is_empty() {
        return Ok(());
    }
    let mut records = load(state_dir);
    let first = records.len();
    records.extend(placeholders.iter().map(|ph| PlaceholderRecord {
        path: workspace.join(&ph.rel),
        kind: ph.kind,
        id: None,
        content: ph.content.clone(),
    }));
    save(state_dir, &records)?;
    for (i, ph) in placeholders.iter().enumerate() {
        let path = workspace.join(&ph.rel);
        let made = match ph.kind {
            EntryKind::File => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .and_then(|mut f| {
                    let content = ph.content.as_deref().unwrap_or("");
                    std::io::Write::write_all(&mut f, content.as_bytes())
                }),
            EntryKind::Dir => std::fs::create_dir(&path),
        };
        let fail = |why: String| LaunchError::Protected {
            path: ph.rel.clone(),
            why,
        };
        if let Err(e) = made {
            // Not ours: forget it and the ones not yet made; keep those already made.
            records.truncate(first + i);
            save(state_dir, &records)?;
            return Err(fail(format!("creating its placeholder: {e}")));
        }
        let mut meta = std::fs::symlink_metadata(&path)
            .map_err(|e| fail(format!("stat of its placeholder: {e}")))?;
        // Its owner's already (Cordon runs as the workspace's owner): no chown, which would
        // cost a journalled inode update.
        if (meta.uid(), meta.gid()) != owner {
            std::os::unix::fs::lchown(&path, Some(owner.0), Some(owner.1))
                .map_err(|e| fail(format!("chown of its placeholder: {e}")))?;
            meta = std::fs::symlink_metadata(&path)
                .map_err(|e| fail(format!("stat of its placeholder: {e}")))?;
        }
        records[first + i].id = Some(beneath::identity(&meta));
    }
    save(state_dir, &records)
}

/// Removes every recorded placeholder that is still the empty entry the launcher made;
/// anything else (written to, replaced) is left alone. Idempotent.
///
/// `workspace` is the workspace the session's state records (its launch config, its
/// session record): a record naming a path outside it, or reaching it through a link, is
/// ignored with a warning, never acted on ([`crate::beneath::recorded`]).
pub fn remove_placeholders(state_dir: &Path, workspace: &Path) {
    let records = load(state_dir);
    if records.is_empty() {
        let _ = std::fs::remove_file(state_dir.join(RECORD));
        return;
    }
    let ws = match beneath::RecordedWorkspace::open(workspace) {
        Ok(ws) => ws,
        Err(e) => {
            tracing::warn!(state = %state_dir.display(), "placeholders left in place: {e}");
            return;
        }
    };
    for rec in records.iter().rev() {
        let expect = match rec.kind {
            EntryKind::File => match rec.content.as_deref() {
                Some(content) => beneath::Expect::File(content.as_bytes()),
                None => beneath::Expect::EMPTY_FILE,
            },
            EntryKind::Dir => beneath::Expect::Dir,
        };
        if let Err(e) = ws.remove_if(&rec.path, rec.id, expect) {
            tracing::warn!(path = %rec.path.display(), "placeholder left in place: {e}");
        }
    }
    let _ = std::fs::remove_file(state_dir.join(RECORD));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pp(path: &str, kind: EntryKind) -> ProtectedPath {
        ProtectedPath::new(path, kind)
    }

    fn list() -> Vec<ProtectedPath> {
        vec![
            pp(".git/hooks", EntryKind::Dir),
            pp(".git/config", EntryKind::File),
            pp(".claude", EntryKind::Dir),
            pp(".bashrc", EntryKind::File),
        ]
    }

    #[test]
    fn missing_git_is_protected_whole() {
        let ws = tempfile::tempdir().unwrap();
        let plan = plan(ws.path(), &list()).unwrap();
        assert!(plan.read_only.contains(&PathBuf::from(".git")));
        assert!(!plan.read_only.contains(&PathBuf::from(".git/hooks")));
        assert!(plan.placeholders.contains(&Placeholder {
            rel: ".git".into(),
            kind: EntryKind::Dir,
            content: None,
        }));
        assert!(plan.placeholders.contains(&Placeholder {
            rel: ".bashrc".into(),
            kind: EntryKind::File,
            content: None,
        }));
        assert!(plan.anchors.is_empty());
    }

    #[test]
    fn existing_git_gets_anchor_and_children() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
        let plan = plan(ws.path(), &list()).unwrap();
        assert_eq!(plan.anchors, vec![PathBuf::from(".git")]);
        assert!(plan.read_only.contains(&PathBuf::from(".git/hooks")));
        assert!(plan.read_only.contains(&PathBuf::from(".git/config")));
        assert!(plan.placeholders.contains(&Placeholder {
            rel: ".git/config".into(),
            kind: EntryKind::File,
            content: None,
        }));
    }

    #[test]
    fn git_file_of_a_worktree_is_protected_itself() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join(".git"), "gitdir: /elsewhere\n").unwrap();
        let plan = plan(ws.path(), &list()).unwrap();
        assert!(plan.read_only.contains(&PathBuf::from(".git")));
        assert!(!plan.placeholders.iter().any(|p| p.rel.starts_with(".git")));
    }

    #[test]
    fn symlinks_are_refused() {
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc", ws.path().join(".claude")).unwrap();
        assert!(plan(ws.path(), &list()).is_err());
    }

    #[test]
    fn bad_entries_are_refused() {
        for bad in ["../x", "/etc/passwd", "a/../b", "."] {
            assert!(pp(bad, EntryKind::File).validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn placeholders_are_removed_only_while_empty() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let phs = vec![
            Placeholder {
                rel: ".bashrc".into(),
                kind: EntryKind::File,
                content: None,
            },
            Placeholder {
                rel: ".claude".into(),
                kind: EntryKind::Dir,
                content: None,
            },
            Placeholder {
                rel: ".envrc".into(),
                kind: EntryKind::File,
                content: None,
            },
            Placeholder {
                rel: "commondir".into(),
                kind: EntryKind::File,
                content: Some(".\n".into()),
            },
            Placeholder {
                rel: "changed".into(),
                kind: EntryKind::File,
                content: Some(".\n".into()),
            },
        ];
        let owner = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        let root = ws.path().canonicalize().unwrap();
        create_placeholders(state.path(), &root, &phs, owner).unwrap();
        assert!(ws.path().join(".bashrc").is_file());
        assert_eq!(
            std::fs::read_to_string(ws.path().join("commondir")).unwrap(),
            ".\n"
        );
        std::fs::write(ws.path().join(".envrc"), "user data").unwrap();
        std::fs::write(ws.path().join("changed"), "..\n").unwrap();
        remove_placeholders(state.path(), &root);
        assert!(!ws.path().join(".bashrc").exists());
        assert!(
            !ws.path().join("commondir").exists(),
            "content placeholder removed"
        );
        assert!(ws.path().join("changed").exists(), "changed content kept");
        assert!(!ws.path().join(".claude").exists());
        assert!(ws.path().join(".envrc").exists(), "user content kept");
        remove_placeholders(state.path(), &root);
    }
}
