//! Which host directories may be mounted writable beside the workspace (the session's
//! additional directories, `permissions.additionalDirectories`), checked the same way by
//! the orchestrator (for both backends) and, as a second line, by the launcher.
//!
//! As host root the tree is idmapped so its owner's files are the sandbox user's: what the
//! sandbox writes lands on disk as the directory's owner. So a directory must belong to
//! the workspace's owner (uid 0 only when the workspace is root's too), and it may not be
//! one the host itself runs or reads from:
//!
//! - a system directory or anything in one: `/proc`, `/sys` (cgroup directories a user
//!   owns included), `/dev`, `/run`, `/boot`, `/etc`, `/usr`, `/var`, `/lib*`, `/bin`,
//!   `/sbin`, `/opt`, `/srv`, `/snap` and `/tmp` (the sandbox has a private /tmp of its
//!   own on both backends, which a directory there would cover);
//! - a home directory (root's `/root` always counts), an ancestor of one, or anything in a
//!   dot-directory directly under one (`~/.ssh`, `~/.config`, `~/.local`, ...): the
//!   user's shell, git and ssh read them;
//! - a directory group or others may write, or one below an ancestor that is group- or
//!   other-writable or owned by anyone but root and the directory's owner: someone else
//!   could swap a component of the path.
//!
//! The directory is opened once without following any symbolic link
//! ([`open_no_symlinks`]); the checks look at that descriptor and the mount is made from
//! it, so a component swapped for a link after the check redirects nothing.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Top-level directories the host's own programs run from, read or keep state in.
pub const SYSTEM_DIRS: &[&str] = &[
    "/proc", "/sys", "/dev", "/run", "/boot", "/etc", "/usr", "/var", "/bin", "/sbin", "/opt",
    "/srv", "/snap", "/tmp",
];

/// Root's home, a home wherever the passwd database says others are.
pub const ROOT_HOME: &str = "/root";

/// Owner and mode of one path, as the checks need them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub uid: u32,
    pub mode: u32,
}

impl From<&std::fs::Metadata> for Stat {
    fn from(m: &std::fs::Metadata) -> Stat {
        Stat {
            uid: m.uid(),
            mode: m.mode(),
        }
    }
}

/// Why `path` (absolute, normal) lies in a system directory, if it does.
pub fn system_dir(path: &Path) -> Option<String> {
    let top = match path.components().nth(1) {
        Some(Component::Normal(top)) => Path::new("/").join(top),
        _ => return None,
    };
    let lib = top
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("lib"));
    if lib || SYSTEM_DIRS.iter().any(|s| top == Path::new(s)) {
        return Some(format!(
            "it lies in the system directory {}, which the host itself runs or reads from",
            top.display()
        ));
    }
    None
}

/// Why `path` is a home (of `homes`, or root's), contains one, or lies in a dot-directory
/// directly under one, if it does.
pub fn home_dir(path: &Path, homes: &[PathBuf]) -> Option<String> {
    let root = PathBuf::from(ROOT_HOME);
    for home in homes.iter().chain(std::iter::once(&root)) {
        if home.starts_with(path) {
            return Some(format!(
                "it is the home directory {} or contains it, so a session could rewrite your shell, git and ssh configuration",
                home.display()
            ));
        }
        let first = path
            .strip_prefix(home)
            .ok()
            .and_then(|rest| rest.components().next());
        if let Some(Component::Normal(name)) = first
            && name.as_encoded_bytes().starts_with(b".")
        {
            return Some(format!(
                "it lies in {}, a dot-directory of the home {} (configuration and credentials the host reads)",
                home.join(name).display(),
                home.display()
            ));
        }
    }
    None
}

/// Whether `dir` (whose own owner and mode are `own`) belongs to `owner` (the workspace's
/// owner), is written by nobody else, and lies below ancestors nobody else could change;
/// `stat` looks at each ancestor without following a link.
pub fn owner_checks(
    dir: &Path,
    own: Stat,
    owner: u32,
    mut stat: impl FnMut(&Path) -> io::Result<Stat>,
) -> Result<(), String> {
    if own.uid != owner {
        return Err(format!(
            "it is owned by uid {}, not by the workspace's owner (uid {owner}), so the sandbox's writes would land as another user",
            own.uid
        ));
    }
    if own.mode & 0o022 != 0 {
        return Err(format!(
            "group or others may write to it (mode {:o}), so others could plant files there",
            own.mode & 0o7777
        ));
    }
    for ancestor in dir.ancestors().skip(1) {
        let st = stat(ancestor).map_err(|e| format!("{}: {e}", ancestor.display()))?;
        if st.uid != 0 && st.uid != own.uid {
            return Err(format!(
                "its ancestor {} is owned by uid {}, who could swap the path under it",
                ancestor.display(),
                st.uid
            ));
        }
        if st.mode & 0o022 != 0 {
            return Err(format!(
                "its ancestor {} may be written by group or others (mode {:o}), who could swap the path under it",
                ancestor.display(),
                st.mode & 0o7777
            ));
        }
    }
    Ok(())
}

/// An `O_PATH` descriptor of the directory `path` (absolute), resolved without following
/// any symbolic link on the way (`openat2`, `RESOLVE_NO_SYMLINKS`).
pub fn open_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    crate::fsops::resolve::openat2(crate::fsops::resolve::cwd_fd(), path, flags, 0, resolve)
}

/// The whole check of one additional directory: opened by [`open_no_symlinks`], then
/// [`system_dir`], [`home_dir`] and [`owner_checks`] against the opened directory.
/// Returns the descriptor the mount must be made from, with its owner's uid and gid.
pub fn open_checked(
    path: &Path,
    owner: u32,
    homes: &[PathBuf],
) -> Result<(OwnedFd, (u32, u32)), String> {
    if let Some(why) = system_dir(path).or_else(|| home_dir(path, homes)) {
        return Err(why);
    }
    let fd = open_no_symlinks(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => {
            "it is reached through a symbolic link; give its real path".to_string()
        }
        Some(libc::ENOTDIR) => "it is not a directory".to_string(),
        Some(libc::ENOENT) => "it does not exist".to_string(),
        _ => e.to_string(),
    })?;
    let st = nix::sys::stat::fstat(fd.as_fd()).map_err(|e| e.to_string())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err("it is not a directory".into());
    }
    let own = Stat {
        uid: st.st_uid,
        mode: st.st_mode,
    };
    owner_checks(path, own, owner, |p| {
        std::fs::symlink_metadata(p).map(|m| Stat::from(&m))
    })?;
    Ok((fd, (st.st_uid, st.st_gid)))
}

#[cfg(test)]
#[path = "extra_dir_tests.rs"]
mod tests;
