//! Per-session sandbox uids, and how the workspace becomes writable for them.
//!
//! Every live session runs as its own non-root uid (`UID_BASE` + n, gid equal to uid), so
//! two sessions on one host cannot touch each other's processes or files even if both
//! escaped their mount namespace. The workspace (owned by someone else, often root or the
//! user) must be writable for that uid without changing the user's tree:
//! - [`Access::Idmap`] (chosen whenever the kernel and filesystem allow it): the workspace
//!   is injected into the container as an idmapped mount whose idmap maps the workspace
//!   owner to the sandbox uid. Inside, the owner's files appear as the sandbox uid's; what
//!   the sandbox writes lands on disk as the owner. Nothing is granted and nothing is left
//!   on the user's tree (see [`super::pool`] for the injection).
//! - [`Access::Acl`] (the fallback where idmapping fails, e.g. a filesystem without idmap
//!   support, or a non-root Cordon that cannot inject mounts): a POSIX ACL entry
//!   `u:<uid>:rwX` (plus default entries on directories so that files created later stay
//!   reachable, and one for the owner so they stay the owner's to edit), added when the
//!   session starts. The exact prior ACLs and modes are saved first and restored when the
//!   session ends, on every failure path after the grant, and by reconcile after a crash;
//!   what the sandbox uid created is handed to the owner ([`super::acl`]).
//!   Rejected alternatives: chowning the user's tree (rewrites ownership), running as the
//!   owner's uid (sessions of one owner would share a uid; a root-owned workspace would
//!   mean running as root).
//!
//! The grant uses `setfacl` (Debian package `acl`).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::fcntl::{Flock, FlockArg};

use crate::sandbox::SandboxError;

/// First sandbox uid: far above the ranges distributions hand to people and services.
pub const UID_BASE: u32 = 300_000;
/// How many sandbox uids exist (sessions alive at once on one host).
pub const UID_RANGE: u32 = 60_000;

/// Where the uid locks live by default. Uids are a host-wide resource (the container's uid
/// is the host's), so the lock directory must be shared by every Cordon process on the
/// host, whatever its `$CORDON_HOME`: `/run/cordon-docker/uids` as root (only root can
/// create entries under /run, so nobody else can plant or hold these locks), else
/// `$CORDON_HOME/docker/uids` (a non-root user's sessions only meet their own).
pub fn default_lock_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        PathBuf::from("/run/cordon-docker/uids")
    } else {
        super::cordon_home().join("docker/uids")
    }
}

/// Hands out distinct uids to live sessions, across processes: uid `u` is taken while some
/// process holds an exclusive `flock` on `<lock_dir>/<u>.lock`. The lock lives in the
/// [`UidLease`] the session keeps, and the kernel drops it when the holder exits or dies,
/// so a crashed orchestrator never strands a uid (its containers are removed by
/// [`super::adopt::reconcile`] before any new session starts).
#[derive(Debug)]
pub struct UidAllocator {
    base: u32,
    lock_dir: PathBuf,
}

/// One reserved uid; dropping it frees the uid.
#[derive(Debug)]
pub struct UidLease {
    uid: u32,
    _lock: Flock<std::fs::File>,
}

impl UidLease {
    pub fn uid(&self) -> u32 {
        self.uid
    }
}

impl UidAllocator {
    pub fn new(base: u32, lock_dir: impl Into<PathBuf>) -> Self {
        Self {
            base,
            lock_dir: lock_dir.into(),
        }
    }

    /// Reserves the lowest uid no live session (of any process) holds.
    pub fn allocate(&self) -> Result<UidLease, SandboxError> {
        let setup = |step| move |source| SandboxError::Setup { step, source };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.lock_dir)
            .map_err(setup("create uid lock dir"))?;
        for uid in self.base..self.base.saturating_add(UID_RANGE) {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                // A planted symlink must not make us create or lock a file elsewhere.
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(self.lock_dir.join(format!("{uid}.lock")))
                .map_err(setup("open uid lock"))?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(UidLease { uid, _lock: lock }),
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => continue,
                Err((_, e)) => return Err(setup("lock uid")(e.into())),
            }
        }
        Err(SandboxError::Unsupported {
            backend: "docker",
            why: "no free sandbox uid".into(),
        })
    }
}

/// How the sandbox uid reaches the workspace (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Idmap,
    Acl,
}

