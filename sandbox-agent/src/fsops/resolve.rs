//! [`Resolver`]: maps an absolute request path to a file beneath one of the allowed roots.
//!
//! Each root is opened once, as an `O_PATH` directory fd, when the agent starts. A request
//! path picks the root that is its lexical prefix, and the rest of the path is opened
//! relative to that fd with `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: the
//! kernel refuses any `..`, absolute symlink or /proc magic link that would leave the root,
//! at every component, with no window between a check and a use. Symlinks that stay inside
//! the root are followed. Nothing here reads /proc: the agent may run under Landlock.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;

use crate::error::{AgentError, ErrorCode};
use crate::limits::MAX_PATH_BYTES;

/// Symlinks followed, one after another, on the last component of a path.
const MAX_LINK_HOPS: usize = 16;

/// The resolution rules of every open beneath a root. `RESOLVE_BENEATH` also refuses
/// absolute symlinks, which is why [`Resolver::entry`] follows the last component by hand.
const BENEATH: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;

/// Resolves request paths beneath the writable roots, never following a link out.
#[derive(Debug)]
pub struct Resolver {
    roots: Vec<PathBuf>,
    fds: Vec<OwnedFd>,
}

/// A path's last component and the directory holding it, opened beneath a root. Any
/// symlink in the last component has already been followed (beneath a root).
#[derive(Debug)]
pub(crate) struct Entry {
    pub dir: OwnedFd,
    pub name: OsString,
}

impl Resolver {
    /// Opens every root (absolute paths; symlinks in a root's own path are the operator's
    /// choice and are followed). Fails when a root is relative or cannot be opened.
    pub fn new(roots: &[PathBuf]) -> Result<Self, AgentError> {
        let mut fds = Vec::with_capacity(roots.len());
        for root in roots {
            if !root.is_absolute() {
                let msg = format!("allowed root '{}' is not absolute", root.display());
                return Err(AgentError::invalid(msg));
            }
            let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
            let fd = openat2(cwd_fd(), root, flags, 0, 0)
                .map_err(|e| AgentError::from_io(&e, &root.display().to_string()))?;
            fds.push(fd);
        }
        Ok(Self {
            roots: roots.to_vec(),
            fds,
        })
    }

    /// The roots as configured.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Checks a request path and picks its root: the fd of the longest root that is a
    /// lexical prefix, and the rest of the path ("." for the root itself).
    pub(crate) fn locate(&self, path: &Path) -> Result<(BorrowedFd<'_>, PathBuf), AgentError> {
        validate(path)?;
        let best = (self.roots.iter().zip(&self.fds))
            .filter(|(root, _)| path.starts_with(root))
            .max_by_key(|(root, _)| root.as_os_str().len());
        let Some((root, fd)) = best else {
            return Err(outside(path, &self.roots));
        };
        let rest = path.strip_prefix(root).unwrap_or(Path::new(""));
        let rest = if rest.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            rest.to_path_buf()
        };
        Ok((fd.as_fd(), rest))
    }

    /// Opens `path` beneath its root with `flags` (`O_CLOEXEC` is always added).
    pub(crate) fn open(&self, path: &Path, flags: i32) -> Result<OwnedFd, AgentError> {
        let (root, rest) = self.locate(path)?;
        openat2(root, &rest, flags | libc::O_CLOEXEC, 0, BENEATH).map_err(|e| io_err(&e, path))
    }

    /// Opens the directory holding `path`'s last component, following a symlink in that
    /// last component by hand (each hop resolved beneath a root again), so that an
    /// absolute link to a file inside a root works and one pointing anywhere else fails.
    pub(crate) fn entry(&self, path: &Path) -> Result<Entry, AgentError> {
        let mut current = path.to_path_buf();
        for _ in 0..MAX_LINK_HOPS {
            let (root, rest) = self.locate(&current)?;
            let name = last_name(&rest, path)?;
            let parent = rest.parent().filter(|p| !p.as_os_str().is_empty());
            let parent = parent.unwrap_or(Path::new("."));
            let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
            let dir = openat2(root, parent, flags, 0, BENEATH).map_err(|e| io_err(&e, path))?;
            match nix::fcntl::readlinkat(&dir, name.as_os_str()) {
                Ok(target) => current = follow(&current, Path::new(&target)),
                Err(Errno::EINVAL | Errno::ENOENT) => return Ok(Entry { dir, name }),
                Err(e) => return Err(io_err(&io::Error::from(e), path)),
            }
        }
        let msg = format!("{}: too many levels of symbolic links", path.display());
        Err(AgentError::new(ErrorCode::OutsideSandbox, msg).with_path(path.display().to_string()))
    }

    /// Creates the missing directories above `path`, each one with `mkdirat` relative to
    /// its parent opened beneath the root.
    pub(crate) fn create_parents(&self, path: &Path) -> Result<(), AgentError> {
        let (root, rest) = self.locate(path)?;
        let Some(parent) = rest.parent() else {
            return Ok(());
        };
        let dir_flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let mut prefix = PathBuf::new();
        for component in parent.components() {
            let up = if prefix.as_os_str().is_empty() {
                Path::new(".")
            } else {
                &prefix
            };
            let up = openat2(root, up, dir_flags, 0, BENEATH).map_err(|e| io_err(&e, path))?;
            prefix.push(component);
            let Component::Normal(name) = component else {
                continue;
            };
            match nix::sys::stat::mkdirat(
                &up,
                name,
                nix::sys::stat::Mode::from_bits_truncate(0o755),
            ) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(io_err(&io::Error::from(e), path)),
            }
        }
        Ok(())
    }
}

