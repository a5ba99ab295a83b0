//! Per-session sandbox uids, and how the workspace becomes writable for them.
//!
//! Every live session runs as its own non-root uid (`UID_BASE` + n, gid equal to uid), so
//! two sessions on one host cannot touch each other's processes or files even if both
//! escaped their mount namespace. Docker 20.10 has no idmapped bind mounts, so the uid in
//! the container is the uid on the host, and the workspace (often owned by someone else,
//! root here) must grant it access. Choices considered:
//! - chown the user's tree to the sandbox uid: rewrites the user's ownership; rejected;
//! - run as the workspace owner's uid: no grant needed, but two sessions of one owner
//!   share a uid, and a root-owned workspace would mean running as root; rejected;
//! - a POSIX ACL entry `u:<uid>:rwX` (plus a default entry on directories so that files
//!   created later stay reachable, and a default entry for the owner so the files the
//!   sandbox creates stay the owner's to edit), added when the session starts and removed
//!   when it ends. Ownership and mode bits of the user's files are untouched (`ls -l`
//!   shows the ACL mask in the group column while the entry exists). Chosen.
//!
//! The grant uses `setfacl` (Debian package `acl`); a host without it cannot run sessions
//! on workspaces the sandbox uid cannot already write.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use crate::sandbox::SandboxError;

/// First sandbox uid: far above the ranges distributions hand to people and services.
pub const UID_BASE: u32 = 300_000;
/// How many sandbox uids exist (sessions alive at once on one host).
pub const UID_RANGE: u32 = 60_000;

/// Hands out distinct uids to live sessions.
#[derive(Debug)]
pub struct UidAllocator {
    base: u32,
    used: Mutex<BTreeSet<u32>>,
}

impl UidAllocator {
    pub fn new(base: u32) -> Self {
        Self {
            base,
            used: Mutex::new(BTreeSet::new()),
        }
    }

    /// Reserves the lowest free uid.
    pub fn allocate(&self) -> Option<u32> {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let uid = (self.base..self.base.saturating_add(UID_RANGE)).find(|u| !used.contains(u))?;
        used.insert(uid);
        Some(uid)
    }

    /// Marks a uid as used (an adopted container's).
    pub fn reserve(&self, uid: u32) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        used.insert(uid);
    }

    pub fn release(&self, uid: u32) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        used.remove(&uid);
    }
}

/// Gives `uid` read-write access to the tree at `workspace` by ACL (see the module docs).
pub fn grant(workspace: &Path, uid: u32) -> Result<(), SandboxError> {
    let meta = std::fs::metadata(workspace).map_err(|source| SandboxError::Setup {
        step: "stat workspace",
        source,
    })?;
    let mut spec = format!("u:{uid}:rwX,d:u:{uid}:rwX");
    if meta.uid() != 0 {
        // Files the sandbox creates belong to its uid; this keeps them the owner's to edit.
        spec.push_str(&format!(",d:u:{}:rwX", meta.uid()));
    }
    setfacl(&["-R", "-P", "-m", &spec], workspace)
}

/// Removes the entries [`grant`] added. Files the sandbox created keep its uid as owner,
/// with the owner's default entry granting the workspace owner access.
pub fn revoke(workspace: &Path, uid: u32) -> Result<(), SandboxError> {
    if !workspace.exists() {
        return Ok(());
    }
    setfacl(
        &["-R", "-P", "-x", &format!("u:{uid},d:u:{uid}")],
        workspace,
    )
}

fn setfacl(args: &[&str], path: &Path) -> Result<(), SandboxError> {
    let out = Command::new("setfacl")
        .args(args)
        .arg(path)
        .output()
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
        let a = UidAllocator::new(UID_BASE);
        let u1 = a.allocate().unwrap();
        let u2 = a.allocate().unwrap();
        assert_ne!(u1, u2);
        assert!(u1 >= UID_BASE && u2 >= UID_BASE);
        a.release(u1);
        assert_eq!(a.allocate(), Some(u1));
        a.reserve(u2 + 1);
        assert_ne!(a.allocate(), Some(u2 + 1));
    }
}
