//! The ACL fallback for workspaces the kernel or filesystem cannot idmap (see [`super::access`]):
//! the sandbox uid gets `u:<uid>:rwX` (and default entries) for the session, and at the end
//! the tree gets back exactly the ACLs and modes it had.
//!
//! - Before the grant, [`save`] records every entry's mode and its raw
//!   `system.posix_acl_access` / `system.posix_acl_default` xattrs (absent ones as absent)
//!   in a host-only file of the session's run directory.
//! - [`restore`] puts each recorded entry's xattrs and mode back as they were, drops the
//!   ACLs that entries made during the session inherited, and hands what the sandbox uid
//!   created to the workspace's owner (as the idmapped mount does natively), so nothing of
//!   the session stays on the user's tree. It runs on every failure path after the grant,
//!   at the session's end, and after a crash (reconcile), and is idempotent.
//!
//! Every step goes through held directory descriptors ([`sandbox_agent::beneath`]): a symlink the
//! sandbox planted is never followed, so a restore cannot chmod or chown outside the tree.
//! The xattr calls use `/proc/self/fd/N` of an `O_PATH|O_NOFOLLOW` descriptor of the entry,
//! which names that one inode.

use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::{Gid, Uid};
use serde::{Deserialize, Serialize};

use sandbox_agent::beneath::Beneath;

const ACCESS: &CStr = c"system.posix_acl_access";
const DEFAULT: &CStr = c"system.posix_acl_default";

/// One entry's ACL state before the grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Saved {
    /// Relative path, as bytes.
    rel: Vec<u8>,
    /// Permission bits (with setuid, setgid, sticky).
    mode: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    access: Option<Vec<u8>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default: Option<Vec<u8>>,
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// An `O_PATH` descriptor of `name` in `dir` and the `/proc/self/fd` path naming it.
fn handle(dir: &OwnedFd, name: &OsStr) -> std::io::Result<(OwnedFd, CString)> {
    let fd = nix::fcntl::openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let path =
        CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(std::io::Error::other)?;
    Ok((fd, path))
}

fn get_xattr(path: &CString, name: &CStr) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: both strings are NUL-terminated and live across the call; buf is writable
    // for its length, which is passed as the size.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).ok()?;
    buf.truncate(n);
    Some(buf)
}

fn set_xattr(path: &CString, name: &CStr, value: Option<&[u8]>) -> std::io::Result<()> {
    // SAFETY: the strings are NUL-terminated and live across the call; value points to
    // `len` readable bytes.
    let r = unsafe {
        match value {
            Some(v) => libc::setxattr(path.as_ptr(), name.as_ptr(), v.as_ptr().cast(), v.len(), 0),
            None => libc::removexattr(path.as_ptr(), name.as_ptr()),
        }
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        // Removing what is not there.
        Some(libc::ENODATA) if value.is_none() => Ok(()),
        _ => Err(e),
    }
}