/// Where a symlink at `from` whose content is `target` leads, lexically: an absolute
/// target is taken as is, a relative one from the link's directory. The result is resolved
/// beneath a root again, so `..` in it is checked by the kernel.
fn follow(from: &Path, target: &Path) -> PathBuf {
    if target.is_absolute() {
        return target.to_path_buf();
    }
    from.parent().unwrap_or(Path::new("/")).join(target)
}

fn last_name(rest: &Path, path: &Path) -> Result<OsString, AgentError> {
    if rest == Path::new(".") {
        let msg = format!(
            "{} is an allowed root directory, not a file",
            path.display()
        );
        return Err(
            AgentError::new(ErrorCode::IsADirectory, msg).with_path(path.display().to_string())
        );
    }
    match rest.components().next_back() {
        Some(Component::Normal(name)) => Ok(name.to_os_string()),
        _ => Err(
            AgentError::invalid(format!("{}: the path must name a file", path.display()))
                .with_path(path.display().to_string()),
        ),
    }
}

/// Refuses relative, empty, oversized and NUL-carrying paths.
pub(crate) fn validate(path: &Path) -> Result<(), AgentError> {
    let bytes = path.as_os_str().as_bytes();
    let shown = path.display().to_string();
    if bytes.len() > MAX_PATH_BYTES {
        let msg = format!(
            "path is {} bytes; at most {MAX_PATH_BYTES} are allowed",
            bytes.len()
        );
        return Err(AgentError::new(ErrorCode::TooLarge, msg));
    }
    if bytes.contains(&0) {
        return Err(AgentError::invalid("path contains a NUL byte"));
    }
    if !path.is_absolute() {
        let msg = format!("path must be absolute, got '{shown}'");
        return Err(AgentError::invalid(msg).with_path(shown));
    }
    Ok(())
}

fn outside(path: &Path, roots: &[PathBuf]) -> AgentError {
    let roots: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    let shown = path.display().to_string();
    let msg = format!(
        "{shown} is outside the sandbox: file operations are allowed beneath {} only",
        roots.join(", ")
    );
    AgentError::new(ErrorCode::OutsideSandbox, msg).with_path(shown)
}

pub(crate) fn io_err(err: &io::Error, path: &Path) -> AgentError {
    AgentError::from_io(err, &path.display().to_string())
}

/// The kernel's `struct open_how` (linux/openat2.h). Declared here because libc's is
/// `#[non_exhaustive]`; the layout is fixed ABI (three u64, size 24 = OPEN_HOW_SIZE_VER0).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// The resolution rules of an open that follows no link at all, beneath its directory
/// fd: what host-side reads and removals of workspace entries use.
pub const BENEATH_NO_LINKS: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;

/// `openat2(2)` through the raw syscall (glibc has no wrapper), retrying on EINTR and on
/// the EAGAIN a concurrent rename can cause under RESOLVE_BENEATH.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &Path,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let how = OpenHow {
        flags: u64::from(flags.cast_unsigned()),
        mode: u64::from(mode),
        resolve,
    };
    let mut attempts = 0;
    loop {
        // SAFETY: `c_path` is a valid NUL-terminated string and `how` a valid open_how,
        // both alive for the call; the size passed is exactly the struct's size. The
        // kernel only reads them and returns a new fd or -1.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c_path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if ret >= 0 {
            let fd = i32::try_from(ret).map_err(|_| io::Error::other("fd out of range"))?;
            // SAFETY: the kernel just returned this fd to us; nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = io::Error::last_os_error();
        attempts += 1;
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) if attempts < 8 => continue,
            _ => return Err(err),
        }
    }
}

/// `AT_FDCWD` as a borrowed fd, for opening the roots themselves.
pub(crate) fn cwd_fd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD (-100) is a sentinel the *at syscalls accept as "the working
    // directory"; it is not -1 and is never closed, so borrowing it for 'static is sound.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}
