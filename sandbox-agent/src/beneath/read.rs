//! Reading workspace files on the host ([`WorkspaceReader`]): beneath the workspace,
//! never through a link.
//!
//! Everything in the workspace is written by the repository or by the sandbox, so on the
//! host it is untrusted data. A `CLAUDE.md -> /root/.ssh/id_ed25519` or a
//! `.claude/settings.json -> /proc/self/environ` must not make the orchestrator read a host
//! secret and send it to the model. Every file is opened beneath the held workspace
//! ([`super::HeldDir`]: `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`),
//! and then:
//!
//! - `O_NONBLOCK`, then `fstat`: a FIFO opens without waiting for a writer and is refused
//!   (a blocking open of one would hang the session's start), as is anything but a
//!   regular file;
//! - a size cap, checked on the open file and again while reading (a file may grow).
//!
//! Files outside the workspace that count (the user's own `~/.claude`, `~/.cordon`, the
//! managed ones) are read with [`read_own_file`], which keeps the FIFO and size guards.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use super::{HeldDir, plain};

/// Why a workspace file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("opening the workspace {path}: {source}")]
    OpenRoot {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a plain path beneath the workspace")]
    NotBeneath { path: PathBuf },
    #[error("{path}: is a symbolic link or passes through one; not followed")]
    Link { path: PathBuf },
    #[error("{path}: is a {kind}, not a regular file; not read")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path}: larger than {max} bytes; not read")]
    TooLarge { path: PathBuf, max: u64 },
    #[error("{path}: not UTF-8 text; not read")]
    NotText { path: PathBuf },
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A workspace opened once: every read resolves beneath its directory fd.
#[derive(Debug)]
pub struct WorkspaceReader {
    held: HeldDir,
}

impl WorkspaceReader {
    /// Opens `root` (the canonical workspace the session runs in).
    pub fn open(root: &Path) -> Result<WorkspaceReader, ReadError> {
        let held = HeldDir::open(root).map_err(|source| ReadError::OpenRoot {
            path: root.to_path_buf(),
            source,
        })?;
        Ok(WorkspaceReader { held })
    }

    /// The workspace's path.
    pub fn root(&self) -> &Path {
        self.held.path()
    }

    /// `path` relative to the workspace, when it names something strictly inside it by
    /// plain components (no `..`, no `.`).
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        self.held.relative(path)
    }

    /// The text of the file at `rel` (relative to the workspace), at most `max` bytes.
    /// `Ok(None)` when there is no such file; an error when it is a link, not a regular
    /// file, too large or not UTF-8.
    pub fn read_text(&self, rel: &Path, max: u64) -> Result<Option<String>, ReadError> {
        let Some(bytes) = self.read_bytes(rel, max)? else {
            return Ok(None);
        };
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ReadError::NotText {
                path: self.root().join(rel),
            })
    }

    /// The bytes of the file at `rel`, at most `max`; [`WorkspaceReader::read_text`] without the
    /// UTF-8 check (the server's file download).
    pub fn read_bytes(&self, rel: &Path, max: u64) -> Result<Option<Vec<u8>>, ReadError> {
        let shown = self.root().join(rel);
        if !plain(rel) {
            return Err(ReadError::NotBeneath { path: shown });
        }
        let read_err = |source: std::io::Error| ReadError::Read {
            path: shown.clone(),
            source,
        };
        // SECURITY: what the name is, is looked at before it is opened. Opening a device
        // node can act on its own (a watchdog starts, a tape rewinds, a serial line's DTR
        // toggles), and a tree the host reads may hold one: a container image's layer
        // (unpacked by root) is read this way too. The O_PATH fd opens nothing; only a
        // regular file is then opened, through that fd, so the same inode is reached.
        let pinned = match self.held.open_beneath(rel, libc::O_PATH | libc::O_CLOEXEC) {
            Ok(f) => File::from(f),
            Err(Errno::ENOENT) => return Ok(None),
            // ELOOP: a link on the way or at the end; EXDEV: resolution tried to leave.
            Err(Errno::ELOOP | Errno::EXDEV) => return Err(ReadError::Link { path: shown }),
            Err(e) => return Err(read_err(e.into())),
        };
        let kind = pinned.metadata().map_err(read_err)?.file_type();
        if !kind.is_file() {
            return Err(ReadError::NotRegular {
                path: shown,
                kind: kind_of(&kind),
            });
        }
        let file = reopen(&pinned).map_err(read_err)?;
        read_open_bytes(file, &shown, max).map(Some)
    }
}

