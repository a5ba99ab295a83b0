//! Which directories may be a workspace.
//!
//! A session may write anywhere in its workspace, and the host later runs or reads much of
//! what is there. So some directories are refused outright, with a message saying why:
//!
//! - `/`: everything writable on the host would be the session's;
//! - a home directory or any ancestor of one (`$HOME`, the passwd entry's home, the
//!   invoking user's under sudo): `.gitconfig`, `.ssh/config`, `.bashrc`, `.local/bin`
//!   would become the session's to rewrite, and the user's shell and git run them;
//! - a directory that contains Cordon's data directory (`CORDON_HOME`) or lies inside it:
//!   the session could move the data from under its mask and rewrite the run state that
//!   the next start acts on (placeholders it deletes), the transcripts and checkpoints;
//! - a directory at or inside one the user's home keeps secrets or Claude's own files in
//!   (the `secrets` of `policies/toolchains.json`: `~/.ssh`, `~/.claude`, ...): a session
//!   could link a key where the host reads the user's own skills, agents and commands
//!   (`~/.claude/skills/x/SKILL.md -> ~/.ssh/id_ed25519`), or rewrite them for every
//!   later project;
//! - a directory every local user may write (`/tmp`, `/var/tmp`, `/dev/shm`): another user
//!   could plant a CLAUDE.md, settings or hooks in it, and the session would reach their
//!   sockets there. (On Docker, `/tmp` would also collide with the container's own.)
//!
//! The CLI checks once where it resolves `--workspace`; the backends check again before a
//! sandbox starts ([`crate::sandbox::checked_workspace`]), so every library user (the
//! server too) gets the same refusal.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a directory may not be a workspace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    #[error(
        "refusing the workspace /: a session could change every file this user can write; choose a project directory"
    )]
    Root,
    #[error(
        "refusing the workspace {workspace}: it is the home directory {home} or contains it, so a session could rewrite your shell, git and ssh configuration; choose a project directory inside it"
    )]
    HomeOrAncestor { workspace: PathBuf, home: PathBuf },
    #[error(
        "refusing the workspace {workspace}: it contains Cordon's data directory {cordon_home}, whose run state, transcripts and checkpoints a session must not reach; set CORDON_HOME outside the workspace"
    )]
    ContainsCordonHome {
        workspace: PathBuf,
        cordon_home: PathBuf,
    },
    #[error(
        "refusing the workspace {workspace}: it is inside Cordon's data directory {cordon_home}; choose a project directory elsewhere"
    )]
    InsideCordonHome {
        workspace: PathBuf,
        cordon_home: PathBuf,
    },
    #[error(
        "refusing the workspace {workspace}: it is inside {dir}, where the user's own secrets or Claude's own settings, skills and agents live; choose a project directory"
    )]
    InsideUserSecrets { workspace: PathBuf, dir: PathBuf },
    #[error(
        "refusing the workspace {workspace}: every local user may write to it (mode {mode:o}), so others could plant instructions, settings or hooks there; choose a project directory"
    )]
    SharedDirectory { workspace: PathBuf, mode: u32 },
    #[error("workspace {workspace}: {why}")]
    Stat { workspace: PathBuf, why: String },
}

impl LocationError {
    /// Why the directory was refused, without naming it as a workspace (for the other
    /// directories checked by the same policy, see [`crate::sandbox::additional`]).
    pub fn reason(&self) -> String {
        match self {
            LocationError::Root => "it is /, every file this user can write".into(),
            LocationError::HomeOrAncestor { home, .. } => format!(
                "it is the home directory {} or contains it, so a session could rewrite your shell, git and ssh configuration",
                home.display()
            ),
            LocationError::ContainsCordonHome { cordon_home, .. } => format!(
                "it contains Cordon's data directory {}",
                cordon_home.display()
            ),
            LocationError::InsideCordonHome { cordon_home, .. } => format!(
                "it is inside Cordon's data directory {}",
                cordon_home.display()
            ),
            LocationError::InsideUserSecrets { dir, .. } => format!(
                "it is inside {}, where the user's own secrets or Claude's own files live",
                dir.display()
            ),
            LocationError::SharedDirectory { mode, .. } => format!(
                "every local user may write to it (mode {mode:o}), so others could plant files there"
            ),
            LocationError::Stat { why, .. } => why.clone(),
        }
    }
}

