//! Acting on a tree someone else can write (a workspace the sandbox wrote), from the host,
//! beneath one held directory and never through a link: the one concept behind every
//! host-side read, removal and rewrite of workspace files.
//!
//! # The concept: [`HeldDir`]
//!
//! A path is resolved afresh at each use, so a directory swapped for a symlink between a
//! check and a use would redirect the use outside the tree. A held descriptor names one
//! directory inode for good. Everything below is opened relative to it with `openat2(2)`
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` (no `..` or absolute
//! component can leave, no link on the way or at the end is followed, `ELOOP`/`EXDEV`
//! instead), names are single plain components, and every change (`unlinkat`, `renameat`,
//! `mkdirat`, `fchownat`) is made relative to a held descriptor, never by path again. If an
//! entry is replaced after it was opened, the change lands in the (moved) original, still
//! inside the tree.
//!
//! # Users, one module each
//!
//! - [`chosen`]: reads of a tree the user chose (a plugin directory), where links are
//!   followed only while they stay beneath it.
//! - [`read`]: the orchestrator's reads of workspace files (CLAUDE.md, settings, hooks
//!   config): text, size-capped, no FIFOs, no links.
//! - [`tree`]: checkpoint rewind and the Docker ACL fallback changing a workspace
//!   (create, replace, remove, walk).
//! - [`recorded`]: cleanup acting on paths named in run state, only beneath the workspace
//!   the state records and only on what is still the placeholder it made.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::UnlinkatFlags;

pub mod chosen;
pub mod read;
pub mod recorded;
pub mod tree;

pub use chosen::TreeReader;
pub use read::{ReadError, WorkspaceReader, read_own_file};
pub use recorded::{Expect, RecordedError, RecordedWorkspace, identity};
pub use tree::{Beneath, Visitor};

/// A directory held open; every name below it resolves beneath it (see the module docs).
#[derive(Debug)]
pub struct HeldDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl HeldDir {
    /// Holds the directory at `path`, the caller's trusted root (a final link is followed:
    /// the caller chose the path).
    pub fn open(path: &Path) -> io::Result<HeldDir> {
        Self::open_with(path, OFlag::empty())
    }

    /// Holds the directory at `path`, refusing a link as its last component.
    pub fn open_exact(path: &Path) -> io::Result<HeldDir> {
        Self::open_with(path, OFlag::O_NOFOLLOW)
    }

    fn open_with(path: &Path, extra: OFlag) -> io::Result<HeldDir> {
        // O_PATH: holding needs no read permission; listing reopens "." (see `dir`).
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | extra;
        let fd = nix::fcntl::open(path, flags, Mode::empty()).map_err(io)?;
        Ok(HeldDir {
            path: path.to_path_buf(),
            fd,
        })
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The held descriptor (an `O_PATH` one: for `*at` calls).
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// `path` relative to the held directory, when it names something strictly inside it
    /// by plain components (no `..`, no `.`).
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        let rel = path.strip_prefix(&self.path).ok()?;
        plain(rel).then_some(rel)
    }

    /// Opens `rel` beneath the held directory with `flags` (`O_CLOEXEC` is the caller's to
    /// add), refusing any link on the way or at the end.
    pub fn open_beneath(&self, rel: &Path, flags: i32) -> Result<OwnedFd, Errno> {
        crate::fsops::openat2(
            self.fd.as_fd(),
            rel,
            flags,
            0,
            crate::fsops::BENEATH_NO_LINKS,
        )
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
    }

    /// Opens the directory `rel` (empty: the held directory itself) readable, refusing a
    /// link at any step.
    pub fn dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        if rel.as_os_str().is_empty() {
            return nix::fcntl::openat(
                &self.fd,
                ".",
                OFlag::from_bits_truncate(flags),
                Mode::empty(),
            )
            .map_err(io);
        }
        if !plain(rel) {
            return Err(invalid(rel));
        }
        self.open_beneath(rel, flags).map_err(io)
    }

    /// The directory holding `rel` (opened beneath) and `rel`'s last name.
    pub fn parent(&self, rel: &Path) -> io::Result<(OwnedFd, OsString)> {
        let parts = names(rel).ok_or_else(|| invalid(rel))?;
        let (last, up) = parts.split_last().ok_or_else(|| invalid(rel))?;
        let dir = self.dir(&up.iter().collect::<PathBuf>())?;
        Ok((dir, last.to_os_string()))
    }
}

/// Relative, non-empty, plain components only.
pub fn plain(rel: &Path) -> bool {
    rel.components().next().is_some() && rel.components().all(|c| matches!(c, Component::Normal(_)))
}

/// The single-component names of `rel`; `None` unless it is a plain relative path.
pub fn names(rel: &Path) -> Option<Vec<&OsStr>> {
    plain(rel).then(|| {
        rel.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect()
    })
}

/// What is at a name in a directory, not following a symlink there.
pub fn stat_at(dir: &OwnedFd, name: &OsStr) -> io::Result<Option<FileStat>> {
    match nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(io(e)),
    }
}

/// Whether a stat result is a directory.
pub fn is_dir(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
}

/// Removes `name` in `dir`: a file or symlink, or a directory when empty.
pub fn remove_at(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    match stat_at(dir, name)? {
        None => Ok(()),
        Some(st) if is_dir(&st) => {
            match nix::unistd::unlinkat(dir, name, UnlinkatFlags::RemoveDir) {
                // A non-empty directory (a nested repository's leftovers) stays.
                Ok(()) | Err(Errno::ENOTEMPTY | Errno::EEXIST) => Ok(()),
                Err(e) => Err(io(e)),
            }
        }
        Some(_) => nix::unistd::unlinkat(dir, name, UnlinkatFlags::NoRemoveDir).map_err(io),
    }
}

fn io(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

fn invalid(rel: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is not a plain relative path", rel.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_accepts_only_paths_strictly_inside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let held = HeldDir::open(&root).unwrap();
        assert_eq!(
            held.relative(&root.join(".claude/settings.json")),
            Some(Path::new(".claude/settings.json"))
        );
        assert_eq!(held.relative(&root), None);
        assert_eq!(held.relative(&root.join("../x")), None);
        assert_eq!(held.relative(Path::new("/etc/passwd")), None);
    }

    #[test]
    fn a_link_as_the_held_directory_is_refused_only_when_exact() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
        assert!(HeldDir::open(&dir.path().join("link")).is_ok());
        assert!(HeldDir::open_exact(&dir.path().join("link")).is_err());
        assert!(HeldDir::open_exact(&dir.path().join("real")).is_ok());
    }

    #[test]
    fn directories_open_beneath_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("a/out")).unwrap();
        let held = HeldDir::open(dir.path()).unwrap();
        assert!(held.dir(Path::new("a/b")).is_ok());
        assert!(held.dir(Path::new("")).is_ok());
        for bad in ["a/out", "a/../..", "/etc", "a/out/x"] {
            assert!(held.dir(Path::new(bad)).is_err(), "{bad}");
        }
    }
}
