//! The session's additional directories (`permissions.additionalDirectories`) as its
//! sandbox gets them: writable beside the workspace, at their own absolute paths.
//!
//! The settings decide which entries count (a repository's only once it is trusted, see
//! `policies/untrusted-settings.json`); before a backend mounts one, it is checked as a
//! workspace is ([`crate::workspace_location`]): not `/`, not a home directory or an
//! ancestor of one, nothing holding or inside Cordon's data directory, not a directory
//! every local user may write. It must exist, be a directory and be given by its real
//! path (no symbolic link on the way: the mount would follow it where the rules do not
//! look). One inside the workspace, or inside another entry, is already covered and
//! dropped; one containing the workspace is refused (the workspace's own protections
//! would not cover the rest of it). A refusal names the setting and the path.

use std::path::{Path, PathBuf};

use crate::workspace_location::Forbidden;

/// The setting the directories come from, as refusals name it.
pub const SETTING: &str = "permissions.additionalDirectories";

/// Why an additional directory is not given to the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing the {SETTING} entry {path}: {why}")]
pub struct AdditionalDirError {
    pub path: PathBuf,
    pub why: String,
}

/// The directories of `dirs` the sandbox mounts, canonical, in order, once each passed
/// the checks above against `workspace` (canonical) and `forbidden`.
pub fn checked(
    dirs: &[PathBuf],
    workspace: &Path,
    forbidden: &Forbidden,
) -> Result<Vec<PathBuf>, AdditionalDirError> {
    let mut kept: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let Some(dir) = check_one(dir, workspace, forbidden)? else {
            continue;
        };
        if kept.iter().any(|k| dir.starts_with(k)) {
            continue;
        }
        kept.retain(|k| !k.starts_with(&dir));
        kept.push(dir);
    }
    Ok(kept)
}

/// One entry: `None` when the workspace already covers it.
fn check_one(
    dir: &Path,
    workspace: &Path,
    forbidden: &Forbidden,
) -> Result<Option<PathBuf>, AdditionalDirError> {
    let refuse = |why: String| AdditionalDirError {
        path: dir.to_path_buf(),
        why,
    };
    if !dir.is_absolute() {
        return Err(refuse("it is not an absolute path".into()));
    }
    let given = crate::permissions::paths::clean(dir);
    let real = std::fs::canonicalize(&given).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => refuse("it does not exist".into()),
        _ => refuse(e.to_string()),
    })?;
    if real != given {
        return Err(refuse(format!(
            "it is reached through a symbolic link (it leads to {}); give its real path",
            real.display()
        )));
    }
    if !real.is_dir() {
        return Err(refuse("it is not a directory".into()));
    }
    if real.starts_with(workspace) {
        return Ok(None);
    }
    forbidden.check(&real).map_err(|e| refuse(e.reason()))?;
    if workspace.starts_with(&real) {
        return Err(refuse(format!(
            "it contains the workspace {}; add the directories beside it instead",
            workspace.display()
        )));
    }
    Ok(Some(real))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        ws: PathBuf,
        forbidden: Forbidden,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["proj/ws/sub", "home/me/other/deep", "data/cordon", "notes"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let forbidden = Forbidden::new(vec![root.join("home/me")], Some(root.join("data/cordon")));
        Fixture {
            ws: root.join("proj/ws"),
            _dir: dir,
            root,
            forbidden,
        }
    }

    fn check(f: &Fixture, dirs: &[PathBuf]) -> Result<Vec<PathBuf>, AdditionalDirError> {
        checked(dirs, &f.ws, &f.forbidden)
    }

    #[test]
    fn directories_beside_the_workspace_are_kept_once_and_inside_ones_dropped() {
        let f = fixture();
        let other = f.root.join("home/me/other");
        let got = check(
            &f,
            &[
                f.ws.join("sub"),
                other.join("deep"),
                other.clone(),
                f.root.join("notes/../notes"),
                other.clone(),
            ],
        )
        .unwrap();
        assert_eq!(got, vec![other, f.root.join("notes")]);
    }

    #[test]
    fn what_a_workspace_may_not_be_is_refused_naming_the_setting() {
        let f = fixture();
        let shared = f.root.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        for (dir, why) in [
            (PathBuf::from("/"), "it is /"),
            (f.root.join("home/me"), "home directory"),
            (f.root.join("home"), "home directory"),
            (f.root.join("data"), "Cordon's data directory"),
            (f.root.join("data/cordon"), "Cordon's data directory"),
            (shared, "every local user may write"),
            (f.root.join("missing"), "does not exist"),
            (f.root.join("proj/ws/.."), "contains the workspace"),
        ] {
            let err = check(&f, std::slice::from_ref(&dir)).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("refusing the {SETTING} entry {}", dir.display())),
                "{text}"
            );
            assert!(text.contains(why), "{}: {text}", dir.display());
        }
    }

    #[test]
    fn a_directory_given_through_a_link_or_a_file_is_refused() {
        let f = fixture();
        let link = f.root.join("link");
        std::os::unix::fs::symlink(f.root.join("notes"), &link).unwrap();
        let err = check(&f, &[link]).unwrap_err();
        assert!(err.why.contains("symbolic link"), "{err}");
        std::fs::write(f.root.join("file"), "").unwrap();
        let err = check(&f, &[f.root.join("file")]).unwrap_err();
        assert!(err.why.contains("not a directory"), "{err}");
    }
}
