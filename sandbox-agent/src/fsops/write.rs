//! Write: a whole file, atomically. The content goes to a new temp file (random name,
//! `O_EXCL`) in the target's own directory, opened through the directory fd the resolver
//! opened beneath the root; it is fsynced and then renamed over the target. A crash leaves
//! either the old file or the new one, never half of one.
//!
//! A target that is a symlink is followed (beneath a root) and the file it names is
//! replaced; a link leading out of the roots fails with OUTSIDE_SANDBOX before anything is
//! written. The rename replaces a directory entry, never writes into an existing inode.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::UnlinkatFlags;

use super::resolve::openat2;
use super::{Entry, Resolver, check_regular, check_single_link, io_err, mtime_ns, sha256_hex};
use crate::error::{AgentError, ErrorCode};
use crate::limits::MAX_WRITE_BYTES;
use crate::proto::{WriteRequest, WriteResponse};

/// Mode of a file Write creates (before the umask).
const NEW_FILE_MODE: u32 = 0o644;

/// Replaces or creates `req.path` with `req.content`, atomically.
pub fn write(resolver: &Resolver, req: &WriteRequest) -> Result<WriteResponse, AgentError> {
    let path = Path::new(&req.path);
    if req.content.len() > MAX_WRITE_BYTES {
        let msg = format!(
            "content is {} bytes; Write accepts at most {MAX_WRITE_BYTES}",
            req.content.len()
        );
        return Err(AgentError::new(ErrorCode::TooLarge, msg).with_path(req.path.clone()));
    }
    if req.create_parents {
        resolver.create_parents(path)?;
    }
    let entry = resolver
        .entry(path)
        .map_err(|e| missing_parent_hint(e, req))?;
    let existing = existing_target(&entry, path)?;
    // Why `& 0o777`: a rewritten file keeps its permissions but never setuid/setgid bits.
    let mode = existing.as_ref().map(|s| s.st_mode & 0o777);
    let stat = replace_atomically(&entry, path, &req.content, mode)?;
    Ok(WriteResponse {
        created: existing.is_none(),
        bytes_written: req.content.len() as u64,
        mtime_ns: mtime_ns(&stat),
        sha256: sha256_hex(&req.content),
    })
}

fn missing_parent_hint(err: AgentError, req: &WriteRequest) -> AgentError {
    if err.code != ErrorCode::NotFound || req.create_parents {
        return err;
    }
    let msg = format!(
        "{}: the parent directory does not exist (set create_parents to create it)",
        req.path
    );
    AgentError {
        message: msg,
        ..err
    }
}

/// The target's metadata when it exists: a regular file with a single link, or an error.
fn existing_target(entry: &Entry, path: &Path) -> Result<Option<FileStat>, AgentError> {
    let name = entry.name.as_os_str();
    match nix::sys::stat::fstatat(&entry.dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => {
            check_regular(&stat, path)?;
            check_single_link(&stat, path)?;
            Ok(Some(stat))
        }
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(io_err(&e.into(), path)),
    }
}

/// Replaces `entry` with `bytes`: temp file, fsync, rename. `mode` is the existing file's
/// (kept exactly) or `None` for a new file. Returns the new file's metadata. On any
/// failure the temp file is removed and the target is untouched.
pub(crate) fn replace_atomically(
    entry: &Entry,
    path: &Path,
    bytes: &[u8],
    mode: Option<u32>,
) -> Result<FileStat, AgentError> {
    let (fd, tmp) = create_temp(entry, path)?;
    let result = fill_and_rename(entry, fd, &tmp, bytes, mode, path);
    if result.is_err() {
        let _ = nix::unistd::unlinkat(&entry.dir, &tmp, UnlinkatFlags::NoRemoveDir);
    }
    result
}

fn fill_and_rename(
    entry: &Entry,
    fd: OwnedFd,
    tmp: &Path,
    bytes: &[u8],
    mode: Option<u32>,
    path: &Path,
) -> Result<FileStat, AgentError> {
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).map_err(|e| io_err(&e, path))?;
    if let Some(mode) = mode {
        nix::sys::stat::fchmod(&file, Mode::from_bits_truncate(mode))
            .map_err(|e| io_err(&e.into(), path))?;
    }
    file.sync_all().map_err(|e| io_err(&e, path))?;
    let stat = nix::sys::stat::fstat(&file).map_err(|e| io_err(&e.into(), path))?;
    let name = entry.name.as_os_str();
    nix::fcntl::renameat(&entry.dir, tmp, &entry.dir, name).map_err(|e| io_err(&e.into(), path))?;
    sync_dir(entry);
    Ok(stat)
}

/// Creates a new temp file next to the target. `O_EXCL` + `O_NOFOLLOW` mean it is always
/// a fresh file, never something planted under the same name.
fn create_temp(entry: &Entry, path: &Path) -> Result<(OwnedFd, PathBuf), AgentError> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_SYMLINKS;
    let mut last = None;
    for _ in 0..8 {
        let tmp = PathBuf::from(format!(".cordon-write-{:016x}.tmp", random_u64()));
        match openat2(entry.dir.as_fd(), &tmp, flags, NEW_FILE_MODE, resolve) {
            Ok(fd) => return Ok((fd, tmp)),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = Some(e),
            Err(e) => return Err(io_err(&e, path)),
        }
    }
    let err = last.unwrap_or_else(|| std::io::Error::other("no temp name available"));
    Err(io_err(&err, path))
}

/// Makes the rename durable. Best effort: the directory may not be readable.
fn sync_dir(entry: &Entry) {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    if let Ok(dir) = openat2(entry.dir.as_fd(), Path::new("."), flags, 0, resolve) {
        let _ = nix::unistd::fsync(dir);
    }
}

/// A temp-name suffix: std's randomly keyed hasher over a process-wide counter. O_EXCL
/// makes a collision harmless; this only makes one unlikely.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    RandomState::new().hash_one((n, std::process::id()))
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
