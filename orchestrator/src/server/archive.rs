//! `GET/PUT /v1/sessions/{id}/archive`: the workspace as a tarball.
//!
//! Download walks the workspace through held directory descriptors (never entering a
//! link or another filesystem) and reads each regular file with `O_NOFOLLOW`; links are
//! stored as links (their targets are data, never followed). Upload unpacks regular files
//! and directories only, each path plain and relative, written beneath the workspace by
//! the same code as a single file upload (a link on the way is refused); links, devices
//! and anything else are skipped and counted. The session's Edit deny rules hold for every
//! file. What the sandbox backend put in the workspace (placeholders at protected paths,
//! masks) is left out of a download.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat, Mode, SFlag};

use crate::permissions::Engine;
use sandbox_agent::beneath::Beneath;

use super::errors::ApiError;

/// The largest archive served or accepted.
pub const MAX_ARCHIVE_BYTES: u64 = 256 * 1024 * 1024;

fn too_large() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("the archive is larger than {MAX_ARCHIVE_BYTES} bytes"),
    )
}

/// The workspace as a tar archive, less `skip` (workspace-relative: the sandbox's
/// footprint, which is not the user's content).
pub fn pack(workspace: &Path, skip: &[std::path::PathBuf]) -> Result<Vec<u8>, ApiError> {
    let tree = Beneath::open(workspace).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut builder = tar::Builder::new(Vec::new());
    let mut failure: Option<ApiError> = None;
    let mut total: u64 = 0;
    tree.walk(
        &mut |rel: &Path, dir: &OwnedFd, name: &std::ffi::OsStr, st: &FileStat| {
            if failure.is_some() || skip.iter().any(|s| rel.starts_with(s)) {
                return;
            }
            if let Err(e) = add_entry(&mut builder, rel, dir, name, st, &mut total) {
                failure = Some(e);
            }
        },
    )
    .map_err(|e| ApiError::internal(format!("walking the workspace: {e}")))?;
    if let Some(e) = failure {
        return Err(e);
    }
    builder
        .into_inner()
        .map_err(|e| ApiError::internal(format!("writing the archive: {e}")))
}

fn add_entry(
    builder: &mut tar::Builder<Vec<u8>>,
    rel: &Path,
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    st: &FileStat,
    total: &mut u64,
) -> Result<(), ApiError> {
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    let mut header = tar::Header::new_gnu();
    header.set_mode(st.st_mode & 0o777);
    header.set_mtime(u64::try_from(st.st_mtime).unwrap_or(0));
    let failed =
        |e: std::io::Error| ApiError::internal(format!("archiving {}: {e}", rel.display()));
    if kind == SFlag::S_IFDIR {
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        builder
            .append_data(&mut header, rel, std::io::empty())
            .map_err(failed)?;
    } else if kind == SFlag::S_IFLNK {
        let target = nix::fcntl::readlinkat(dir, name).map_err(|e| failed(e.into()))?;
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        builder
            .append_link(&mut header, rel, target)
            .map_err(failed)?;
    } else if kind == SFlag::S_IFREG {
        // O_NOFOLLOW and O_NONBLOCK: the entry was a regular file when listed; if it was
        // swapped for a link or a FIFO since, the open fails or the type check below does.
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd =
            nix::fcntl::openat(dir, name, flags, Mode::empty()).map_err(|e| failed(e.into()))?;
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(failed)?;
        if !meta.is_file() {
            return Ok(());
        }
        *total = total.saturating_add(meta.len());
        if *total > MAX_ARCHIVE_BYTES {
            return Err(too_large());
        }
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(meta.len());
        builder
            .append_data(&mut header, rel, file.take(meta.len()))
            .map_err(failed)?;
    }
    Ok(())
}

/// What an upload did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Unpacked {
    pub files: usize,
    pub directories: usize,
    /// Links, devices and other entries not written.
    pub skipped: usize,
}

/// Unpacks `archive` into `workspace`.
pub fn unpack(engine: &Engine, workspace: &Path, archive: &[u8]) -> Result<Unpacked, ApiError> {
    let tree = Beneath::open(workspace).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut done = Unpacked::default();
    let bad = |e: std::io::Error| ApiError::bad_request(format!("reading the archive: {e}"));
    let mut reader = tar::Archive::new(archive);
    for entry in reader.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let path = entry.path().map_err(bad)?.into_owned();
        let rel = path.strip_prefix(".").unwrap_or(&path).to_path_buf();
        let Some(rel_str) = rel.to_str().filter(|s| !s.is_empty()) else {
            done.skipped += 1;
            continue;
        };
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().map_err(bad)?;
                if size > MAX_ARCHIVE_BYTES {
                    return Err(too_large());
                }
                let mut content = Vec::new();
                entry.read_to_end(&mut content).map_err(bad)?;
                super::files::write(engine, workspace, rel_str, &content)?;
                done.files += 1;
            }
            tar::EntryType::Directory => {
                let rel = super::workspace::plain_relative(rel_str)?;
                super::files::refuse_links_on_the_way(&tree, &rel.join("x"))?;
                tree.make_dirs(rel, None).map_err(|e| {
                    ApiError::bad_request(format!("cannot make {}: {e}", rel.display()))
                })?;
                done.directories += 1;
            }
            _ => done.skipped += 1,
        }
    }
    Ok(done)
}