/// The locations a workspace must keep clear of, resolved once.
#[derive(Debug, Clone, Default)]
pub struct Forbidden {
    /// Home directories, canonical.
    pub homes: Vec<PathBuf>,
    /// Cordon's data directories (`CORDON_HOME`, a backend's own), canonical as far as
    /// they exist.
    pub data_dirs: Vec<PathBuf>,
    /// The homes' secret and Claude directories (`policies/toolchains.json`), canonical as
    /// far as they exist.
    pub user_dirs: Vec<PathBuf>,
}

impl Forbidden {
    /// This process's: `$HOME`, the passwd home of its uid, the sudo caller's home, and
    /// `CORDON_HOME` (default `~/.cordon`).
    pub fn from_env() -> Forbidden {
        let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
            .map(PathBuf::from)
            .into_iter()
            .collect();
        let mut uids = vec![nix::unistd::getuid()];
        if let Some(uid) = std::env::var("SUDO_UID").ok().and_then(|u| u.parse().ok()) {
            uids.push(nix::unistd::Uid::from_raw(uid));
        }
        for uid in uids {
            if let Ok(Some(user)) = nix::unistd::User::from_uid(uid) {
                homes.push(user.dir);
            }
        }
        Forbidden::new(homes, crate::paths::cordon_home().ok())
    }

    /// From explicit paths (canonicalised here; a home of `/` is no home).
    pub fn new(homes: Vec<PathBuf>, cordon_home: Option<PathBuf>) -> Forbidden {
        let mut canonical: Vec<PathBuf> = Vec::new();
        for home in homes.iter().filter(|h| h.is_absolute()) {
            let home = canonical_as_far_as_exists(home);
            if home != Path::new("/") && !canonical.contains(&home) {
                canonical.push(home);
            }
        }
        // An unreadable policy refuses nothing more here: the toolchain views, which read
        // the same policy, fail closed on their own.
        let secrets = crate::toolchains::policy()
            .map(|p| p.secrets.iter().map(|s| s.path.clone()).collect::<Vec<_>>())
            .unwrap_or_default();
        let user_dirs = canonical
            .iter()
            .flat_map(|home| {
                secrets
                    .iter()
                    .filter_map(|s| s.strip_prefix("~/"))
                    .map(move |rel| canonical_as_far_as_exists(&home.join(rel)))
            })
            .collect();
        let forbidden = Forbidden {
            homes: canonical,
            data_dirs: Vec::new(),
            user_dirs,
        };
        match cordon_home {
            Some(data) => forbidden.with_data_dir(&data),
            None => forbidden,
        }
    }

    /// Also keeps workspaces clear of `data` (a backend's own state directory).
    pub fn with_data_dir(mut self, data: &Path) -> Forbidden {
        if data.is_absolute() {
            let data = canonical_as_far_as_exists(data);
            if !self.data_dirs.contains(&data) {
                self.data_dirs.push(data);
            }
        }
        self
    }

    /// Whether `workspace` (absolute and canonical) may be a workspace.
    pub fn check(&self, workspace: &Path) -> Result<(), LocationError> {
        let ws = workspace.to_path_buf();
        if workspace == Path::new("/") {
            return Err(LocationError::Root);
        }
        if let Some(home) = self.homes.iter().find(|h| h.starts_with(workspace)) {
            return Err(LocationError::HomeOrAncestor {
                workspace: ws,
                home: home.clone(),
            });
        }
        for data in &self.data_dirs {
            if data.starts_with(workspace) {
                return Err(LocationError::ContainsCordonHome {
                    workspace: ws,
                    cordon_home: data.clone(),
                });
            }
            if workspace.starts_with(data) {
                return Err(LocationError::InsideCordonHome {
                    workspace: ws,
                    cordon_home: data.clone(),
                });
            }
        }
        if let Some(dir) = self.user_dirs.iter().find(|d| workspace.starts_with(d)) {
            return Err(LocationError::InsideUserSecrets {
                workspace: ws,
                dir: dir.clone(),
            });
        }
        let meta = std::fs::metadata(workspace).map_err(|e| LocationError::Stat {
            workspace: ws.clone(),
            why: e.to_string(),
        })?;
        if meta.mode() & 0o002 != 0 {
            return Err(LocationError::SharedDirectory {
                workspace: ws,
                mode: meta.mode() & 0o7777,
            });
        }
        Ok(())
    }
}

