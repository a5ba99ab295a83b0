//! Deny rules bound in the kernel. A `Read(...)` or `Edit(...)` deny rule of the
//! session's settings binds every process of the sandbox, not only the model's tools: the
//! orchestrator resolves the rules to absolute paths inside the workspace (globs expanded
//! at start) and the launcher turns them into mounts in the sandbox's mount namespace:
//! - denied-write paths join the protected paths (read-only binds, ancestors pinned,
//!   placeholders for missing entries, see [`super::protected`]);
//! - denied-read paths are covered by an empty mode-0000 read-only file or tmpfs
//!   ([`super::mounts`]), so `cat .env` fails with EACCES.
//!
//! Limits: a denied-read path that does not exist at start is not masked (there is nothing
//! to hide; the tool-level rule still applies to what the session creates). A path whose
//! way contains a symlink is refused (the orchestrator already replaced links by their
//! targets; a link here means the workspace changed under us), failing the start closed.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use super::LaunchError;
use super::protected::{EntryKind, ProtectedPath};

fn refuse(path: &Path, why: &str) -> LaunchError {
    LaunchError::Protected {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// `path` relative to `workspace`: absolute, strictly inside, plain components only.
pub fn relative(workspace: &Path, path: &Path) -> Result<PathBuf, LaunchError> {
    let rel = path
        .strip_prefix(workspace)
        .map_err(|_| refuse(path, "a denied path must lie inside the workspace"))?;
    let plain =
        rel.components().count() > 0 && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !path.is_absolute() || !plain {
        return Err(refuse(
            path,
            "a denied path must be absolute, inside the workspace, without . or ..",
        ));
    }
    Ok(rel.to_path_buf())
}

/// Denied-write paths as protected entries (a missing one gets a file placeholder, which
/// blocks creating a file or a directory of that name alike).
pub fn write_entries(
    workspace: &Path,
    paths: &[PathBuf],
) -> Result<Vec<ProtectedPath>, LaunchError> {
    paths
        .iter()
        .map(|p| {
            let rel = relative(workspace, p)?;
            let kind = match std::fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => EntryKind::Dir,
                _ => EntryKind::File,
            };
            Ok(ProtectedPath::new(rel, kind))
        })
        .collect()
}

/// The denied-read paths that exist, with their kind, shallowest first; paths below an
/// already hidden directory are dropped (the directory covers them).
pub fn hidden(
    workspace: &Path,
    paths: &[PathBuf],
) -> Result<Vec<(PathBuf, EntryKind)>, LaunchError> {
    let mut rels: Vec<PathBuf> = paths
        .iter()
        .map(|p| relative(workspace, p))
        .collect::<Result<_, _>>()?;
    rels.sort_by_key(|p| p.components().count());
    rels.dedup();
    let mut out: Vec<(PathBuf, EntryKind)> = Vec::new();
    'next: for rel in rels {
        if out.iter().any(|(done, _)| rel.starts_with(done)) {
            continue;
        }
        let mut at = workspace.to_path_buf();
        let count = rel.components().count();
        for (i, comp) in rel.components().enumerate() {
            at.push(comp);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(refuse(
                        &rel,
                        "is reached through a symlink; refusing to start (a mask over a \
                         link would hide its target, not the rule's path)",
                    ));
                }
                Ok(m) if i + 1 == count => {
                    let kind = if m.is_dir() {
                        EntryKind::Dir
                    } else {
                        EntryKind::File
                    };
                    out.push((rel.clone(), kind));
                }
                Ok(m) if !m.is_dir() => continue 'next,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => continue 'next,
                Err(e) => return Err(refuse(&rel, &e.to_string())),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_be_plain_and_inside() {
        let ws = Path::new("/w/s");
        assert_eq!(
            relative(ws, Path::new("/w/s/a/.env")).unwrap(),
            PathBuf::from("a/.env")
        );
        for bad in ["/w/s", "/w/other", "/w/s/../x", "w/s/a"] {
            assert!(relative(ws, Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn hidden_keeps_existing_entries_shallowest_first() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::write(w.join(".env"), "SECRET").unwrap();
        std::fs::create_dir_all(w.join("secrets/sub")).unwrap();
        std::fs::write(w.join("secrets/sub/k.pem"), "k").unwrap();
        let got = hidden(
            w,
            &[
                w.join("secrets/sub/k.pem"),
                w.join(".env"),
                w.join("secrets"),
                w.join("missing/file"),
            ],
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                (PathBuf::from(".env"), EntryKind::File),
                (PathBuf::from("secrets"), EntryKind::Dir),
            ]
        );
    }

    #[test]
    fn symlinks_on_the_way_are_refused() {
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc", ws.path().join("link")).unwrap();
        assert!(hidden(ws.path(), &[ws.path().join("link/passwd")]).is_err());
        assert!(hidden(ws.path(), &[ws.path().join("link")]).is_err());
    }

    #[test]
    fn write_entries_keep_the_kind() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("config")).unwrap();
        let got = write_entries(
            ws.path(),
            &[ws.path().join("config"), ws.path().join("new.txt")],
        )
        .unwrap();
        assert_eq!(got[0].kind, EntryKind::Dir);
        assert_eq!(got[1].kind, EntryKind::File);
        assert_eq!(got[1].path, PathBuf::from("new.txt"));
    }
}
