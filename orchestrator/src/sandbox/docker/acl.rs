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
//! # Privilege bits
//!
//! A recorded mode is a mode for a *path*, and by teardown the sandbox may have put
//! something else there: overwritten a setuid file's content (the write cleared its
//! bits), or replaced a setgid directory with a file of its own. Putting the recorded
//! setuid or setgid bit on that would hand the host a privileged file with the session's
//! content. So [`save`] also records an [`Identity`] of every entry that had any of
//! `0o7000`, and [`restore`] puts those bits back only on the very same, unchanged inode
//! ([`restored_mode`]); anything else gets the permission bits alone. A record without an
//! identity (from an older Cordon) proves nothing: its bits stay off.
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
    /// What stood at `rel`, for an entry whose mode had any of `0o7000` (see
    /// [`restored_mode`]). Optional so that a backup written before it existed still
    /// restores, with the privilege bits left off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<Identity>,
}

/// What identifies a saved entry, so that restore can tell it is the same thing, unchanged.
///
/// For a regular file (and any other non-directory) the witness of its content is size
/// plus mtime to the nanosecond, not a hash: every content change (write, truncate, a
/// written mmap, fallocate) stamps mtime with the current time, which lies after the save,
/// and only the file's owner or a holder of CAP_FOWNER can set mtime to a chosen value.
/// The sandbox uid is never the owner of a recorded file (if it was, `put_back` chowns it
/// and it proves nothing) and its container drops every capability. A hash would add
/// reading each privileged file in full on the host twice per session (a setuid file can
/// be any size) and prove no more. Owner and group are compared too: setuid and setgid
/// run as them, and a new inode reusing a freed number belongs to the sandbox uid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Identity {
    dev: u64,
    ino: u64,
    /// The file type bits (`S_IFMT`) of `st_mode`.
    kind: u32,
    uid: u32,
    gid: u32,
    size: i64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Identity {
    fn of(st: &FileStat) -> Identity {
        Identity {
            dev: st.st_dev,
            ino: st.st_ino,
            kind: st.st_mode & libc::S_IFMT,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size,
            mtime: st.st_mtime,
            mtime_nsec: st.st_mtime_nsec,
        }
    }

    /// Whether `now` is this same inode, of the same type and owners, and, for anything
    /// but a directory, with the same content (size and mtime). A directory's size and
    /// mtime change with every entry made in it, and its setgid bit grants nothing by
    /// itself (see [`restored_mode`]), so the inode is what counts there.
    fn is(&self, now: &FileStat) -> bool {
        let now_id = Identity::of(now);
        let same_inode = (self.dev, self.ino, self.kind, self.uid, self.gid)
            == (now_id.dev, now_id.ino, now_id.kind, now_id.uid, now_id.gid);
        if self.kind == libc::S_IFDIR {
            return same_inode;
        }
        same_inode
            && (self.size, self.mtime, self.mtime_nsec)
                == (now_id.size, now_id.mtime, now_id.mtime_nsec)
    }
}

/// The privilege bits: setuid, setgid, sticky.
const PRIVILEGE: u32 = 0o7000;

/// The identity to record for the entry `st` describes: only where there are privilege bits
/// to guard, which keeps the backup as small as before for ordinary trees.
fn identity_if_privileged(st: &FileStat) -> Option<Identity> {
    (st.st_mode & PRIVILEGE != 0).then(|| Identity::of(st))
}