/// Gives `uid` read-write access to the tree at `workspace` by ACL, after saving the
/// tree's exact ACLs and modes in `backup`. On failure the tree is restored before the
/// error returns.
pub fn grant(workspace: &Path, uid: u32, backup: &Path) -> Result<(), SandboxError> {
    let meta = std::fs::metadata(workspace).map_err(|source| SandboxError::Setup {
        step: "stat workspace",
        source,
    })?;
    super::acl::save(workspace, backup).map_err(|source| SandboxError::Setup {
        step: "save the workspace's acls",
        source,
    })?;
    let mut spec = format!("u:{uid}:rwX,d:u:{uid}:rwX");
    if meta.uid() != 0 {
        // Files the sandbox creates belong to its uid; this keeps them the owner's to edit.
        spec.push_str(&format!(",d:u:{}:rwX", meta.uid()));
    }
    if let Err(e) = setfacl(&["-R", "-P", "-m", &spec], workspace) {
        if let Err(r) = revoke(workspace, uid, backup) {
            tracing::warn!("restoring the workspace's acls after a failed grant: {r}");
        }
        return Err(e);
    }
    Ok(())
}

/// Undoes [`grant`]: the saved ACLs and modes back exactly, the sandbox's files handed to
/// the workspace owner. Idempotent (a missing backup means nothing to undo).
pub fn revoke(workspace: &Path, uid: u32, backup: &Path) -> Result<(), SandboxError> {
    super::acl::restore(workspace, uid, backup).map_err(|source| SandboxError::Setup {
        step: "restore the workspace's acls",
        source,
    })
}

/// Removes the entries an older Cordon's grant added (it kept no backup); for records of
/// sessions started before the exact restore existed, found by reconcile.
pub fn revoke_legacy(workspace: &Path, uid: u32) -> Result<(), SandboxError> {
    if !workspace.exists() {
        return Ok(());
    }
    setfacl(
        &["-R", "-P", "-x", &format!("u:{uid},d:u:{uid}")],
        workspace,
    )
}

fn setfacl(args: &[&str], path: &Path) -> Result<(), SandboxError> {
    // A recursive walk of the workspace: every CPU, not the session thread's pin.
    let out = sandbox_agent::affinity::with_every_cpu(|| {
        Command::new("setfacl").args(args).arg(path).output()
    })
    .map_err(|source| SandboxError::Setup {
        step: "run setfacl (install the acl package)",
        source,
    })?;
    // setfacl exits 1 when some entries could not be changed (e.g. a file vanished
    // mid-walk); anything on stderr besides that is a real failure.
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(SandboxError::Setup {
        step: "grant workspace access by acl",
        source: std::io::Error::other(stderr.trim().to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_distinct_and_reused_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let a = UidAllocator::new(UID_BASE, dir.path());
        let u1 = a.allocate().unwrap();
        let u2 = a.allocate().unwrap();
        assert_ne!(u1.uid(), u2.uid());
        assert!(u1.uid() >= UID_BASE && u2.uid() >= UID_BASE);
        let first = u1.uid();
        drop(u1);
        assert_eq!(a.allocate().unwrap().uid(), first);
    }

    #[test]
    fn two_allocators_on_one_lock_dir_never_share_a_uid() {
        // Two allocators stand for two orchestrator processes: flock locks belong to the
        // open file description, so they exclude each other within one process too.
        let dir = tempfile::tempdir().unwrap();
        let a = UidAllocator::new(UID_BASE, dir.path());
        let b = UidAllocator::new(UID_BASE, dir.path());
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(a.allocate().unwrap());
            held.push(b.allocate().unwrap());
        }
        let mut uids: Vec<u32> = held.iter().map(UidLease::uid).collect();
        uids.sort_unstable();
        uids.dedup();
        assert_eq!(uids.len(), 8, "{uids:?}");
    }

    #[test]
    fn a_uid_held_by_another_process_is_skipped_and_freed_when_it_dies() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(format!("{UID_BASE}.lock"));
        std::fs::write(&lock, "").unwrap();
        // A real second process holds the lowest uid's lock: a shell takes it on fd 9
        // with flock(1) from util-linux, then becomes `sleep` (same pid, same fd).
        let script = format!("exec 9>>'{}'; flock -x 9 && exec sleep 30", lock.display());
        let mut holder = Command::new("sh").args(["-c", &script]).spawn().unwrap();
        let a = UidAllocator::new(UID_BASE, dir.path());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let lease = a.allocate().unwrap();
            if lease.uid() != UID_BASE {
                break;
            }
            drop(lease);
            assert!(
                std::time::Instant::now() < deadline,
                "flock never took the lock"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        holder.kill().unwrap();
        holder.wait().unwrap();
        assert_eq!(a.allocate().unwrap().uid(), UID_BASE, "the kernel freed it");
    }
}
