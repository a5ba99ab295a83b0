//! File operations beneath the allowed roots, never following a link out.
//!
//! - `resolve`: [`Resolver`], the only way a request path becomes an open file:
//!   `openat2(2)` beneath an allowed root's directory fd.
//! - `read`: numbered lines, paging, binary detection.
//! - `write`: whole-file atomic writes (temp file, fsync, rename).
//! - `edit`: exact, unique string replacement, written atomically.
//!
//! Shared rules: a regular file is expected wherever a file is opened. FIFOs, sockets and
//! devices are refused after an `O_NONBLOCK` open and `fstat`, so a FIFO with no writer
//! never hangs the agent. Files with more than one hard link are never written: the other
//! link may sit outside the sandbox.

mod edit;
pub mod read;
pub(crate) mod resolve;
mod write;

use std::fs::File;
use std::path::Path;

use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, SFlag};
use sha2::{Digest, Sha256};

use crate::error::{AgentError, ErrorCode};

pub use edit::edit;
pub use read::read;
pub use resolve::{BENEATH_NO_LINKS, Resolver, openat2};
pub use write::write;

pub(crate) use resolve::{Entry, io_err};

/// Opens an existing regular file for reading without following a link and without
/// blocking. The type is checked before the open (so a device node is never opened) and
/// again on the open fd (so a swap in between changes nothing).
pub(crate) fn open_regular(entry: &Entry, path: &Path) -> Result<(File, FileStat), AgentError> {
    let before = nix::sys::stat::fstatat(
        &entry.dir,
        entry.name.as_os_str(),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(|e| io_err(&e.into(), path))?;
    check_regular(&before, path)?;
    let flags =
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_SYMLINKS;
    let fd = resolve::openat2(
        std::os::fd::AsFd::as_fd(&entry.dir),
        Path::new(&entry.name),
        flags,
        0,
        resolve,
    )
    .map_err(|e| io_err(&e, path))?;
    let stat = nix::sys::stat::fstat(&fd).map_err(|e| io_err(&e.into(), path))?;
    check_regular(&stat, path)?;
    Ok((File::from(fd), stat))
}

/// Refuses anything but a regular file, naming what it is.
pub(crate) fn check_regular(stat: &FileStat, path: &Path) -> Result<(), AgentError> {
    let kind = SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits());
    let shown = path.display().to_string();
    let what = match kind {
        SFlag::S_IFREG => return Ok(()),
        SFlag::S_IFDIR => {
            let msg = format!("{shown} is a directory, not a file (use Glob to list it)");
            return Err(AgentError::new(ErrorCode::IsADirectory, msg).with_path(shown));
        }
        SFlag::S_IFIFO => "a FIFO",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFLNK => "a symbolic link that changed while it was opened",
        _ => "not a regular file",
    };
    let msg = format!("{shown} is {what}; only regular files can be read or written");
    Err(AgentError::new(ErrorCode::NotARegularFile, msg).with_path(shown))
}

/// Refuses to modify a file with more than one hard link. Why: a hard link made inside a
/// root to a file outside it is the same inode; writing it would write outside.
pub(crate) fn check_single_link(stat: &FileStat, path: &Path) -> Result<(), AgentError> {
    if stat.st_nlink <= 1 {
        return Ok(());
    }
    let shown = path.display().to_string();
    let msg = format!(
        "{shown} has {} hard links; refusing to modify it because another link may be \
         outside the sandbox (copy it to a new file instead)",
        stat.st_nlink
    );
    Err(AgentError::new(ErrorCode::PermissionDenied, msg).with_path(shown))
}

/// Modification time in nanoseconds since the epoch.
pub(crate) fn mtime_ns(stat: &FileStat) -> i64 {
    stat.st_mtime
        .saturating_mul(1_000_000_000)
        .saturating_add(stat.st_mtime_nsec)
}

/// Hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One numbered line, `cat -n` style.
pub(crate) fn numbered(out: &mut String, number: u64, line: &str) {
    // By hand rather than `writeln!("{number:>6}\t{line}")`: the formatting machinery
    // cost more than everything else a Read of a small file does.
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = number;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = digits.len() - at;
    out.reserve(len.max(6) + line.len() + 2);
    for _ in len..6 {
        out.push(' ');
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
    out.push('\t');
    out.push_str(line);
    out.push('\n');
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::path::{Path, PathBuf};

    use super::Resolver;

    /// A temp dir holding `root/` (the only allowed root) and `outside/`.
    pub struct Fixture {
        pub _tmp: tempfile::TempDir,
        pub root: PathBuf,
        pub outside: PathBuf,
        pub resolver: Resolver,
    }

    pub fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&outside).unwrap();
        let resolver = Resolver::new(std::slice::from_ref(&root)).unwrap();
        Fixture {
            _tmp: tmp,
            root,
            outside,
            resolver,
        }
    }

    pub fn s(p: &Path) -> String {
        p.display().to_string()
    }

    /// Names in `dir`, sorted.
    pub fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}
