//! A walk of a directory tree that never follows a link: every directory is opened with
//! `openat(parent, name, O_DIRECTORY | O_NOFOLLOW)` and every entry is stat'ed with
//! `fstatat(parent, name, AT_SYMLINK_NOFOLLOW)`, so a symlink planted anywhere in the tree
//! is seen as a symlink, never as what it points to, and no path is resolved twice.
//!
//! Depth first; a directory's descriptor stays open only while entries below it are
//! pending, so at most one descriptor per level is open.
//!
//! # Directories made unreadable
//!
//! A sandboxed session runs as the walking user (the local backend idmaps the workspace to
//! its owner), so it owns what it makes and may `chmod 000` a directory after filling it
//! (a setuid file, a hard link). A directory this process owns but may not open or search
//! is given its owner's read, write and search back (`u+rwx`), logged, and walked
//! ([`Counts::reopened_dirs`]). That grants nothing new: the owner may chmod its own
//! directory at will, and the session could have done the same itself. Only directories
//! owned by this process's effective uid are changed; another user's stay skipped
//! ([`Counts::unreadable_dirs`]): the host has no right to them (and under host root the
//! walk meets none).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Deeper trees are refused rather than walked (a descriptor per level stays open).
pub const MAX_DEPTH: usize = 512;

/// One entry met by the walk: its parent directory's descriptor, its name there, its path
/// relative to the root, and its own (not-followed) status.
pub struct Entry<'a> {
    pub dir: BorrowedFd<'a>,
    pub name: &'a CStr,
    pub rel: &'a Path,
    pub stat: &'a libc::stat,
}

impl Entry<'_> {
    /// The file type bits of the entry's mode.
    pub fn kind(&self) -> libc::mode_t {
        self.stat.st_mode & libc::S_IFMT
    }
}

/// Why a walk stopped.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("opening {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading the directory {}: {source}", path.display())]
    ReadDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is deeper than {MAX_DEPTH} levels", path.display())]
    TooDeep { path: PathBuf },
}

/// Counts of what a walk saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub dirs: u64,
    pub files: u64,
    /// Directories below the root this process may not open or search (EACCES) and does
    /// not own, skipped. A sandbox runs as this user and cannot give a directory away,
    /// so none of these is one it made (under host root the walk meets none).
    pub unreadable_dirs: u64,
    /// Directories this process owns but could not open or search (a session's `chmod
    /// 000` after filling them), given `u+rwx` back and walked (see the module docs).
    pub reopened_dirs: u64,
}

/// A directory waiting to be read: its parent's descriptor (kept alive by the Rc), its
/// name there and its relative path.
struct Pending {
    parent: Rc<OwnedFd>,
    name: CString,
    rel: PathBuf,
    depth: usize,
}

/// Walks `root` (a directory, itself not a symlink), calling `visit` for every entry below
/// it except `.` and `..`. Entries vanishing mid-walk are skipped; a directory that cannot
/// be opened or read is an error (a pass that skipped it would be incomplete), except one
/// this process neither may open nor owns (counted in [`Counts::unreadable_dirs`]).
pub fn walk(root: &Path, mut visit: impl FnMut(&Entry)) -> Result<Counts, WalkError> {
    let mut w = Walker {
        root,
        euid: nix::unistd::geteuid().as_raw(),
        counts: Counts::default(),
    };
    let fd = w.open_root().map_err(|source| WalkError::Open {
        path: root.to_path_buf(),
        source,
    })?;
    let mut stack: Vec<Pending> = Vec::new();
    let mut current = Some((Rc::new(fd), PathBuf::new(), 0usize));
    loop {
        let (dir, rel, depth) = match current.take() {
            Some(d) => d,
            None => match stack.pop() {
                None => return Ok(w.counts),
                Some(p) => match w.open(p.parent.as_fd(), &p.name, &p.rel) {
                    Ok(Some(fd)) => (Rc::new(fd), p.rel, p.depth),
                    // Another user's, which this process may not open (counted).
                    Ok(None) => continue,
                    // Gone, or replaced by a non-directory since it was listed.
                    Err(e) if vanished(&e) => continue,
                    Err(source) => {
                        return Err(WalkError::Open {
                            path: p.rel,
                            source,
                        });
                    }
                },
            },
        };
        w.counts.dirs += 1;
        let names = read_names(&dir).map_err(|source| WalkError::ReadDir {
            path: rel.clone(),
            source,
        })?;
        for name in names {
            let Some(stat) = fstatat_nofollow(dir.as_fd(), &name) else {
                continue;
            };
            let child_rel = rel.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            visit(&Entry {
                dir: dir.as_fd(),
                name: &name,
                rel: &child_rel,
                stat: &stat,
            });
            match stat.st_mode & libc::S_IFMT {
                libc::S_IFDIR => {
                    if depth + 1 >= MAX_DEPTH {
                        return Err(WalkError::TooDeep { path: child_rel });
                    }
                    stack.push(Pending {
                        parent: dir.clone(),
                        name,
                        rel: child_rel,
                        depth: depth + 1,
                    });
                }
                libc::S_IFREG => w.counts.files += 1,
                _ => {}
            }
        }
    }
}

/// What opening a directory needs besides its parent and name: whose directories may be
/// made readable again, and what to count.
struct Walker<'a> {
    root: &'a Path,
    euid: libc::uid_t,
    counts: Counts,
}

