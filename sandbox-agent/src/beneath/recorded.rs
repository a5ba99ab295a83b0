//! Acting on host paths named in run state, only beneath the workspace the state records.
//!
//! The run state (`placeholders.json` and friends under `$CORDON_HOME/run/...`) names
//! absolute paths that cleanup later removes. A tampered record (a `CORDON_HOME` that a
//! session could reach, a bug) must not make Cordon delete a host path outside the
//! workspace. So before acting:
//!
//! - the recorded workspace must be absolute, not `/`, and canonical (no link on its way);
//! - each recorded path must lie strictly inside it by plain components (no `..`);
//! - the path's parent is opened beneath the held workspace ([`super::HeldDir`]), so no
//!   link on the way (`.git -> /etc`) is followed, and the entry itself is examined and
//!   removed relative to that fd (`fstatat` without following, `unlinkat`), never by its
//!   path again.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::UnlinkatFlags;

use super::HeldDir;

/// The workspace a run state records, opened for acting beneath it.
#[derive(Debug)]
pub struct RecordedWorkspace {
    held: HeldDir,
}

/// Why a recorded path was not acted on.
#[derive(Debug, thiserror::Error)]
pub enum RecordedError {
    #[error("the recorded workspace {0} is not an absolute, canonical directory other than /")]
    Workspace(std::path::PathBuf),
    #[error("{path} is not inside the recorded workspace {workspace}")]
    Outside {
        path: std::path::PathBuf,
        workspace: std::path::PathBuf,
    },
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// What an entry must still be for [`RecordedWorkspace::remove_if`] to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect<'a> {
    /// A regular file holding exactly these bytes (empty for most placeholders; git's
    /// `commondir` placeholder holds `.`).
    File(&'a [u8]),
    /// A directory (removed only when empty: `unlinkat` refuses a non-empty one).
    Dir,
}

impl Expect<'static> {
    /// An empty regular file: what most placeholders are.
    pub const EMPTY_FILE: Expect<'static> = Expect::File(b"");
}

impl RecordedWorkspace {
    /// Opens `workspace` as recorded, refusing one that is relative, `/`, or not the
    /// canonical path of a directory (a link anywhere on its way).
    pub fn open(workspace: &Path) -> Result<RecordedWorkspace, RecordedError> {
        let refuse = || RecordedError::Workspace(workspace.to_path_buf());
        if !workspace.is_absolute() || workspace == Path::new("/") {
            return Err(refuse());
        }
        if std::fs::canonicalize(workspace).ok().as_deref() != Some(workspace) {
            return Err(refuse());
        }
        let held = HeldDir::open_exact(workspace).map_err(|_| refuse())?;
        Ok(RecordedWorkspace { held })
    }

    /// Removes `path` (absolute, recorded) when it lies inside the workspace, is still the
    /// entry with `id` (device, inode) when one was recorded, and is still what `expect`
    /// says. `Ok(false)`: nothing to do (gone, or no longer the placeholder).
    pub fn remove_if(
        &self,
        path: &Path,
        id: Option<(u64, u64)>,
        expect: Expect<'_>,
    ) -> Result<bool, RecordedError> {
        let rel = self.relative(path)?;
        let io = |e: Errno| RecordedError::Io {
            path: path.to_path_buf(),
            source: e.into(),
        };
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(p), Some(n)) => (p, n),
            _ => return Err(self.outside(path)),
        };
        let parent_fd;
        let dir = if parent.as_os_str().is_empty() {
            self.held.fd()
        } else {
            parent_fd = match self.open_dir_beneath(parent) {
                Ok(fd) => fd,
                Err(Errno::ENOENT) => return Ok(false),
                Err(e) => return Err(io(e)),
            };
            &parent_fd
        };
        let stat = match nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            Err(Errno::ENOENT) => return Ok(false),
            Err(e) => return Err(io(e)),
        };
        if !still_the_placeholder(&stat, id, expect) || !holds(dir, name, &stat, expect) {
            return Ok(false);
        }
        let how = match expect {
            Expect::File(_) => UnlinkatFlags::NoRemoveDir,
            Expect::Dir => UnlinkatFlags::RemoveDir,
        };
        nix::unistd::unlinkat(dir, name, how).map_err(io)?;
        Ok(true)
    }

    fn relative<'a>(&self, path: &'a Path) -> Result<&'a Path, RecordedError> {
        self.held.relative(path).ok_or_else(|| self.outside(path))
    }

    fn outside(&self, path: &Path) -> RecordedError {
        RecordedError::Outside {
            path: path.to_path_buf(),
            workspace: self.held.path().to_path_buf(),
        }
    }

    fn open_dir_beneath(&self, rel: &Path) -> Result<OwnedFd, Errno> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        self.held.open_beneath(rel, flags)
    }
}

