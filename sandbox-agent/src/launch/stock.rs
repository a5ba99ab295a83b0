//! A stock of empty placeholders kept in Cordon's data directory and moved in and out of
//! workspaces by rename, instead of made and deleted for every session.
//!
//! # Why
//!
//! A session start makes a placeholder for each protected path that does not exist (a
//! score of them in a plain workspace: shell rc files, `.vscode`, `.envrc`...), and its
//! teardown removes them. On a journalling filesystem each make and each removal is an
//! inode allocated or freed: about 50 µs apiece on this project's machines, 1 to 3 ms a
//! session, the largest single part of `cordon sandbox -- true` (BENCHMARKS.md, eleventh
//! session). A rename is a directory entry moved: a tenth of that.
//!
//! # How
//!
//! Items are empty files (`f-UID-GID-N`) and empty directories (`d-UID-GID-N`) in the
//! stock directory (mode 0700, in `$CORDON_HOME`), owned by the `UID:GID` their name says
//! and made private (0600, 0700), as everything in `$CORDON_HOME` is. [`Stock::take`]
//! renames one to a placeholder's path with `RENAME_NOREPLACE` (an entry that appeared
//! there meanwhile is never replaced); [`Stock::put`] renames a placeholder the teardown
//! has verified back in. Only a stock on the workspace's filesystem is used (rename does
//! not cross filesystems); elsewhere placeholders are made and removed as before.
//!
//! # What is never lost
//!
//! A placeholder is put back only once the teardown found it still the entry it made
//! (same inode, still empty). A user's editor may still write into it on the host in the
//! moment between that check and the rename: so what arrives in the stock is checked again
//! there, and anything not empty goes back to its place (or, if that name is taken by
//! now, stays where the user can find it: a warning names it). Items are checked when
//! taken out too.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::EntryKind;

/// Items kept at most; a teardown past it removes placeholders as before.
const CAP: usize = 96;

/// The stock directory, opened.
#[derive(Debug)]
pub struct Stock {
    dir: OwnedFd,
    path: PathBuf,
    dev: u64,
    /// Item names as last listed, taken from as they are used.
    names: Mutex<Vec<OsString>>,
}

impl Stock {
    /// Opens the stock at `path`, making it (0700) if missing. `None` when it cannot be
    /// used: not a directory of this process's user, private, and reached without a link.
    pub fn open(path: &Path) -> Option<Stock> {
        let _ = std::fs::DirBuilder::new().mode(0o700).create(path);
        let meta = std::fs::symlink_metadata(path).ok()?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
            return None;
        }
        let dir = nix::fcntl::open(
            path,
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        let names = std::fs::read_dir(path)
            .ok()?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        Some(Stock {
            dir,
            path: path.to_path_buf(),
            dev: meta.dev(),
            names: Mutex::new(names),
        })
    }

    /// Whether `dir` lies on the stock's filesystem (a rename between them can work).
    pub fn serves(&self, dir: &Path) -> bool {
        std::fs::metadata(dir).is_ok_and(|m| m.dev() == self.dev)
    }

    /// Moves an empty `kind` item owned by `owner` to `dst` (which must not exist: an
    /// entry there is never replaced). True when `dst` is now such an item.
    pub fn take(&self, kind: EntryKind, dst: &Path, owner: (u32, u32)) -> bool {
        let prefix = prefix(kind, owner);
        let Ok(dst_c) = CString::new(dst.as_os_str().as_bytes()) else {
            return false;
        };
        loop {
            let name = {
                let Ok(mut names) = self.names.lock() else {
                    return false;
                };
                let Some(i) = names.iter().position(|n| n.as_bytes().starts_with(&prefix)) else {
                    return false;
                };
                names.swap_remove(i)
            };
            let Ok(src) = CString::new(name.as_bytes()) else {
                continue;
            };
            match rename_noreplace(self.dir.as_raw_fd(), &src, libc::AT_FDCWD, &dst_c) {
                Ok(()) => {
                    if is_empty_item(libc::AT_FDCWD, &dst_c, kind, owner) {
                        return true;
                    }
                    // Not what its name says (this stock is ours alone: should not be):
                    // back where it was, and made afresh instead.
                    let _ = rename_noreplace(libc::AT_FDCWD, &dst_c, self.dir.as_raw_fd(), &src);
                    return false;
                }
                // Taken by another session meanwhile: the next one.
                Err(libc::ENOENT) => continue,
                // Still in the stock (the place is taken, say): still to be had.
                Err(_) => {
                    if let Ok(mut names) = self.names.lock() {
                        names.push(name);
                    }
                    return false;
                }
            }
        }
    }