impl Walker<'_> {
    /// Opens the root beneath its parent (opened by path: the caller's own), so a root the
    /// session made unreadable is treated as any directory below it. A root this process
    /// neither may open nor owns is an error (EACCES).
    fn open_root(&mut self) -> io::Result<OwnedFd> {
        let root = self.root;
        let bytes = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
        };
        let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
            return open_dir(libc::AT_FDCWD, &bytes(root)?);
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let parent = open_path(&bytes(parent)?)?;
        self.open(parent.as_fd(), &bytes(Path::new(name))?, Path::new(""))?
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EACCES))
    }

    /// Opens the directory `name` beneath `parent` (`rel` its path below the root) so that
    /// its entries can be listed and stat'ed. `None`: this process may not open or search
    /// it and does not own it (counted, skipped).
    fn open(&mut self, parent: BorrowedFd, name: &CStr, rel: &Path) -> io::Result<Option<OwnedFd>> {
        let fd = match open_dir(parent.as_raw_fd(), name) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                match self.reopen(parent, name, rel)? {
                    Some(fd) => fd,
                    None => return Ok(None),
                }
            }
            Err(e) => return Err(e),
        };
        // Readable but not searchable (say mode 0600): each entry's fstatat would fail
        // and the entry be skipped as if it had vanished.
        if searchable(&fd) {
            return Ok(Some(fd));
        }
        let st = fstat(fd.as_fd())?;
        if st.st_uid != self.euid {
            self.counts.unreadable_dirs += 1;
            return Ok(None);
        }
        // Security: changed through the descriptor of the very inode opened, which this
        // process owns (see the module docs for why giving the owner u+rwx is sound).
        nix::sys::stat::fchmod(&fd, owner_access(st.st_mode)).map_err(io::Error::from)?;
        self.reopened(rel, st.st_mode, "could not be searched");
        Ok(Some(fd))
    }

    /// A directory this process may not open: when it owns it, gives the owner u+rwx back
    /// through the parent's descriptor and opens it again. `None`: not its own.
    fn reopen(
        &mut self,
        parent: BorrowedFd,
        name: &CStr,
        rel: &Path,
    ) -> io::Result<Option<OwnedFd>> {
        let Some(st) = fstatat_nofollow(parent, name) else {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != self.euid {
            self.counts.unreadable_dirs += 1;
            return Ok(None);
        }
        // Security: fchmodat follows a final symlink (Linux refuses AT_SYMLINK_NOFOLLOW on
        // most filesystems), so the name was stat'ed just above without following and is
        // a directory this process owns; no sandboxed process runs during these passes to
        // swap it (see the `hostside` docs), and the inode opened is checked below.
        nix::sys::stat::fchmodat(
            parent,
            name,
            owner_access(st.st_mode),
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        )
        .map_err(io::Error::from)?;
        let fd = open_dir(parent.as_raw_fd(), name)?;
        let now = fstat(fd.as_fd())?;
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) {
            return Err(io::Error::other("replaced while being made readable"));
        }
        self.reopened(rel, st.st_mode, "could not be opened");
        Ok(Some(fd))
    }

    fn reopened(&mut self, rel: &Path, was: libc::mode_t, why: &str) {
        self.counts.reopened_dirs += 1;
        tracing::warn!(
            dir = %self.root.join(rel).display(),
            mode = format_args!("{:04o}", was & 0o7777),
            "a directory of the user's {why} by the host-side walk (a session, which runs \
             as the user, may have made it so): its owner's read, write and search are \
             given back so that it is walked"
        );
    }
}

/// `mode`'s permission bits with the owner's read, write and search added.
fn owner_access(mode: libc::mode_t) -> nix::sys::stat::Mode {
    nix::sys::stat::Mode::from_bits_truncate((mode | 0o700) & 0o7777)
}

/// Whether this process may search the open directory `fd` (look names up in it). Only a
/// refusal (EACCES) counts as not; the check looks up `.` in it, which needs search.
fn searchable(fd: &OwnedFd) -> bool {
    let r = nix::unistd::faccessat(
        fd,
        c".",
        nix::unistd::AccessFlags::X_OK,
        nix::fcntl::AtFlags::AT_EACCESS,
    );
    r != Err(nix::errno::Errno::EACCES)
}

fn vanished(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP)
    )
}

/// Opens a directory beneath `dirfd` without following a final symlink.
fn open_dir(dirfd: libc::c_int, name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: name is a valid C string; openat returns a new descriptor or -1.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by openat and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a directory by path for use as the base of *at calls only (`O_PATH`: no read
/// permission needed), following links: for the root's parent, a path of the caller's.
fn open_path(path: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: path is a valid C string; open returns a new descriptor or -1.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by open and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The status of `name` in `dir`, not following a symlink; `None` if it vanished.
pub fn fstatat_nofollow(dir: BorrowedFd, name: &CStr) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: name is a valid C string and st a writable stat buffer.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    // SAFETY: fstatat filled the buffer when it returned 0.
    (rc == 0).then(|| unsafe { st.assume_init() })
}

/// The status of an open descriptor.
pub fn fstat(fd: BorrowedFd) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fd is open and st a writable stat buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat filled the buffer.
    Ok(unsafe { st.assume_init() })
}

/// Every name in the directory except `.` and `..`. Reads through a duplicate so the
/// directory stream's offset never disturbs the descriptor used for *at calls.
fn read_names(dir: &OwnedFd) -> io::Result<Vec<CString>> {
    let dup = dir.try_clone()?;
    let mut d = nix::dir::Dir::from_fd(dup).map_err(io::Error::from)?;
    let mut names = Vec::new();
    for entry in d.iter() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name();
        if name != c"." && name != c".." {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

#[cfg(test)]
#[path = "walk_tests.rs"]
pub(crate) mod tests;
