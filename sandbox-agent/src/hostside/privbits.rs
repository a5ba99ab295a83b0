//! The teardown sweep: no setuid or setgid bit a session made survives it on the host.
//!
//! seccomp refuses setting the bits from inside (`policies/seccomp/default.json`); this
//! pass is the backstop for whatever a kernel path the filter cannot see lets through
//! (openat2's mode behind a pointer, a future call). It runs when no sandboxed process is
//! left (the local launcher after its pid namespace is gone; the orchestrator after a
//! Docker container is removed) and walks the workspace through descriptors
//! ([`super::walk`]): each regular file with S_ISUID or S_ISGID is opened beneath its
//! parent with `O_NOFOLLOW`, checked to be the inode that was stat'ed, and `fchmod`ed with
//! both bits cleared. Never by path.
//!
//! # Which bits the user keeps
//!
//! A file keeps its bits only when its inode has not changed since the session started
//! (`st_ctime` before the start, less a margin). Why that is sound: the kernel sets ctime
//! to the current time on every change of an inode (creation, write, chmod, chown, link,
//! rename), no system call sets it to a chosen value, and a sandboxed process cannot move
//! the clock (settimeofday and clock_settime are refused, and it has no CAP_SYS_TIME). So
//! a file with an older ctime is exactly as the user left it: a workspace holding a root
//! filesystem image with its own setuid binaries stays intact, while anything a session
//! made, copied, linked in or touched loses the bits, and each one is logged. The margin
//! (one second) covers the coarse clock filesystems stamp ctime with; it only makes the
//! sweep strip more. Where no start time is known the sweep strips every bit.
//!
//! Directories are left alone: a setgid directory only makes new entries inherit its
//! group, and grants nothing when executed.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::walk::{self, Counts, Entry, WalkError};

/// The bits the sweep removes.
pub const PRIVILEGE_BITS: libc::mode_t = libc::S_ISUID | libc::S_ISGID;

/// How far before the session's start a ctime must lie for a file to keep its bits.
pub const CTIME_MARGIN: Duration = Duration::from_secs(1);

/// Which files keep their bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// None: every bit is stripped.
    Nothing,
    /// Files whose inode has not changed since this time (the session's start).
    UnchangedSince(SystemTime),
}

impl Keep {
    /// Files unchanged since `dir` was created (its birth time, when the filesystem
    /// records one); otherwise none. For a backend whose session state dir is made at (or
    /// before) the session's start, so the bound is never later than the start.
    pub fn unchanged_since_creation_of(dir: &Path) -> Keep {
        match std::fs::metadata(dir).and_then(|m| m.created()) {
            Ok(t) => Keep::UnchangedSince(t),
            Err(_) => Keep::Nothing,
        }
    }
}

/// What one sweep did, paths relative to the workspace.
#[derive(Debug, Default)]
pub struct Swept {
    pub stripped: Vec<PathBuf>,
    /// Files with bits the user had before the session, left as they were.
    pub kept: Vec<PathBuf>,
    pub failed: Vec<(PathBuf, io::Error)>,
    pub counts: Counts,
}

/// Strips S_ISUID and S_ISGID from regular files in `workspace` except those `keep`
/// spares. Errors on single files are collected, not fatal; a directory that cannot be
/// read stops the sweep (the caller logs it: the workspace is not known clean).
pub fn sweep(workspace: &Path, keep: Keep) -> Result<Swept, WalkError> {
    let bound = match keep {
        Keep::Nothing => None,
        Keep::UnchangedSince(t) => Some(seconds(t.checked_sub(CTIME_MARGIN).unwrap_or(t))),
    };
    let mut swept = Swept::default();
    swept.counts = walk::walk(workspace, |e| {
        if e.kind() != libc::S_IFREG || e.stat.st_mode & PRIVILEGE_BITS == 0 {
            return;
        }
        if bound.is_some_and(|b| (e.stat.st_ctime, e.stat.st_ctime_nsec) < b) {
            swept.kept.push(e.rel.to_path_buf());
            return;
        }
        match strip(e) {
            Ok(()) => swept.stripped.push(e.rel.to_path_buf()),
            Err(err) => swept.failed.push((e.rel.to_path_buf(), err)),
        }
    })?;
    Ok(swept)
}