/// `path` with its longest existing prefix resolved (a `CORDON_HOME` not made yet still
/// compares by where it will be).
fn canonical_as_far_as_exists(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        forbidden: Forbidden,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("home/me/project")).unwrap();
        std::fs::create_dir_all(root.join("data")).unwrap();
        let forbidden = Forbidden::new(
            vec![root.join("home/me"), PathBuf::from("/")],
            Some(root.join("data/cordon")),
        );
        Fixture {
            _dir: dir,
            root,
            forbidden,
        }
    }

    #[test]
    fn a_project_directory_is_accepted() {
        let f = fixture();
        f.forbidden.check(&f.root.join("home/me/project")).unwrap();
    }

    #[test]
    fn root_home_and_its_ancestors_are_refused() {
        let f = fixture();
        assert_eq!(f.forbidden.check(Path::new("/")), Err(LocationError::Root));
        for ws in [f.root.join("home/me"), f.root.join("home"), f.root.clone()] {
            let err = f.forbidden.check(&ws).unwrap_err();
            assert!(
                matches!(err, LocationError::HomeOrAncestor { .. }),
                "{}: {err}",
                ws.display()
            );
            assert!(err.to_string().contains("home directory"), "{err}");
        }
    }

    #[test]
    fn the_homes_secret_and_claude_directories_are_refused() {
        let f = fixture();
        for rel in [".claude", ".claude/skills", ".ssh", ".config/gh/x"] {
            let ws = f.root.join("home/me").join(rel);
            std::fs::create_dir_all(&ws).unwrap();
            let err = f.forbidden.check(&ws).unwrap_err();
            assert!(
                matches!(err, LocationError::InsideUserSecrets { .. }),
                "{rel}: {err}"
            );
        }
        // A project whose name merely starts the same is a project.
        let ws = f.root.join("home/me/.claudette");
        std::fs::create_dir_all(&ws).unwrap();
        f.forbidden.check(&ws).unwrap();
    }

    #[test]
    fn cordon_home_inside_or_around_is_refused() {
        let f = fixture();
        let err = f.forbidden.check(&f.root.join("data")).unwrap_err();
        assert!(
            matches!(err, LocationError::ContainsCordonHome { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("set CORDON_HOME outside"), "{err}");
        std::fs::create_dir_all(f.root.join("data/cordon/run/x")).unwrap();
        let err = f
            .forbidden
            .check(&f.root.join("data/cordon/run/x"))
            .unwrap_err();
        assert!(
            matches!(err, LocationError::InsideCordonHome { .. }),
            "{err}"
        );
    }

    #[test]
    fn a_directory_everyone_may_write_is_refused() {
        let f = fixture();
        let shared = f.root.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let err = f.forbidden.check(&shared).unwrap_err();
        assert_eq!(
            err,
            LocationError::SharedDirectory {
                workspace: shared,
                mode: 0o1777
            }
        );
        let tmp = Forbidden::default().check(Path::new("/tmp")).unwrap_err();
        assert!(
            tmp.to_string().contains("every local user may write"),
            "{tmp}"
        );
    }

    #[test]
    fn a_home_given_through_a_link_is_compared_by_where_it_leads() {
        let f = fixture();
        std::os::unix::fs::symlink(f.root.join("home"), f.root.join("homes")).unwrap();
        let forbidden = Forbidden::new(vec![f.root.join("homes/me")], None);
        assert!(forbidden.check(&f.root.join("home")).is_err());
        let later = Forbidden::new(Vec::new(), Some(f.root.join("homes/me/not-yet/cordon")));
        assert_eq!(later.data_dirs, vec![f.root.join("home/me/not-yet/cordon")]);
    }
}
