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
//! would not cover the rest of it). Then the host's own rules, shared with the launcher
//! ([`sandbox_agent::hostside::extra_dir`]): owned by the workspace's owner, in no system
//! directory, no home, ancestor or dot-directory of one, no secret of
//! `policies/toolchains.json`, nobody else able to write it or swap a component of its
//! path. A backend mounts it from the fd [`open_for_mount`] checked, never from the path.
//! A refusal names the setting and the path.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sandbox_agent::hostside::extra_dir;

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
    if let Some(why) = extra_dir::system_dir(&given) {
        return Err(refuse(why));
    }
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
    drop(host_checks(&real, workspace, forbidden).map_err(refuse)?);
    Ok(Some(real))
}

/// Opens a directory [`checked`] accepted (against `workspace`) once more, for the
/// mount: without following any link, the host's rules applied again to the opened
/// directory. The mount must be made from the fd returned (with the owner's uid and gid),
/// never from the path.
pub fn open_for_mount(
    dir: &Path,
    workspace: &Path,
) -> Result<(OwnedFd, (u32, u32)), AdditionalDirError> {
    host_checks(dir, workspace, &Forbidden::from_env()).map_err(|why| AdditionalDirError {
        path: dir.to_path_buf(),
        why,
    })
}

/// The host's own rules ([`sandbox_agent::hostside::extra_dir`], which the launcher
/// applies again): the workspace owner's, no system directory, no home, ancestor of one
/// or dot-directory in one, no secret of `policies/toolchains.json` in or around it, and
/// nobody else able to write it or swap a component of its path.
fn host_checks(
    real: &Path,
    workspace: &Path,
    forbidden: &Forbidden,
) -> Result<(OwnedFd, (u32, u32)), String> {
    let owner = std::fs::metadata(workspace)
        .map_err(|e| format!("the workspace {}: {e}", workspace.display()))?
        .uid();
    let mut homes = forbidden.homes.clone();
    if let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(owner))
        && user.dir.is_absolute()
        && user.dir != Path::new("/")
    {
        homes.push(std::fs::canonicalize(&user.dir).unwrap_or(user.dir));
    }
    if let Some(why) = extra_dir::home_dir(real, &homes).or_else(|| secret(real, &homes)) {
        return Err(why);
    }
    extra_dir::open_checked(real, owner, &homes)
}

/// Why `dir` is, contains or lies inside a secret of `policies/toolchains.json` under one
/// of `homes`, if it does.
pub fn secret(dir: &Path, homes: &[PathBuf]) -> Option<String> {
    let policy = crate::toolchains::policy().ok()?;
    homes
        .iter()
        .flat_map(|home| {
            policy
                .secrets
                .iter()
                .map(move |s| crate::toolchains::expand(&s.path, home))
        })
        .find(|s| s.starts_with(dir) || dir.starts_with(s))
        .map(|s| {
            format!(
                "it is, holds or lies in {}, a secret the sandbox never sees",
                s.display()
            )
        })
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
        // Below the build directory: /tmp is a system directory to these checks.
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/unit-fixtures");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(base.canonicalize().unwrap()).unwrap();
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
    fn host_directories_are_refused_whoever_owns_them() {
        let f = fixture();
        // Paths every machine of this kind has (a home's secrets, which a fresh machine may
        // lack, are tried in a home of the test's own below).
        for dir in [
            "/etc",
            "/var/spool/cron",
            "/boot",
            "/srv",
            "/sys/fs/cgroup/user.slice",
            "/tmp",
            "/tmp/x",
            "/var/tmp",
            "/usr/local/src",
        ] {
            let err = check(&f, &[PathBuf::from(dir)]).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("refusing the {SETTING} entry {dir}: ")),
                "{text}"
            );
            assert!(
                ["system directory", "secret", "dot-directory"]
                    .iter()
                    .any(|w| text.contains(w)),
                "{text}"
            );
        }
        let err = check(&f, &[PathBuf::from("/root")]).unwrap_err();
        assert!(err.why.contains("home directory"), "{err}");
    }

    #[test]
    fn dot_directories_and_secrets_of_a_home_are_refused() {
        let f = fixture();
        let home = f.root.join("home/me");
        for d in [".ssh/keys", ".config/systemd", ".local/bin", ".gnupg"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        for (dir, why) in [
            // The secrets of the toolchain policy are refused as a workspace is.
            (home.join(".ssh"), "own secrets"),
            (home.join(".ssh/keys"), "own secrets"),
            (home.join(".gnupg"), "own secrets"),
            (home.join(".config"), "dot-directory"),
            (home.join(".config/systemd"), "dot-directory"),
            (home.join(".local/bin"), "dot-directory"),
        ] {
            let err = check(&f, std::slice::from_ref(&dir)).unwrap_err();
            assert!(err.why.contains(why), "{}: {err}", dir.display());
        }
    }

    #[test]
    fn the_secrets_of_the_toolchain_policy_are_refused_in_and_around() {
        let home = PathBuf::from("/home/me");
        for dir in ["/home/me/.ssh", "/home/me/.ssh/keys", "/home/me/.config"] {
            let why = secret(Path::new(dir), std::slice::from_ref(&home));
            assert!(why.is_some_and(|w| w.contains("secret")), "{dir}");
        }
        assert_eq!(secret(Path::new("/home/me/notes"), &[home]), None);
    }

    #[test]
    fn a_directory_others_own_or_may_change_is_refused() {
        let f = fixture();
        let loose = f.root.join("loose");
        std::fs::create_dir_all(loose.join("inner")).unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o775)).unwrap();
        let err = check(&f, std::slice::from_ref(&loose)).unwrap_err();
        assert!(err.why.contains("group or others may write"), "{err}");
        let err = check(&f, &[loose.join("inner")]).unwrap_err();
        assert!(err.why.contains("its ancestor"), "{err}");
        assert!(
            err.why.contains("may be written by group or others"),
            "{err}"
        );
        if nix::unistd::geteuid().is_root() {
            let theirs = f.root.join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
            let err = check(&f, &[theirs]).unwrap_err();
            assert!(err.why.contains("not by the workspace's owner"), "{err}");
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