/// Opens the file an O_PATH fd refers to for reading (through its `/proc/self/fd` link,
/// which reaches that inode whatever its name is now). O_NONBLOCK: a FIFO swapped in
/// could not be (the inode is pinned), but no open here may ever wait. O_NOCTTY: no
/// terminal becomes ours.
fn reopen(pinned: &File) -> std::io::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", pinned.as_raw_fd()))
}

/// Reads one of the user's own (or a managed) files outside the workspace: links are
/// followed (the user's home is theirs), but the FIFO and size guards hold.
/// `Ok(None)` when it does not exist.
pub fn read_own_file(path: &Path, max: u64) -> Result<Option<String>, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    match opened {
        Ok(file) => read_open_file(file, path, max).map(Some),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ReadError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Refuses anything but a regular file of at most `max` bytes, then reads it as text.
fn read_open_file(file: File, path: &Path, max: u64) -> Result<String, ReadError> {
    String::from_utf8(read_open_bytes(file, path, max)?).map_err(|_| ReadError::NotText {
        path: path.to_path_buf(),
    })
}

/// Refuses anything but a regular file of at most `max` bytes, then reads it.
pub(super) fn read_open_bytes(file: File, path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let read_err = |source| ReadError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&meta.file_type()),
        });
    }
    let too_large = || ReadError::TooLarge {
        path: path.to_path_buf(),
        max,
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    // One byte past the cap tells a file that grew since the fstat.
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use nix::sys::stat::Mode;

    use super::*;

    fn ws() -> (tempfile::TempDir, WorkspaceReader) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = WorkspaceReader::open(&root).unwrap();
        (dir, ws)
    }

    #[test]
    fn reads_a_plain_file_and_reports_a_missing_one() {
        let (dir, ws) = ws();
        std::fs::create_dir(dir.path().join(".claude")).unwrap();
        std::fs::write(dir.path().join(".claude/CLAUDE.md"), "hello").unwrap();
        let text = ws.read_text(Path::new(".claude/CLAUDE.md"), 64).unwrap();
        assert_eq!(text.as_deref(), Some("hello"));
        assert!(ws.read_text(Path::new("CLAUDE.md"), 64).unwrap().is_none());
    }

    #[test]
    fn a_link_at_the_end_or_on_the_way_is_refused() {
        let (dir, ws) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "SECRET").unwrap();
        symlink(outside.path().join("secret"), dir.path().join("CLAUDE.md")).unwrap();
        symlink(outside.path(), dir.path().join(".claude")).unwrap();
        std::fs::write(dir.path().join("inner"), "x").unwrap();
        symlink("inner", dir.path().join("relative-link")).unwrap();
        for rel in ["CLAUDE.md", ".claude/secret", "relative-link"] {
            let err = ws.read_text(Path::new(rel), 64).unwrap_err();
            assert!(matches!(err, ReadError::Link { .. }), "{rel}: {err}");
        }
    }

    #[test]
    fn magic_links_and_escapes_are_refused() {
        let (dir, ws) = ws();
        symlink("/proc/self/environ", dir.path().join("env")).unwrap();
        assert!(matches!(
            ws.read_text(Path::new("env"), 1 << 20).unwrap_err(),
            ReadError::Link { .. }
        ));
        for rel in ["../x", "/etc/passwd", "./a", ""] {
            assert!(
                matches!(
                    ws.read_text(Path::new(rel), 64).unwrap_err(),
                    ReadError::NotBeneath { .. }
                ),
                "{rel}"
            );
        }
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (dir, ws) = ws();
        nix::unistd::mkfifo(
            &dir.path().join("CLAUDE.md"),
            Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let err = ws.read_text(Path::new("CLAUDE.md"), 64).unwrap_err();
        assert!(
            matches!(err, ReadError::NotRegular { kind: "FIFO", .. }),
            "{err}"
        );
        std::fs::create_dir(dir.path().join("d")).unwrap();
        assert!(matches!(
            ws.read_text(Path::new("d"), 64).unwrap_err(),
            ReadError::NotRegular { .. }
        ));
    }

    #[test]
    fn a_device_node_is_refused_without_being_opened() {
        let (dir, ws) = ws();
        let node = dir.path().join("ca-certificates.crt");
        // The null device's numbers (harmless if opened); making it needs root.
        let made = nix::sys::stat::mknod(
            &node,
            nix::sys::stat::SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o644),
            nix::sys::stat::makedev(1, 3),
        );
        if made.is_err() {
            eprintln!("skipped: cannot make a device node here (not root)");
            return;
        }
        // Every open of it is an IN_OPEN event; an O_PATH one is none.
        // SAFETY: plain syscalls on a path that lives for the calls; the fd is closed below.
        let watch = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(watch >= 0);
        let c_node = std::ffi::CString::new(node.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `watch` is the inotify fd above and `c_node` a valid C string.
        assert!(unsafe { libc::inotify_add_watch(watch, c_node.as_ptr(), libc::IN_OPEN) } >= 0);
        let err = ws
            .read_text(Path::new("ca-certificates.crt"), 64)
            .unwrap_err();
        assert!(
            matches!(err, ReadError::NotRegular { kind: "device", .. }),
            "{err}"
        );
        let mut events = [0u8; 256];
        // SAFETY: reads into a buffer of the length given; the fd is ours.
        let n = unsafe { libc::read(watch, events.as_mut_ptr().cast(), events.len()) };
        // SAFETY: closing the fd made above, once.
        unsafe { libc::close(watch) };
        assert!(n < 0, "the device node was opened ({n} bytes of events)");
    }

    #[test]
    fn a_file_over_the_cap_or_not_text_is_refused() {
        let (dir, ws) = ws();
        std::fs::write(dir.path().join("big"), vec![b'a'; 65]).unwrap();
        std::fs::write(dir.path().join("bin"), [0xff, 0xfe]).unwrap();
        assert!(matches!(
            ws.read_text(Path::new("big"), 64).unwrap_err(),
            ReadError::TooLarge { max: 64, .. }
        ));
        assert_eq!(
            ws.read_text(Path::new("big"), 65).unwrap().unwrap().len(),
            65
        );
        assert!(matches!(
            ws.read_text(Path::new("bin"), 64).unwrap_err(),
            ReadError::NotText { .. }
        ));
    }

    #[test]
    fn relative_accepts_only_paths_strictly_inside() {
        let (_dir, ws) = ws();
        let root = ws.root().to_path_buf();
        assert_eq!(
            ws.relative(&root.join(".claude/settings.json")),
            Some(Path::new(".claude/settings.json"))
        );
        assert_eq!(ws.relative(&root), None);
        assert_eq!(ws.relative(&root.join("../x")), None);
        assert_eq!(ws.relative(Path::new("/etc/passwd")), None);
    }

    #[test]
    fn own_files_follow_links_but_refuse_fifos() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real"), "mine").unwrap();
        symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        nix::unistd::mkfifo(&dir.path().join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
        assert_eq!(
            read_own_file(&dir.path().join("link"), 64)
                .unwrap()
                .as_deref(),
            Some("mine")
        );
        assert!(
            read_own_file(&dir.path().join("none"), 64)
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            read_own_file(&dir.path().join("fifo"), 64).unwrap_err(),
            ReadError::NotRegular { .. }
        ));
    }
}
