//! The session's writable trees: the workspace, and the additional directories beside it
//! (`permissions.additionalDirectories`), each protected the same way by the same code.
//!
//! For every tree the launcher, before the sandbox exists, plans the protected paths
//! (the policy's, plus the git control files of every git dir found, see
//! [`super::gitguard`]), lists the names hard-linked outside it (made read-only, see
//! `hostside::hardlinks`), creates the placeholders (owned by the tree's owner) and, as
//! host root, clones it idmapped so its owner's files are the sandbox user's. The init
//! mounts each at its own path, `nosuid,nodev` ([`super::mounts`]). At teardown each tree
//! gets the git vetting, the placeholder removal and the privilege-bit sweep.
//!
//! Each tree keeps its records (`placeholders.json`, `git-guard.json`) in a state dir of
//! its own: the workspace in the session's state dir, additional directory `i` in
//! `extra-<i>/` under it. A record is acted on only beneath the tree the launch config
//! names for that state dir, so a tampered record reaches nothing else.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use super::protected::{self, Plan, ProtectedPath};
use super::userns::{self, IdPlan};
use super::{LaunchConfig, LaunchError, gitguard, gitvet, mounts};
use crate::hostside::{extra_dir, hardlinks, privbits};

/// Where the sandbox has mounts of its own: an additional directory may not lie at or
/// below one (its mount point could not be made, or it would cover the sandbox's own).
const SANDBOX_OWN: &[&str] = &["/proc", "/dev", "/tmp", "/run"];

/// One writable tree, prepared on the host.
#[derive(Debug)]
pub struct Prepared {
    /// The tree's absolute, canonical path (the same inside the sandbox).
    pub path: PathBuf,
    /// Read-only and anchor binds, placeholders; `hidden` only for the workspace.
    pub plan: Plan,
    /// Names hard-linked to files outside the tree (relative), made read-only.
    pub linked: Vec<PathBuf>,
    /// The idmapped clone (host root only; otherwise the tree is bound plainly).
    pub tree: Option<OwnedFd>,
    /// For an additional directory: the `O_PATH` fd it was checked through, which the
    /// clone above and the plain bind are made from (never the path again).
    pub src: Option<OwnedFd>,
}

/// The state dir holding the records of additional directory `index`.
pub fn extra_state_dir(state_dir: &Path, index: usize) -> PathBuf {
    state_dir.join(format!("extra-{index}"))
}

/// Every tree of the session with its state dir: the workspace first.
pub fn all(cfg: &LaunchConfig) -> Vec<(PathBuf, PathBuf)> {
    std::iter::once((cfg.workspace.clone(), cfg.state_dir.clone()))
        .chain(
            cfg.additional
                .iter()
                .enumerate()
                .map(|(i, d)| (d.clone(), extra_state_dir(&cfg.state_dir, i))),
        )
        .collect()
}

/// Refuses additional directories the mounts could not place safely: not absolute and
/// normal, `/`, overlapping the workspace, the state dir, another additional directory or
/// an entry of the host view, or lying in the sandbox's own system or runtime dirs.
pub fn validate(cfg: &LaunchConfig) -> Result<(), LaunchError> {
    let bad = |p: &Path, why: &str| {
        Err(LaunchError::Config(format!(
            "additional directory (permissions.additionalDirectories) {}: {why}",
            p.display()
        )))
    };
    let overlap = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    let host = cfg.host.read_only.iter().chain(&cfg.host.writable);
    for (i, p) in cfg.additional.iter().enumerate() {
        let normal = p.is_absolute()
            && p.components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !normal || p == Path::new("/") {
            return bad(p, "must be absolute, not /, without . or .. components");
        }
        if overlap(p, &cfg.workspace) || overlap(p, &cfg.state_dir) {
            return bad(p, "overlaps the workspace or the session state");
        }
        if cfg.additional[..i].iter().any(|o| overlap(p, o)) {
            return bad(p, "overlaps another additional directory");
        }
        if host.clone().any(|h| overlap(p, h)) {
            return bad(p, "overlaps a toolchain or cache the sandbox shows");
        }
        let own = mounts::SYSTEM_DIRS.iter().chain(SANDBOX_OWN);
        if let Some(own) = own.into_iter().find(|o| p.starts_with(o)) {
            return bad(p, &format!("lies in the sandbox's own {own}"));
        }
    }
    Ok(())
}