/// Whether `stat` is still the entry the launcher made: the recorded identity (when
/// recorded) and the expected kind, a file still empty.
fn still_the_placeholder(stat: &FileStat, id: Option<(u64, u64)>, expect: Expect<'_>) -> bool {
    let same = id.is_none_or(|id| id == (stat.st_dev, stat.st_ino));
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    same && match expect {
        Expect::File(want) => {
            kind == SFlag::S_IFREG && u64::try_from(stat.st_size).ok() == Some(want.len() as u64)
        }
        Expect::Dir => kind == SFlag::S_IFDIR,
    }
}

/// Whether the file `name` in `dir` (already checked to be `stat`) holds exactly the bytes
/// `expect` names. Opened relative to `dir` without following a link and checked to be the
/// same inode, so a swap between the stat and the read is noticed.
fn holds(dir: &OwnedFd, name: &std::ffi::OsStr, stat: &FileStat, expect: Expect<'_>) -> bool {
    let want = match expect {
        Expect::File(want) if !want.is_empty() => want,
        _ => return true,
    };
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let Ok(fd) = nix::fcntl::openat(dir, name, flags, Mode::empty()) else {
        return false;
    };
    let same = nix::sys::stat::fstat(&fd)
        .is_ok_and(|s| (s.st_dev, s.st_ino) == (stat.st_dev, stat.st_ino));
    let mut got = Vec::with_capacity(want.len() + 1);
    let read = std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut got);
    same && read.is_ok() && got == want
}

/// Device and inode of `meta`, as recorded.
pub fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        (dir, root)
    }

    #[test]
    fn removes_an_empty_placeholder_inside() {
        let (_d, root) = ws();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        let id = identity(&std::fs::symlink_metadata(root.join(".git/config")).unwrap());
        let ws = RecordedWorkspace::open(&root).unwrap();
        assert!(
            ws.remove_if(&root.join(".git/config"), Some(id), Expect::EMPTY_FILE)
                .unwrap()
        );
        assert!(ws.remove_if(&root.join(".git"), None, Expect::Dir).unwrap());
        assert!(!root.join(".git").exists());
        assert!(
            !ws.remove_if(&root.join(".git"), None, Expect::Dir).unwrap(),
            "gone"
        );
    }

    #[test]
    fn never_acts_outside_the_workspace() {
        let (_d, root) = ws();
        let (_o, outside) = ws();
        std::fs::write(outside.join("victim"), "").unwrap();
        std::fs::create_dir(outside.join("victim-dir")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let ws = RecordedWorkspace::open(&root).unwrap();
        for (path, expect) in [
            (outside.join("victim"), Expect::EMPTY_FILE),
            (
                root.join("../")
                    .join(outside.file_name().unwrap())
                    .join("victim"),
                Expect::EMPTY_FILE,
            ),
            (root.join("link/victim"), Expect::EMPTY_FILE),
            (root.join("link/victim-dir"), Expect::Dir),
            (root.clone(), Expect::Dir),
        ] {
            assert!(
                ws.remove_if(&path, None, expect).is_err(),
                "{}",
                path.display()
            );
        }
        assert!(outside.join("victim").exists());
        assert!(outside.join("victim-dir").exists());
    }

    #[test]
    fn leaves_what_is_no_longer_the_placeholder() {
        let (_d, root) = ws();
        std::fs::write(root.join(".envrc"), "user data").unwrap();
        std::fs::write(root.join(".bashrc"), "").unwrap();
        std::fs::create_dir(root.join(".claude")).unwrap();
        std::fs::write(root.join(".claude/settings.json"), "{}").unwrap();
        let ws = RecordedWorkspace::open(&root).unwrap();
        assert!(
            !ws.remove_if(&root.join(".envrc"), None, Expect::EMPTY_FILE)
                .unwrap()
        );
        assert!(
            !ws.remove_if(&root.join(".bashrc"), Some((0, 0)), Expect::EMPTY_FILE)
                .unwrap()
        );
        assert!(
            ws.remove_if(&root.join(".claude"), None, Expect::Dir)
                .is_err(),
            "not empty"
        );
        assert!(
            !ws.remove_if(&root.join(".bashrc"), None, Expect::Dir)
                .unwrap()
        );
        assert!(root.join(".envrc").exists() && root.join(".bashrc").exists());
        assert!(root.join(".claude/settings.json").exists());
    }

    #[test]
    fn a_workspace_recorded_as_root_or_through_a_link_is_refused() {
        let (_d, root) = ws();
        std::os::unix::fs::symlink("/", root.join("slash")).unwrap();
        for bad in [
            Path::new("/"),
            Path::new("relative"),
            &root.join("slash"),
            &root.join("x/.."),
        ] {
            assert!(RecordedWorkspace::open(bad).is_err(), "{}", bad.display());
        }
    }
}