/// Records the mode and ACL xattrs of every entry under `workspace` (itself included) in
/// `backup`, a host-only file. Symlinks carry no ACL and are skipped.
pub fn save(workspace: &Path, backup: &Path) -> std::io::Result<()> {
    let tree = Beneath::open(workspace)?;
    let mut saved = Vec::new();
    let root_stat = nix::sys::stat::fstat(tree.root()).map_err(std::io::Error::from)?;
    let root_path = CString::new(format!("/proc/self/fd/{}", tree.root().as_raw_fd()))
        .map_err(std::io::Error::other)?;
    saved.push(Saved {
        rel: Vec::new(),
        mode: root_stat.st_mode & 0o7777,
        access: get_xattr(&root_path, ACCESS),
        default: get_xattr(&root_path, DEFAULT),
    });
    let mut failure = None;
    tree.walk(&mut |rel, dir, name, st| {
        if kind(st) == SFlag::S_IFLNK || failure.is_some() {
            return;
        }
        match handle(dir, name) {
            Ok((_fd, path)) => saved.push(Saved {
                rel: rel.as_os_str().as_bytes().to_vec(),
                mode: st.st_mode & 0o7777,
                access: get_xattr(&path, ACCESS),
                default: get_xattr(&path, DEFAULT),
            }),
            Err(e) => failure = Some(e),
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    let json = serde_json::to_vec(&saved).map_err(std::io::Error::other)?;
    let tmp = backup.with_extension("tmp");
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, backup)
}

/// Puts back what [`save`] recorded in `backup` (see the module docs), gives what `uid`
/// owns to the workspace's owner, and removes `backup`. Without a backup there is nothing
/// to undo. Returns the first error, after trying every entry.
pub fn restore(workspace: &Path, uid: u32, backup: &Path) -> std::io::Result<()> {
    let saved: Vec<Saved> = match std::fs::read(backup) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let tree = match Beneath::open(workspace) {
        Ok(t) => t,
        // The workspace is gone: nothing left to restore.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return std::fs::remove_file(backup);
        }
        Err(e) => return Err(e),
    };
    let by_rel: HashMap<&[u8], &Saved> = saved.iter().map(|s| (s.rel.as_slice(), s)).collect();
    let root_stat = nix::sys::stat::fstat(tree.root()).map_err(std::io::Error::from)?;
    let owner = (root_stat.st_uid, root_stat.st_gid);
    let mut first_error: Option<std::io::Error> = None;
    let mut note = |r: std::io::Result<()>| {
        if let Err(e) = r
            && first_error.is_none()
        {
            first_error = Some(e);
        }
    };
    tree.walk(&mut |rel, dir, name, st| {
        let key = rel.as_os_str().as_bytes();
        note(put_back(
            dir,
            name,
            st,
            by_rel.get(key).copied(),
            uid,
            owner,
        ));
    })?;
    let root_path = CString::new(format!("/proc/self/fd/{}", tree.root().as_raw_fd()))
        .map_err(std::io::Error::other)?;
    if let Some(s) = by_rel.get(&b""[..]) {
        note(apply(&root_path, s, true));
    }
    match first_error {
        None => std::fs::remove_file(backup),
        Some(e) => Err(e),
    }
}

/// One entry: the sandbox's files go to the owner; recorded entries get their ACLs and
/// mode back; new ones lose the ACLs they inherited.
fn put_back(
    dir: &OwnedFd,
    name: &OsStr,
    st: &FileStat,
    saved: Option<&Saved>,
    uid: u32,
    owner: (u32, u32),
) -> std::io::Result<()> {
    if st.st_uid == uid || st.st_gid == uid {
        // chown also clears setuid and setgid bits on the way: nothing the sandbox made
        // keeps a privilege bit under a new owner.
        let (u, g) = (
            (st.st_uid == uid).then(|| Uid::from_raw(owner.0)),
            (st.st_gid == uid).then(|| Gid::from_raw(owner.1)),
        );
        nix::unistd::fchownat(dir, name, u, g, AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(std::io::Error::from)?;
    }
    if kind(st) == SFlag::S_IFLNK {
        return Ok(());
    }
    let (_fd, path) = handle(dir, name)?;
    match saved {
        Some(s) => apply(&path, s, kind(st) == SFlag::S_IFDIR),
        None => {
            set_xattr(&path, ACCESS, None)?;
            if kind(st) == SFlag::S_IFDIR {
                set_xattr(&path, DEFAULT, None)?;
            }
            Ok(())
        }
    }
}

fn apply(path: &CString, saved: &Saved, is_dir: bool) -> std::io::Result<()> {
    set_xattr(path, ACCESS, saved.access.as_deref())?;
    if is_dir {
        set_xattr(path, DEFAULT, saved.default.as_deref())?;
    }
    // SAFETY: path is NUL-terminated and lives across the call.
    if unsafe { libc::chmod(path.as_ptr(), saved.mode) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn getfacl(p: &Path) -> String {
        let out = Command::new("getfacl")
            .args(["-R", "-P", "-p", "-n"])
            .arg(p)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn setfacl(args: &[&str], p: &Path) {
        let ok = Command::new("setfacl").args(args).arg(p).status().unwrap();
        assert!(ok.success());
    }

    #[test]
    fn restore_gives_back_the_exact_acls_and_modes_including_a_prior_default_acl() {
        if Command::new("setfacl").arg("--version").output().is_err() {
            eprintln!("skipped: no setfacl");
            return;
        }
        let ws = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("own/sub")).unwrap();
        std::fs::write(ws.path().join("own/sub/f"), "x").unwrap();
        std::fs::write(ws.path().join("plain"), "y").unwrap();
        // The user's own ACLs, a default one included.
        setfacl(&["-m", "d:u:1234:rx,u:1234:r"], &ws.path().join("own"));
        setfacl(&["-m", "u:4321:rw"], &ws.path().join("plain"));
        let before = getfacl(ws.path());
        let backup = run.path().join("acl.json");
        save(ws.path(), &backup).unwrap();
        let uid = 300_123;
        setfacl(
            &[
                "-R",
                "-P",
                "-m",
                &format!("u:{uid}:rwX,d:u:{uid}:rwX,d:u:0:rwX"),
            ],
            ws.path(),
        );
        // What the session made: inherits default ACLs, owned by the sandbox uid.
        std::fs::write(ws.path().join("own/new"), "n").unwrap();
        std::os::unix::fs::lchown(ws.path().join("own/new"), Some(uid), Some(uid)).unwrap();
        assert_ne!(getfacl(ws.path()), before);
        restore(ws.path(), uid, &backup).unwrap();
        std::fs::remove_file(ws.path().join("own/new")).unwrap();
        assert_eq!(getfacl(ws.path()), before);
        assert!(!backup.exists());
        // Idempotent: a second restore (reconcile after a crash) has nothing to do.
        restore(ws.path(), uid, &backup).unwrap();
    }

    #[test]
    fn what_the_sandbox_made_goes_to_the_owner_without_acls() {
        if Command::new("setfacl").arg("--version").output().is_err() {
            return;
        }
        let ws = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let backup = run.path().join("acl.json");
        save(ws.path(), &backup).unwrap();
        let uid = 300_124;
        setfacl(
            &["-R", "-P", "-m", &format!("u:{uid}:rwX,d:u:{uid}:rwX")],
            ws.path(),
        );
        let made = ws.path().join("made");
        std::fs::write(&made, "m").unwrap();
        std::os::unix::fs::lchown(&made, Some(uid), Some(uid)).unwrap();
        restore(ws.path(), uid, &backup).unwrap();
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::metadata(ws.path()).unwrap().uid();
        assert_eq!(std::fs::metadata(&made).unwrap().uid(), owner);
        assert!(!getfacl(ws.path()).contains(&uid.to_string()));
    }
}