    /// Moves the placeholder `name` in `dir` (verified by the caller as the empty entry
    /// it made, owned by `owner`) into the stock. False when it was not moved (the stock
    /// is full or elsewhere): the caller removes it as before. An item that turns out not
    /// to be empty once moved goes back to its place.
    pub fn put(&self, dir: &OwnedFd, name: &OsStr, kind: EntryKind, owner: (u32, u32)) -> bool {
        let Ok(count) = self.names.lock().map(|n| n.len()) else {
            return false;
        };
        if count >= CAP {
            return false;
        }
        let (Ok(src), Ok(item)) = (
            CString::new(name.as_bytes()),
            CString::new(unique_name(kind, owner).as_bytes()),
        ) else {
            return false;
        };
        if rename_noreplace(dir.as_raw_fd(), &src, self.dir.as_raw_fd(), &item).is_err() {
            return false;
        }
        if is_empty_item(self.dir.as_raw_fd(), &item, kind, owner) {
            if let Ok(mut names) = self.names.lock() {
                names.push(OsString::from(OsStr::from_bytes(item.as_bytes())));
            }
            return true;
        }
        // Written to on the host between the caller's check and the move: it is the
        // user's, back it goes.
        if rename_noreplace(self.dir.as_raw_fd(), &item, dir.as_raw_fd(), &src).is_err() {
            tracing::warn!(
                kept = %self.path.join(OsStr::from_bytes(item.as_bytes())).display(),
                "a placeholder written to during teardown could not go back to its place"
            );
        }
        true
    }
}

fn prefix(kind: EntryKind, owner: (u32, u32)) -> Vec<u8> {
    let k = match kind {
        EntryKind::File => 'f',
        EntryKind::Dir => 'd',
    };
    format!("{k}-{}-{}-", owner.0, owner.1).into_bytes()
}

/// A name no other item has: this process, a counter, the time.
fn unique_name(kind: EntryKind, owner: (u32, u32)) -> OsString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut name = prefix(kind, owner);
    name.extend(format!("{}-{n}-{nanos}", std::process::id()).bytes());
    OsString::from(OsStr::from_bytes(&name))
}