/// [`sweep`], with each stripped or failed file logged; what the teardown paths call.
pub fn sweep_and_log(workspace: &Path, keep: Keep) {
    match sweep(workspace, keep) {
        Ok(s) => {
            for p in &s.stripped {
                tracing::warn!(
                    workspace = %workspace.display(), path = %p.display(),
                    "stripped a setuid/setgid bit made during the session"
                );
            }
            for (p, e) in &s.failed {
                tracing::error!(
                    workspace = %workspace.display(), path = %p.display(), error = %e,
                    "could not strip a setuid/setgid bit"
                );
            }
        }
        Err(e) => tracing::error!(
            workspace = %workspace.display(), error = %e,
            "privilege-bit sweep incomplete"
        ),
    }
}

fn seconds(t: SystemTime) -> (i64, i64) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            i64::from(d.subsec_nanos()),
        ),
        Err(_) => (0, 0),
    }
}

/// Clears both bits on the entry's inode through a descriptor opened beneath its parent.
fn strip(e: &Entry) -> io::Result<()> {
    let fd = open_nofollow(e.dir, e.name)?;
    let st = walk::fstat(fd.as_fd())?;
    // The inode stat'ed by the walk, still a regular file: never chmod anything else.
    if st.st_dev != e.stat.st_dev
        || st.st_ino != e.stat.st_ino
        || st.st_mode & libc::S_IFMT != libc::S_IFREG
    {
        return Err(io::Error::other("replaced while sweeping"));
    }
    let mode = st.st_mode & 0o7777 & !PRIVILEGE_BITS;
    // SAFETY: fchmod on an open descriptor with an integer mode.
    if unsafe { libc::fchmod(fd.as_raw_fd(), mode) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EBADF) {
        return Err(err);
    }
    // An O_PATH descriptor (the file was unreadable to us): chmod through its magic link,
    // which names this very inode whatever happens to the path.
    let link = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: link is a valid C string.
    if unsafe { libc::chmod(link.as_ptr(), mode) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens `name` beneath `dir` without following a symlink and without side effects
/// (O_NONBLOCK: a FIFO swapped in never blocks; O_NOCTTY); falls back to O_PATH when the
/// file is not readable to us.
fn open_nofollow(dir: BorrowedFd, name: &std::ffi::CStr) -> io::Result<OwnedFd> {
    let common = libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | common;
    for flags in [flags, libc::O_PATH | common] {
        // SAFETY: name is a valid C string; openat returns a new descriptor or -1.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: fd was just returned by openat and nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EACCES) {
            return Err(err);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EACCES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn chmod(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    #[test]
    fn strips_both_bits_from_files_and_leaves_dirs_links_and_outside_alone() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::create_dir_all(w.join("sub/deeper")).unwrap();
        for (name, m) in [
            ("suid", 0o4755),
            ("sgid", 0o2755),
            ("sub/deeper/both", 0o6711),
            ("plain", 0o755),
            ("unreadable", 0o4000),
        ] {
            std::fs::write(w.join(name), "x").unwrap();
            chmod(&w.join(name), m);
        }
        chmod(&w.join("sub"), 0o2775);
        let target = outside.path().join("target");
        std::fs::write(&target, "x").unwrap();
        chmod(&target, 0o4755);
        std::os::unix::fs::symlink(&target, w.join("link")).unwrap();

        let swept = sweep(w, Keep::Nothing).unwrap();
        assert_eq!(mode(&w.join("suid")), 0o755);
        assert_eq!(mode(&w.join("sgid")), 0o755);
        assert_eq!(mode(&w.join("sub/deeper/both")), 0o711);
        assert_eq!(mode(&w.join("plain")), 0o755);
        assert_eq!(mode(&w.join("unreadable")), 0o000);
        assert_eq!(mode(&w.join("sub")), 0o2775, "directories keep setgid");
        assert_eq!(mode(&target), 0o4755, "a symlink's target is never touched");
        assert_eq!(swept.stripped.len(), 4, "{swept:?}");
        assert!(swept.failed.is_empty(), "{swept:?}");
    }

    #[test]
    fn files_unchanged_since_the_start_keep_their_bits() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        let before = w.join("rootfs-su");
        std::fs::write(&before, "x").unwrap();
        chmod(&before, 0o4755);
        // A start well after the user's file was last changed.
        let start = SystemTime::now() + Duration::from_secs(5);
        let swept = sweep(w, Keep::UnchangedSince(start)).unwrap();
        assert_eq!(mode(&before), 0o4755);
        assert_eq!(swept.kept, vec![PathBuf::from("rootfs-su")]);
        // Touched during the session (any inode change moves ctime): stripped.
        let start = SystemTime::now() - Duration::from_secs(5);
        chmod(&before, 0o4750);
        sweep(w, Keep::UnchangedSince(start)).unwrap();
        assert_eq!(mode(&before), 0o750);
    }
}
