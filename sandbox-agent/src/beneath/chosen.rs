//! Reading a tree the user chose by its path (a plugin directory given on the command
//! line) with [`TreeReader`]: everything is opened beneath the held root with
//! `openat2(2)` `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`. A link inside the tree is
//! followed while it stays inside (the tree's author may link one file to another); an
//! absolute link, a `..` that climbs out, or a `/proc` magic link fails (`EXDEV`,
//! `ELOOP`) and is refused. Paths given are plain relative components, and the FIFO,
//! regular-file and size guards of [`super::read`] hold.

use std::ffi::OsString;
use std::fs::File;
use std::path::Path;

use nix::errno::Errno;

use super::read::{ReadError, read_open_bytes};
use super::{HeldDir, plain};

/// `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: links resolve, never out of the root.
const BENEATH: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;

/// A chosen tree opened once: every read resolves beneath its directory fd.
#[derive(Debug)]
pub struct TreeReader {
    held: HeldDir,
}

impl TreeReader {
    /// Opens `root` (the user's path; a final link is followed, the user named it).
    pub fn open(root: &Path) -> Result<TreeReader, ReadError> {
        let held = HeldDir::open(root).map_err(|source| ReadError::OpenRoot {
            path: root.to_path_buf(),
            source,
        })?;
        Ok(TreeReader { held })
    }

    pub fn root(&self) -> &Path {
        self.held.path()
    }

    /// The text of the file at `rel`, at most `max` bytes; `Ok(None)` when there is none.
    pub fn read_text(&self, rel: &Path, max: u64) -> Result<Option<String>, ReadError> {
        let shown = self.root().join(rel);
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        let fd = match self.open_at(rel, flags) {
            Ok(fd) => fd,
            Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(None),
            Err(e) => return Err(self.error(rel, e)),
        };
        let bytes = read_open_bytes(File::from(fd), &shown, max)?;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ReadError::NotText { path: shown })
    }

    /// The names in the directory `rel` (empty: the root), sorted; none when it is not
    /// there or not a directory.
    pub fn list(&self, rel: &Path) -> Result<Vec<OsString>, ReadError> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let fd = if rel.as_os_str().is_empty() {
            self.held.dir(rel).map_err(|source| ReadError::Read {
                path: self.root().to_path_buf(),
                source,
            })?
        } else {
            match self.open_at(rel, flags) {
                Ok(fd) => fd,
                Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(Vec::new()),
                Err(e) => return Err(self.error(rel, e)),
            }
        };
        let mut dir = nix::dir::Dir::from_fd(fd).map_err(|e| self.error(rel, e))?;
        let mut names: Vec<OsString> = dir
            .iter()
            .filter_map(Result::ok)
            .map(|e| {
                let bytes = e.file_name().to_bytes();
                <OsString as std::os::unix::ffi::OsStringExt>::from_vec(bytes.to_vec())
            })
            .filter(|n| n != "." && n != "..")
            .collect();
        names.sort();
        Ok(names)
    }

    fn open_at(&self, rel: &Path, flags: i32) -> Result<std::os::fd::OwnedFd, Errno> {
        if !plain(rel) {
            return Err(Errno::EXDEV);
        }
        crate::fsops::openat2(
            std::os::fd::AsFd::as_fd(self.held.fd()),
            rel,
            flags,
            0,
            BENEATH,
        )
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
    }

    fn error(&self, rel: &Path, e: Errno) -> ReadError {
        let path = self.root().join(rel);
        match e {
            // EXDEV: resolution tried to leave the tree; ELOOP: a magic link or a loop.
            Errno::EXDEV | Errno::ELOOP => ReadError::NotBeneath { path },
            e => ReadError::Read {
                path,
                source: e.into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn links_are_followed_inside_the_tree_and_never_out_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("plugin");
        let outside = dir.path().join("secret.txt");
        std::fs::create_dir_all(root.join("commands/sub")).unwrap();
        std::fs::write(&outside, "secret").unwrap();
        std::fs::write(root.join("commands/a.md"), "A").unwrap();
        symlink("a.md", root.join("commands/b.md")).unwrap();
        symlink(&outside, root.join("commands/abs.md")).unwrap();
        symlink("../../secret.txt", root.join("commands/up.md")).unwrap();
        let tree = TreeReader::open(&root).unwrap();
        let read = |rel: &str| tree.read_text(Path::new(rel), 1024);
        assert_eq!(read("commands/a.md").unwrap().as_deref(), Some("A"));
        assert_eq!(read("commands/b.md").unwrap().as_deref(), Some("A"));
        assert!(matches!(
            read("commands/abs.md"),
            Err(ReadError::NotBeneath { .. })
        ));
        assert!(matches!(
            read("commands/up.md"),
            Err(ReadError::NotBeneath { .. })
        ));
        assert!(matches!(
            read("../secret.txt"),
            Err(ReadError::NotBeneath { .. })
        ));
        assert_eq!(read("commands/none.md").unwrap(), None);
        let names = tree.list(Path::new("commands")).unwrap();
        assert_eq!(names, ["a.md", "abs.md", "b.md", "sub", "up.md"]);
        assert!(tree.list(Path::new("missing")).unwrap().is_empty());
        assert!(tree.list(Path::new("commands/a.md")).unwrap().is_empty());
        assert!(
            read("commands/sub").is_err(),
            "a directory is not read as a file"
        );
    }
}
