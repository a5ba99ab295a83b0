//! A walk of a directory tree that never follows a link: every directory is opened with
//! `openat(parent, name, O_DIRECTORY | O_NOFOLLOW)` and every entry is stat'ed with
//! `fstatat(parent, name, AT_SYMLINK_NOFOLLOW)`, so a symlink planted anywhere in the tree
//! is seen as a symlink, never as what it points to, and no path is resolved twice.
//!
//! Depth first; a directory's descriptor stays open only while entries below it are
//! pending, so at most one descriptor per level is open.

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
    /// Directories below the root this process may not open (EACCES). Skipping them is
    /// sound for every pass here: a sandbox runs as this user (or, under host root, the
    /// walk runs as root and meets none), so it could not have created or opened
    /// anything in them either.
    pub unreadable_dirs: u64,
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
/// be opened or read is an error (a pass that skipped it would be incomplete).
pub fn walk(root: &Path, mut visit: impl FnMut(&Entry)) -> Result<Counts, WalkError> {
    let c = CString::new(root.as_os_str().as_bytes()).map_err(|_| WalkError::Open {
        path: root.to_path_buf(),
        source: io::Error::from_raw_os_error(libc::EINVAL),
    })?;
    let fd = open_dir(libc::AT_FDCWD, &c).map_err(|source| WalkError::Open {
        path: root.to_path_buf(),
        source,
    })?;
    let mut counts = Counts::default();
    let mut stack: Vec<Pending> = Vec::new();
    let mut current = Some((Rc::new(fd), PathBuf::new(), 0usize));
    loop {
        let (dir, rel, depth) = match current.take() {
            Some(d) => d,
            None => match stack.pop() {
                None => return Ok(counts),
                Some(p) => match open_dir(p.parent.as_raw_fd(), &p.name) {
                    Ok(fd) => (Rc::new(fd), p.rel, p.depth),
                    // Gone, or replaced by a non-directory since it was listed.
                    Err(e) if vanished(&e) => continue,
                    Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                        counts.unreadable_dirs += 1;
                        continue;
                    }
                    Err(source) => {
                        return Err(WalkError::Open {
                            path: p.rel,
                            source,
                        });
                    }
                },
            },
        };
        counts.dirs += 1;
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
                libc::S_IFREG => counts.files += 1,
                _ => {}
            }
        }
    }
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
mod tests {
    use super::*;

    #[test]
    fn walks_everything_below_and_never_follows_links() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("a/b/c")).unwrap();
        std::fs::write(r.join("a/b/c/deep"), "x").unwrap();
        std::fs::write(r.join("top"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("a/link")).unwrap();
        let mut seen = Vec::new();
        let counts = walk(r, |e| seen.push((e.rel.to_path_buf(), e.kind()))).unwrap();
        assert_eq!(
            counts,
            Counts {
                dirs: 4,
                files: 2,
                unreadable_dirs: 0
            }
        );
        assert!(seen.contains(&("a/b/c/deep".into(), libc::S_IFREG)));
        assert!(seen.contains(&("a/link".into(), libc::S_IFLNK)));
        assert!(!seen.iter().any(|(p, _)| p.ends_with("secret")));
    }

    #[test]
    fn a_symlinked_root_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("ws")).unwrap();
        assert!(walk(&dir.path().join("ws"), |_| {}).is_err());
    }
}