/// Plans, scans and readies one tree (see the module docs). `extra` are further
/// protected entries (the workspace's Edit deny rules), `skip` dirs the git survey does
/// not enter (Cordon's data masked inside the workspace). The tree must be an existing
/// directory given by its canonical path.
pub fn prepare(
    path: &Path,
    state: &Path,
    cfg: &LaunchConfig,
    ids: &IdPlan,
    extra: Vec<ProtectedPath>,
    skip: &[PathBuf],
) -> Result<Prepared, LaunchError> {
    let state_err = |source| LaunchError::State {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(state_err)?;
    let canonical = std::fs::canonicalize(path).map_err(state_err)?;
    if !meta.is_dir() || canonical != path {
        return Err(LaunchError::Config(format!(
            "{} must be an existing directory given by its canonical path",
            path.display()
        )));
    }
    prepare_tree(
        path,
        state,
        cfg,
        ids,
        extra,
        skip,
        None,
        (meta.uid(), meta.gid()),
    )
}

/// [`prepare`] of a tree whose owner is `owner`, cloned from `src` when given.
#[allow(clippy::too_many_arguments)]
fn prepare_tree(
    path: &Path,
    state: &Path,
    cfg: &LaunchConfig,
    ids: &IdPlan,
    extra: Vec<ProtectedPath>,
    skip: &[PathBuf],
    src: Option<OwnedFd>,
    owner: (u32, u32),
) -> Result<Prepared, LaunchError> {
    let mut list = cfg.protected.clone();
    list.extend(extra);
    list.extend(gitguard::session_entries(path, state, skip)?);
    let plan = protected::plan(path, &list)?;
    let linked = hardlinks::read_only_names(path, &plan.read_only, hardlinks::DEFAULT_CAP)?;
    protected::create_placeholders(state, path, &plan.placeholders, owner)?;
    // As host root, the tree is idmapped: its owner's files appear owned by the sandbox
    // user, and the sandbox user's writes land on disk as the owner.
    let tree = match (&src, ids.privileged()) {
        (Some(fd), true) => Some(idmapped_fd_for_sandbox(path, fd, owner, ids)?),
        (None, true) => Some(idmapped_for_sandbox(path, owner, ids)?),
        (_, false) => None,
    };
    Ok(Prepared {
        path: path.to_path_buf(),
        plan,
        linked,
        tree,
        src,
    })
}

/// [`idmapped_for_sandbox`] of the directory `fd` is open on (`path` only names it in
/// errors).
fn idmapped_fd_for_sandbox(
    path: &Path,
    fd: &OwnedFd,
    owner: (u32, u32),
    ids: &IdPlan,
) -> Result<OwnedFd, LaunchError> {
    let ns = userns::for_owner(owner, ids.user_host)?;
    mounts::detached_clone_fd(fd.as_fd(), false, Some(&ns)).map_err(|source| LaunchError::Idmap {
        path: path.to_path_buf(),
        source,
    })
}

/// A clone of the host directory `path` (owned by `owner`, uid and gid) idmapped so that its
/// owner's files are the sandbox user's and what the sandbox writes lands as the owner's.
/// Needs host root.
pub fn idmapped_for_sandbox(
    path: &Path,
    owner: (u32, u32),
    ids: &IdPlan,
) -> Result<OwnedFd, LaunchError> {
    let ns = userns::for_owner(owner, ids.user_host)?;
    mounts::idmapped_clone(path, &ns).map_err(|source| LaunchError::Idmap {
        path: path.to_path_buf(),
        source,
    })
}

/// Readies every additional directory of `cfg`, each with its own state dir, after the
/// host's own checks ([`extra_dir::open_checked`], against the workspace's owner): each
/// is opened once, and its clone or bind made from that fd.
pub fn prepare_additional(cfg: &LaunchConfig, ids: &IdPlan) -> Result<Vec<Prepared>, LaunchError> {
    let owner = std::fs::metadata(&cfg.workspace)
        .map_err(|source| LaunchError::State {
            path: cfg.workspace.clone(),
            source,
        })?
        .uid();
    let homes = owner_home(owner);
    cfg.additional
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let (src, ids_on_disk) = extra_dir::open_checked(dir, owner, &homes)
                .map_err(|why| LaunchError::Config(refusal(dir, &why)))?;
            let state = extra_state_dir(&cfg.state_dir, i);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&state)
                .map_err(|source| LaunchError::State {
                    path: state.clone(),
                    source,
                })?;
            prepare_tree(
                dir,
                &state,
                cfg,
                ids,
                Vec::new(),
                &[],
                Some(src),
                ids_on_disk,
            )
        })
        .collect()
}

/// The home of the passwd entry of `uid` (canonical), if it has one other than `/`.
fn owner_home(uid: u32) -> Vec<PathBuf> {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) if user.dir.is_absolute() && user.dir != Path::new("/") => {
            vec![std::fs::canonicalize(&user.dir).unwrap_or(user.dir)]
        }
        _ => Vec::new(),
    }
}

