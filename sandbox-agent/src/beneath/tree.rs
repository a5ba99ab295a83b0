//! Changing a tree the sandbox can write ([`Beneath`]), from the host: checkpoint rewind
//! and the Docker ACL fallback. Every directory is opened beneath the held root
//! ([`super::HeldDir`]) and every change (`unlinkat`, `renameat`, `mkdirat`, `symlinkat`,
//! `fchownat`) is made relative to a held descriptor, never by path; a directory made
//! here replaces whatever non-directory (a file, a planted symlink) stood in its way.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::{Gid, Uid, UnlinkatFlags};

use super::{HeldDir, is_dir, names, remove_at, stat_at};

/// Flags for opening a directory component: never a symlink, never inherited.
fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
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

/// A directory tree held open at its root.
#[derive(Debug)]
pub struct Beneath {
    held: HeldDir,
}

impl Beneath {
    /// Holds the directory at `path` (the caller's trusted, canonical root; a link there
    /// is refused).
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(Self {
            held: HeldDir::open_exact(path)?,
        })
    }

    pub fn path(&self) -> &Path {
        self.held.path()
    }

    /// The held root (an `O_PATH` descriptor: for `*at` calls).
    pub fn root(&self) -> &OwnedFd {
        self.held.fd()
    }

    /// Opens the directory `rel` below the root (empty: the root), refusing a symlink at
    /// any step.
    pub fn dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        self.held.dir(rel)
    }

    /// The directory holding `rel` and `rel`'s last name.
    pub fn parent(&self, rel: &Path) -> io::Result<(OwnedFd, OsString)> {
        self.held.parent(rel)
    }

    /// Opens the directory `rel`, creating missing components and replacing anything that
    /// is not a directory on the way (a file, or a symlink the sandbox put there) with a
    /// new directory; `owner` gets what is created.
    pub fn make_dirs(&self, rel: &Path, owner: Option<(u32, u32)>) -> io::Result<OwnedFd> {
        let mut at = self.held.dir(Path::new(""))?;
        if rel.as_os_str().is_empty() {
            return Ok(at);
        }
        for name in names(rel).ok_or_else(|| invalid(rel))? {
            match stat_at(&at, name)? {
                Some(st) if is_dir(&st) => {}
                Some(_) => {
                    nix::unistd::unlinkat(&at, name, UnlinkatFlags::NoRemoveDir).map_err(io)?;
                    mkdir_owned(&at, name, owner)?;
                }
                None => mkdir_owned(&at, name, owner)?,
            }
            at = nix::fcntl::openat(&at, name, dir_flags(), Mode::empty()).map_err(io)?;
        }
        Ok(at)
    }

    /// Removes the file or symlink at `rel` (a directory only when empty). Missing is
    /// fine, and so is a parent that is no longer a directory (nothing of ours is below).
    pub fn remove(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = match self.parent(rel) {
            Ok(p) => p,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
                ) =>
            {
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        remove_at(&dir, &name)
    }

    /// Writes `content` at `rel` as a new regular file, mode 0755 when `executable` else
    /// 0644 (set with fchmod, so the umask does not apply), replacing whatever entry is
    /// there, through a temporary name in the same directory and `renameat`.
    pub fn write_file(
        &self,
        rel: &Path,
        content: &[u8],
        executable: bool,
        owner: Option<(u32, u32)>,
    ) -> io::Result<()> {
        let (dir, name) = self.parent_made(rel, owner)?;
        let tmp = temp_name(&name);
        let fd = nix::fcntl::openat(
            &dir,
            tmp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(io)?;
        let mut file = std::fs::File::from(fd);
        let written = (|| {
            file.write_all(content)?;
            let mode = if executable { 0o755 } else { 0o644 };
            nix::sys::stat::fchmod(file.as_fd(), Mode::from_bits_truncate(mode)).map_err(io)?;
            if let Some((u, g)) = owner {
                nix::unistd::fchown(file.as_fd(), Some(Uid::from_raw(u)), Some(Gid::from_raw(g)))
                    .map_err(io)?;
            }
            self.replace(&dir, &tmp, &name)
        })();
        if written.is_err() {
            let _ = nix::unistd::unlinkat(&dir, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        written
    }

    /// Makes `rel` a symlink to `target` (the target is stored, never followed).
    pub fn write_symlink(
        &self,
        rel: &Path,
        target: &OsStr,
        owner: Option<(u32, u32)>,
    ) -> io::Result<()> {
        let (dir, name) = self.parent_made(rel, owner)?;
        let tmp = temp_name(&name);
        nix::unistd::symlinkat(target, &dir, tmp.as_os_str()).map_err(io)?;
        let done = (|| {
            if let Some((u, g)) = owner {
                nix::unistd::fchownat(
                    &dir,
                    tmp.as_os_str(),
                    Some(Uid::from_raw(u)),
                    Some(Gid::from_raw(g)),
                    AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .map_err(io)?;
            }
            self.replace(&dir, &tmp, &name)
        })();
        if done.is_err() {
            let _ = nix::unistd::unlinkat(&dir, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        done
    }

    fn parent_made(
        &self,
        rel: &Path,
        owner: Option<(u32, u32)>,
    ) -> io::Result<(OwnedFd, OsString)> {
        let parts = names(rel).ok_or_else(|| invalid(rel))?;
        let (last, up) = parts.split_last().ok_or_else(|| invalid(rel))?;
        let dir = self.make_dirs(&up.iter().collect::<PathBuf>(), owner)?;
        Ok((dir, last.to_os_string()))
    }

    /// Renames `tmp` over `name` in `dir`; a directory in the way is removed first when
    /// empty (renameat cannot replace a directory with a file).
    fn replace(&self, dir: &OwnedFd, tmp: &OsStr, name: &OsStr) -> io::Result<()> {
        if let Some(st) = stat_at(dir, name)?
            && is_dir(&st)
        {
            nix::unistd::unlinkat(dir, name, UnlinkatFlags::RemoveDir).map_err(io)?;
        }
        nix::fcntl::renameat(dir, tmp, dir, name).map_err(io)
    }

    /// Visits every entry below the root (not the root), parents before children, never
    /// entering a symlink or another filesystem. `visit` gets the relative path, the held
    /// directory the entry is in, its name there, and its stat.
    pub fn walk(&self, visit: &mut Visitor<'_>) -> io::Result<()> {
        let root = self.held.dir(Path::new(""))?;
        let root_dev = nix::sys::stat::fstat(&root).map_err(io)?.st_dev;
        walk_dir(root, Path::new(""), root_dev, visit)
    }
}

/// What [`Beneath::walk`] calls for each entry: (relative path, directory, name, stat).
pub type Visitor<'a> = dyn FnMut(&Path, &OwnedFd, &OsStr, &FileStat) + 'a;

fn walk_dir(dir: OwnedFd, rel: &Path, dev: u64, visit: &mut Visitor<'_>) -> io::Result<()> {
    let keep = dir.try_clone()?;
    let mut listing = nix::dir::Dir::from_fd(dir).map_err(io)?;
    let mut names: Vec<OsString> = Vec::new();
    for entry in listing.iter() {
        let entry = entry.map_err(io)?;
        let name: &OsStr = std::os::unix::ffi::OsStrExt::from_bytes(entry.file_name().to_bytes());
        if name != "." && name != ".." {
            names.push(name.to_os_string());
        }
    }
    for name in names {
        let Some(st) = stat_at(&keep, &name)? else {
            continue;
        };
        let child = rel.join(&name);
        visit(&child, &keep, &name, &st);
        if is_dir(&st) && st.st_dev == dev {
            match nix::fcntl::openat(&keep, name.as_os_str(), dir_flags(), Mode::empty()) {
                Ok(fd) => walk_dir(fd, &child, dev, visit)?,
                // Replaced or removed since the listing: not ours to follow.
                Err(Errno::ENOENT | Errno::ELOOP | Errno::ENOTDIR) => {}
                Err(e) => return Err(io(e)),
            }
        }
    }
    Ok(())
}

fn mkdir_owned(dir: &OwnedFd, name: &OsStr, owner: Option<(u32, u32)>) -> io::Result<()> {
    nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(0o755)).map_err(io)?;
    if let Some((u, g)) = owner {
        nix::unistd::fchownat(
            dir,
            name,
            Some(Uid::from_raw(u)),
            Some(Gid::from_raw(g)),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(io)?;
    }
    Ok(())
}

fn temp_name(name: &OsStr) -> OsString {
    let mut tmp = OsString::from(".cordon-rewind-");
    tmp.push(uuid::Uuid::new_v4().simple().to_string());
    tmp.push("-");
    // Keep it short: a long name plus the prefix could pass NAME_MAX.
    let short: String = name.to_string_lossy().chars().take(32).collect();
    tmp.push(short.replace('/', "_"));
    tmp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, tempfile::TempDir) {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("a/b")).unwrap();
        std::fs::write(ws.path().join("a/b/f"), "in").unwrap();
        std::fs::write(outside.path().join("f"), "outside").unwrap();
        (ws, outside)
    }

    #[test]
    fn a_symlink_on_the_way_is_refused_never_followed() {
        let (ws, outside) = tree();
        std::fs::remove_dir_all(ws.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("a/b")).unwrap();
        let b = Beneath::open(ws.path()).unwrap();
        b.remove(Path::new("a/b/f")).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("f")).unwrap(),
            "outside"
        );
        assert!(b.dir(Path::new("a/b")).is_err());
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_after_it_was_opened_changes_nothing_outside() {
        let (ws, outside) = tree();
        let b = Beneath::open(ws.path()).unwrap();
        // The rewind holds `a/b`, then the sandbox swaps it for a link to outside.
        let (dir, name) = b.parent(Path::new("a/b/f")).unwrap();
        std::fs::rename(ws.path().join("a/b"), ws.path().join("a/moved")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("a/b")).unwrap();
        remove_at(&dir, &name).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("f")).unwrap(),
            "outside"
        );
        assert!(
            !ws.path().join("a/moved/f").exists(),
            "the held directory's file went"
        );
    }

    #[test]
    fn writes_replace_links_in_the_way_instead_of_writing_through_them() {
        let (ws, outside) = tree();
        std::fs::remove_dir_all(ws.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("a/b")).unwrap();
        let b = Beneath::open(ws.path()).unwrap();
        b.write_file(Path::new("a/b/f"), b"restored", true, None)
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("f")).unwrap(),
            "outside"
        );
        let meta = std::fs::symlink_metadata(ws.path().join("a/b")).unwrap();
        assert!(meta.is_dir(), "the link was replaced by a directory");
        assert_eq!(
            std::fs::read_to_string(ws.path().join("a/b/f")).unwrap(),
            "restored"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(ws.path().join("a/b/f"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        std::os::unix::fs::symlink(outside.path().join("f"), ws.path().join("l")).unwrap();
        b.write_file(Path::new("l"), b"x", false, None).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("f")).unwrap(),
            "outside"
        );
        b.write_symlink(Path::new("s"), OsStr::new("a/b/f"), None)
            .unwrap();
        assert_eq!(
            std::fs::read_link(ws.path().join("s")).unwrap(),
            Path::new("a/b/f")
        );
    }

    #[test]
    fn walk_lists_everything_below_without_entering_links() {
        let (ws, outside) = tree();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
        let b = Beneath::open(ws.path()).unwrap();
        let mut seen = Vec::new();
        b.walk(&mut |rel, _, _, _| seen.push(rel.to_path_buf()))
            .unwrap();
        seen.sort();
        let want: Vec<PathBuf> = ["a", "a/b", "a/b/f", "link"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn paths_that_climb_or_are_absolute_are_refused() {
        let (ws, _outside) = tree();
        let b = Beneath::open(ws.path()).unwrap();
        for bad in ["../x", "/etc/passwd", "a/../../x"] {
            assert!(b.parent(Path::new(bad)).is_err(), "{bad}");
        }
    }
}