/// renameat2 with RENAME_NOREPLACE; the errno on failure.
fn rename_noreplace(
    from_dir: RawFd,
    from: &CString,
    to_dir: RawFd,
    to: &CString,
) -> Result<(), i32> {
    // SAFETY: two NUL-terminated paths and descriptors (or AT_FDCWD) valid for the call.
    let rc = unsafe {
        libc::renameat2(
            from_dir,
            from.as_ptr(),
            to_dir,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}

/// Whether `name` (relative to `dir`, not followed if a link) is an empty `kind` entry
/// owned by `owner`: a regular file of no bytes, or a directory with no entry.
fn is_empty_item(dir: RawFd, name: &CString, kind: EntryKind, owner: (u32, u32)) -> bool {
    let Ok(st) = nix::sys::stat::fstatat(
        // SAFETY: `dir` is AT_FDCWD or a descriptor the caller holds for the call.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(dir) },
        name.as_c_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    ) else {
        return false;
    };
    if (st.st_uid, st.st_gid) != owner {
        return false;
    }
    let fmt = st.st_mode & libc::S_IFMT;
    match kind {
        EntryKind::File => fmt == libc::S_IFREG && st.st_size == 0,
        EntryKind::Dir => fmt == libc::S_IFDIR && dir_is_empty(dir, name, (st.st_dev, st.st_ino)),
    }
}

/// Whether the directory `name` (the inode `id`) has no entry but `.` and `..`.
fn dir_is_empty(dir: RawFd, name: &CString, id: (u64, u64)) -> bool {
    // SAFETY: as in is_empty_item.
    let at = unsafe { std::os::fd::BorrowedFd::borrow_raw(dir) };
    let flags = nix::fcntl::OFlag::O_RDONLY
        | nix::fcntl::OFlag::O_DIRECTORY
        | nix::fcntl::OFlag::O_NOFOLLOW
        | nix::fcntl::OFlag::O_CLOEXEC;
    let Ok(fd) = nix::fcntl::openat(at, name.as_c_str(), flags, nix::sys::stat::Mode::empty())
    else {
        return false;
    };
    if nix::sys::stat::fstat(&fd).map(|s| (s.st_dev, s.st_ino)) != Ok(id) {
        return false;
    }
    let Ok(mut listing) = nix::dir::Dir::from_fd(fd) else {
        return false;
    };
    listing
        .iter()
        .flatten()
        .all(|e| matches!(e.file_name().to_bytes(), b"." | b".."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> (u32, u32) {
        (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    }

    fn private_stock(root: &Path) -> Stock {
        Stock::open(&root.join("stock")).unwrap()
    }

    fn dir_fd(p: &Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(p).unwrap())
    }

    #[test]
    fn an_item_put_back_is_taken_again_and_never_replaces_an_entry() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let stock = private_stock(root.path());
        assert!(
            !stock.take(EntryKind::File, &ws.join(".bashrc"), me()),
            "empty at first"
        );
        std::fs::write(ws.join(".bashrc"), "").unwrap();
        std::fs::create_dir(ws.join(".vscode")).unwrap();
        let held = dir_fd(&ws);
        assert!(stock.put(&held, OsStr::new(".bashrc"), EntryKind::File, me()));
        assert!(stock.put(&held, OsStr::new(".vscode"), EntryKind::Dir, me()));
        assert!(!ws.join(".bashrc").exists() && !ws.join(".vscode").exists());
        // The user made .envrc meanwhile: a take never replaces it.
        std::fs::write(ws.join(".envrc"), "mine").unwrap();
        assert!(!stock.take(EntryKind::File, &ws.join(".envrc"), me()));
        assert_eq!(std::fs::read_to_string(ws.join(".envrc")).unwrap(), "mine");
        assert!(stock.take(EntryKind::File, &ws.join(".profile"), me()));
        assert!(stock.take(EntryKind::Dir, &ws.join(".idea"), me()));
        assert!(ws.join(".idea").is_dir());
        assert_eq!(std::fs::metadata(ws.join(".profile")).unwrap().len(), 0);
    }

    #[test]
    fn what_was_written_to_goes_back_to_its_place() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::write(ws.join(".vscode/settings.json"), "{}").unwrap();
        std::fs::write(ws.join(".bashrc"), "alias x=y").unwrap();
        let stock = private_stock(root.path());
        let held = dir_fd(&ws);
        stock.put(&held, OsStr::new(".vscode"), EntryKind::Dir, me());
        stock.put(&held, OsStr::new(".bashrc"), EntryKind::File, me());
        assert_eq!(
            std::fs::read_to_string(ws.join(".vscode/settings.json")).unwrap(),
            "{}"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join(".bashrc")).unwrap(),
            "alias x=y"
        );
        assert!(!stock.take(EntryKind::File, &ws.join(".profile"), me()));
        assert!(!stock.take(EntryKind::Dir, &ws.join(".idea"), me()));
    }

    #[test]
    fn a_stock_others_may_read_or_a_link_is_not_used() {
        let root = tempfile::tempdir().unwrap();
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(
            &open,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
        )
        .unwrap();
        assert!(Stock::open(&open).is_none());
        let private = root.path().join("private");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .unwrap();
        std::os::unix::fs::symlink(&private, root.path().join("link")).unwrap();
        assert!(Stock::open(&root.path().join("link")).is_none());
        assert!(Stock::open(&private).is_some());
    }
}