/// The refusal of additional directory `dir`, in the orchestrator's words.
fn refusal(dir: &Path, why: &str) -> String {
    format!(
        "refusing the permissions.additionalDirectories entry {}: {why}",
        dir.display()
    )
}

/// Teardown of every tree, once no sandboxed process runs: git dirs made during the
/// session vetted, placeholders removed, privilege bits made since `started` stripped
/// (each stripped file logged with `log_stripped`).
pub fn tear_down(
    cfg: &LaunchConfig,
    started: std::time::SystemTime,
    log_stripped: &mut dyn FnMut(&Path),
) {
    for (tree, state) in all(cfg) {
        gitvet::vet_session(&state, &tree);
        protected::remove_placeholders(&state, &tree);
        sweep_privilege_bits(&tree, started, log_stripped);
    }
}

/// The teardown backstop of "no privilege bits reach the host".
fn sweep_privilege_bits(
    tree: &Path,
    started: std::time::SystemTime,
    log_stripped: &mut dyn FnMut(&Path),
) {
    match privbits::sweep(tree, privbits::Keep::UnchangedSince(started)) {
        Ok(swept) => {
            for p in &swept.stripped {
                log_stripped(&tree.join(p));
            }
            for (p, e) in &swept.failed {
                eprintln!(
                    "sandbox-agent launcher: cannot strip setuid/setgid from {}: {e}",
                    tree.join(p).display()
                );
            }
        }
        Err(e) => eprintln!("sandbox-agent launcher: privilege-bit sweep incomplete: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(additional: &[&str]) -> LaunchConfig {
        let json = serde_json::json!({
            "session_id": "s",
            "state_dir": "/root/.cordon/run/s",
            "workspace": "/work/p",
            "additional": additional,
            "host": {"read_only": ["/home/u/.cargo"], "writable": []},
            "agent": {
                "socket_path": "/run/cordon/agent.sock",
                "workspace": "/work/p",
                "tmp_dir": "/tmp",
            },
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_directory_beside_the_workspace_is_accepted() {
        let cfg = config(&["/work/q", "/home/u/notes"]);
        validate(&cfg).unwrap();
        assert_eq!(
            all(&cfg)[2],
            ("/home/u/notes".into(), "/root/.cordon/run/s/extra-1".into())
        );
    }

    /// The launcher's second line: with real directories (below the build directory, not
    /// /tmp), a link on the way or a directory of another owner is refused before anything
    /// is prepared; an accepted one keeps the fd it was checked through.
    #[test]
    fn the_launcher_checks_the_opened_directory_itself() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/unit-fixtures");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(base.canonicalize().unwrap()).unwrap();
        let root = dir.path();
        for d in ["ws", "state", "extra", "theirs"] {
            std::fs::create_dir(root.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(root.join("extra"), root.join("link")).unwrap();
        let cfg = |extra: &Path| {
            let mut c = config(&[]);
            c.workspace = root.join("ws");
            c.state_dir = root.join("state");
            c.host = Default::default();
            c.additional = vec![extra.to_path_buf()];
            c
        };
        let me = (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
        let ids = IdPlan {
            root_host: None,
            user_host: me,
        };
        let refused = |extra: &Path| match prepare_additional(&cfg(extra), &ids) {
            Err(LaunchError::Config(why)) => why,
            other => panic!("{}: {other:?}", extra.display()),
        };
        let why = refused(&root.join("link"));
        assert!(
            why.starts_with(&format!(
                "refusing the permissions.additionalDirectories entry {}: ",
                root.join("link").display()
            )),
            "{why}"
        );
        assert!(why.contains("symbolic link"), "{why}");
        assert!(refused(Path::new("/etc")).contains("system directory"));
        if me.0 == 0 {
            std::os::unix::fs::chown(root.join("theirs"), Some(4242), Some(4242)).unwrap();
            let why = refused(&root.join("theirs"));
            assert!(why.contains("not by the workspace's owner"), "{why}");
        }
        let prepared = prepare_additional(&cfg(&root.join("extra")), &ids).unwrap();
        assert!(prepared[0].src.is_some());
    }

    #[test]
    fn directories_the_mounts_could_not_place_are_refused() {
        for bad in [
            &["relative"][..],
            &["/"],
            &["/work"],
            &["/work/p/sub"],
            &["/root/.cordon"],
            &["/work/q", "/work/q/r"],
            &["/home/u/.cargo/bin"],
            &["/usr/local/src"],
            &["/tmp/x"],
            &["/work/../etc"],
        ] {
            assert!(validate(&config(bad)).is_err(), "{bad:?} was accepted");
        }
    }
}