/// The mode to put back on `now`, what stands at `saved`'s path at restore. `chowned`:
/// [`put_back`] just handed it from the sandbox uid to the owner.
///
/// - The permission bits always come back as recorded: they are the user's, and they
///   grant nothing beyond what the entry's owner already has.
/// - Setuid, setgid (and sticky) come back only when `now` is provably the entry that
///   had them ([`Identity::is`]): otherwise a file the session wrote or put at that path
///   would run as the recorded owner or group. A record without an identity (an older
///   backup) proves nothing, so the bits stay off: losing a bit is the safe failure.
/// - Something the sandbox uid owned is never the recorded entry (the sandbox uid owned
///   none of them), whatever the rest of its stat says.
/// - A directory that is the same inode keeps its setgid: a setgid directory only makes
///   new entries take its group (and new subdirectories the bit); executing it grants
///   nothing, and a file made in it gets no setgid bit of its own (a chmod g+s by someone
///   outside the group is cleared by the kernel), so no privilege follows from it.
/// - Sticky goes back onto any directory at a path that had it, even a replaced one: it
///   only restricts who may remove or rename entries, so dropping it from a world-writable
///   directory would be the weaker choice. It never goes onto a non-directory unless
///   that is the very same file.
fn restored_mode(saved: &Saved, now: &FileStat, chowned: bool) -> u32 {
    let mut mode = saved.mode & 0o777;
    let proven = !chowned && saved.id.is_some_and(|id| id.is(now));
    if proven {
        mode |= saved.mode & PRIVILEGE;
    } else if kind(now) == SFlag::S_IFDIR {
        mode |= saved.mode & libc::S_ISVTX;
    }
    mode
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
        id: identity_if_privileged(&root_stat),
    });
    let mut failure = None;
    tree.walk(&mut |rel, dir, name, st| {
        if kind(st) == SFlag::S_IFLNK || failure.is_some() {
            return;
        }
        match handle(dir, name) {
            Ok((fd, path)) => {
                // Mode and identity of the inode the descriptor holds, the one whose xattrs
                // are read here, not of whatever the walk's stat saw a moment earlier.
                let now = match nix::sys::stat::fstat(&fd) {
                    Ok(now) => now,
                    Err(e) => {
                        failure = Some(e.into());
                        return;
                    }
                };
                saved.push(Saved {
                    rel: rel.as_os_str().as_bytes().to_vec(),
                    mode: now.st_mode & 0o7777,
                    access: get_xattr(&path, ACCESS),
                    default: get_xattr(&path, DEFAULT),
                    id: identity_if_privileged(&now),
                });
            }
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
        // The root is held, never chowned here, and re-stat'ed now: its mode is decided on
        // the inode the chmod reaches.
        match nix::sys::stat::fstat(tree.root()) {
            Ok(now) => note(apply(&root_path, s, true, restored_mode(s, &now, false))),
            Err(e) => note(Err(e.into())),
        }
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
    let chowned = st.st_uid == uid || st.st_gid == uid;
    if chowned {
        // chown also clears setuid and setgid bits of a non-directory on the way: nothing
        // the sandbox made keeps a privilege bit under a new owner. (A recorded mode does
        // not give them back either: see `restored_mode`.)
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
    let (fd, path) = handle(dir, name)?;
    match saved {
        Some(s) => {
            // Decide on the inode the descriptor holds, the one the chmod through `path`
            // reaches, not on the walk's earlier stat of the name.
            let now = nix::sys::stat::fstat(&fd).map_err(std::io::Error::from)?;
            if kind(&now) == SFlag::S_IFLNK {
                // Became a symlink since the walk: it has no mode or ACL to restore.
                return Ok(());
            }
            let mode = restored_mode(s, &now, chowned);
            apply(&path, s, kind(&now) == SFlag::S_IFDIR, mode)
        }
        None => {
            set_xattr(&path, ACCESS, None)?;
            if kind(st) == SFlag::S_IFDIR {
                set_xattr(&path, DEFAULT, None)?;
            }
            Ok(())
        }
    }
}

/// Puts `saved`'s ACLs and `mode` (from [`restored_mode`], never `saved.mode` unchecked)
/// on the entry `path` names.
fn apply(path: &CString, saved: &Saved, is_dir: bool, mode: u32) -> std::io::Result<()> {
    set_xattr(path, ACCESS, saved.access.as_deref())?;
    if is_dir {
        set_xattr(path, DEFAULT, saved.default.as_deref())?;
    }
    // SAFETY: path is NUL-terminated and lives across the call.
    if unsafe { libc::chmod(path.as_ptr(), mode) } != 0 {
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

    fn mode_of(p: &Path) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn chmod(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A tree with privileged entries, saved and granted: `rootfs/passwd` and `rootfs/su`
    /// are 04755 files, `src` and `keep` 02775 directories, all saved in the returned
    /// backup, then granted to `uid`. Returns (workspace, run dir, backup).
    fn privileged_tree(uid: u32) -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf) {
        let ws = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let root = ws.path();
        std::fs::create_dir_all(root.join("rootfs")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("keep")).unwrap();
        std::fs::write(root.join("rootfs/passwd"), "the real passwd").unwrap();
        std::fs::write(root.join("rootfs/su"), "the real su").unwrap();
        std::fs::write(root.join("src/main.c"), "int main;").unwrap();
        chmod(&root.join("rootfs/passwd"), 0o4755);
        chmod(&root.join("rootfs/su"), 0o4755);
        chmod(&root.join("src"), 0o2775);
        chmod(&root.join("keep"), 0o2775);
        let backup = run.path().join("acl.json");
        save(root, &backup).unwrap();
        setfacl(
            &["-R", "-P", "-m", &format!("u:{uid}:rwX,d:u:{uid}:rwX")],
            root,
        );
        (ws, run, backup)
    }

    /// Makes `p` the sandbox's, as a file its uid wrote would be (only root can chown).
    fn as_the_sandbox(p: &Path, uid: u32) {
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap();
        }
    }

    /// The attacks: (1) a setuid file's content overwritten (the write cleared its bits)
    /// and (2) a setgid directory replaced by a file must not get the recorded bits back;
    /// (3) an untouched setuid file and a setgid directory that is still the same inode
    /// (with new entries in it) keep theirs.
    #[test]
    fn restore_puts_privilege_bits_back_only_on_the_same_unchanged_entry() {
        if Command::new("setfacl").arg("--version").output().is_err() {
            eprintln!("skipped: no setfacl");
            return;
        }
        let uid = 300_125;
        let (ws, _run, backup) = privileged_tree(uid);
        let root = ws.path();
        // (1) A write by a non-owner clears the bits; then the session's content.
        let passwd = root.join("rootfs/passwd");
        chmod(&passwd, 0o755);
        std::fs::write(&passwd, "#!/bin/sh\nexec /bin/sh -p\n").unwrap();
        // (2) rm -r src; cp /bin/sh src
        std::fs::remove_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src"), "a shell").unwrap();
        chmod(&root.join("src"), 0o755);
        as_the_sandbox(&root.join("src"), uid);
        // The same directory gains an entry (its mtime and size change).
        std::fs::write(root.join("keep/new"), "n").unwrap();
        as_the_sandbox(&root.join("keep/new"), uid);
        restore(root, uid, &backup).unwrap();
        assert_eq!(mode_of(&passwd) & 0o6000, 0, "overwritten file");
        assert_eq!(mode_of(&passwd), 0o755);
        assert_eq!(
            mode_of(&root.join("src")) & 0o6000,
            0,
            "dir replaced by a file"
        );
        assert_eq!(mode_of(&root.join("src")), 0o775);
        assert_eq!(mode_of(&root.join("rootfs/su")), 0o4755, "untouched file");
        assert_eq!(mode_of(&root.join("keep")), 0o2775, "same directory");
        assert!(!backup.exists());
    }

    /// A backup written before identities were recorded still restores everything but
    /// the privilege bits, which stay off: nothing proves what stands there now.
    #[test]
    fn an_old_backup_without_identities_restores_with_privilege_bits_off() {
        if Command::new("setfacl").arg("--version").output().is_err() {
            eprintln!("skipped: no setfacl");
            return;
        }
        let uid = 300_126;
        let (ws, _run, backup) = privileged_tree(uid);
        let root = ws.path();
        let mut records: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(&backup).unwrap()).unwrap();
        assert!(records.iter().any(|r| r.get("id").is_some()));
        for r in &mut records {
            r.as_object_mut().unwrap().remove("id");
        }
        std::fs::write(&backup, serde_json::to_vec(&records).unwrap()).unwrap();
        restore(root, uid, &backup).unwrap();
        assert_eq!(mode_of(&root.join("rootfs/su")), 0o755);
        assert_eq!(mode_of(&root.join("rootfs/passwd")), 0o755);
        assert_eq!(mode_of(&root.join("src")), 0o775);
        assert!(!getfacl(root).contains(&uid.to_string()));
    }

    /// The decision alone, on stats edited from a real one.
    #[test]
    fn restored_mode_needs_the_same_inode_owner_and_content() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "x").unwrap();
        chmod(&f, 0o4755);
        let st = nix::sys::stat::lstat(&f).unwrap();
        let saved = Saved {
            rel: b"f".to_vec(),
            mode: 0o4755,
            access: None,
            default: None,
            id: identity_if_privileged(&st),
        };
        assert_eq!(restored_mode(&saved, &st, false), 0o4755);
        assert_eq!(restored_mode(&saved, &st, true), 0o755, "chowned");
        type Edit = (&'static str, fn(&mut FileStat));
        let edits: [Edit; 5] = [
            ("mtime", |s| s.st_mtime_nsec += 1),
            ("size", |s| s.st_size += 1),
            ("inode", |s| s.st_ino += 1),
            ("owner", |s| s.st_uid += 1),
            ("type", |s| {
                s.st_mode = (s.st_mode & !libc::S_IFMT) | libc::S_IFDIR
            }),
        ];
        for (what, edit) in edits {
            let mut now = st;
            edit(&mut now);
            assert_eq!(restored_mode(&saved, &now, false), 0o755, "{what}");
        }
        // A sticky bit goes back onto a directory at its path, never onto a file there.
        let sticky = Saved {
            mode: 0o1777,
            id: None,
            ..saved
        };
        let d = nix::sys::stat::lstat(dir.path()).unwrap();
        assert_eq!(restored_mode(&sticky, &d, false), 0o1777);
        assert_eq!(restored_mode(&sticky, &st, false), 0o777);
    }
}
