//! The content hashes a trust record binds: the workspace's two settings files (hashed
//! from the very bytes the settings loader parsed, so nothing can change between the
//! check and the use), `.mcp.json`, every file under `.claude/hooks/` and `.cordon/`, and
//! the devcontainer (`.devcontainer.json`, everything under `.devcontainer/`, and the
//! Dockerfile it names wherever that is): a Docker session of a trusted workspace builds
//! that image, its steps with the network, so a `git pull` changing it untrusts too.
//!
//! Nothing is followed out of the workspace: a symbolic link is hashed as its target's
//! name, and only regular files are read (with `O_NOFOLLOW | O_NONBLOCK`, so a link or a
//! FIFO swapped in between the check and the open is refused, not read or waited on).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::TrustError;

/// Files bound besides the settings files, relative to the workspace.
const BOUND_FILES: &[&str] = &[".mcp.json", ".devcontainer.json"];
/// Directories whose every file is bound, relative to the workspace.
const BOUND_DIRS: &[&str] = &[".claude/hooks", ".cordon", ".devcontainer"];
/// Most files one fingerprint covers.
const MAX_FILES: usize = 2_000;
/// Most bytes one fingerprint reads.
const MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Relative path to `sha256:<hex>` (or `symlink:<hex>` of the link's target) of every bound
/// file that exists and is not empty. A file that is absent (or empty) has no entry, so one
/// appearing with content is a change.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(BTreeMap<String, String>);

struct Budget {
    files: usize,
    bytes: u64,
}

impl Fingerprint {
    /// The fingerprint of `workspace`, with the settings files' contents as they were read
    /// (`None`: absent).
    pub fn of(workspace: &Path, settings: &[(&str, Option<&[u8]>)]) -> Result<Self, TrustError> {
        let mut fp = Fingerprint::default();
        for (rel, bytes) in settings {
            if let Some(bytes) = bytes {
                fp.0.insert((*rel).to_string(), digest("sha256", bytes));
            }
        }
        let mut budget = Budget { files: 0, bytes: 0 };
        for rel in BOUND_FILES.iter().chain(BOUND_DIRS) {
            fp.add(workspace, rel, &mut budget)?;
        }
        let dockerfile = crate::sandbox::docker::devcontainer::dockerfile(workspace);
        if let Some(rel) = dockerfile.filter(|rel| !fp.0.contains_key(rel)) {
            fp.add(workspace, &rel, &mut budget)?;
        }
        Ok(fp)
    }

    /// This fingerprint with `rel` (a settings file) holding `bytes`.
    pub fn with_file(mut self, rel: &str, bytes: &[u8]) -> Self {
        self.0.insert(rel.to_string(), digest("sha256", bytes));
        self
    }

    /// The bound files, relative to the workspace.
    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The files that differ from `recorded` (changed, added or removed), sorted.
    pub fn changed_since(&self, recorded: &Fingerprint) -> Vec<String> {
        let mut changed: Vec<String> = self
            .0
            .iter()
            .filter(|(k, v)| recorded.0.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .chain(
                recorded
                    .0
                    .keys()
                    .filter(|k| !self.0.contains_key(*k))
                    .cloned(),
            )
            .collect();
        changed.sort();
        changed.dedup();
        changed
    }

    /// Adds `rel` (a file, a link, or a directory walked without following links).
    fn add(&mut self, workspace: &Path, rel: &str, budget: &mut Budget) -> Result<(), TrustError> {
        let path = workspace.join(rel);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(TrustError::Read { path, source }),
        };
        budget.files += 1;
        if budget.files > MAX_FILES {
            return Err(TrustError::TooLarge {
                path,
                what: format!("more than {MAX_FILES} files"),
            });
        }
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(&path).map_err(|source| TrustError::Read {
                path: path.clone(),
                source,
            })?;
            let target = target.as_os_str().as_encoded_bytes();
            self.0.insert(rel.to_string(), digest("symlink", target));
        } else if kind.is_dir() {
            let mut names: Vec<String> = std::fs::read_dir(&path)
                .map_err(|source| TrustError::Read {
                    path: path.clone(),
                    source,
                })?
                .filter_map(Result::ok)
                .take(MAX_FILES + 1)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for name in names {
                self.add(workspace, &format!("{rel}/{name}"), budget)?;
            }
        } else if kind.is_file() && meta.len() == 0 {
            // An empty file configures nothing, and it is what a running session's
            // protected-path placeholder (`.mcp.json`) looks like: bound as absent, so a
            // placeholder neither untrusts a workspace nor gets recorded by a trust given
            // during a session.
        } else if kind.is_file() {
            budget.bytes += meta.len();
            if budget.bytes > MAX_BYTES {
                return Err(TrustError::TooLarge {
                    path,
                    what: format!("more than {} MiB", MAX_BYTES >> 20),
                });
            }
            let bytes = read_regular(&path, meta.len())?;
            self.0.insert(rel.to_string(), digest("sha256", &bytes));
        } else {
            // A FIFO, socket or device: bound by its kind, never opened.
            self.0.insert(rel.to_string(), "special".into());
        }
        Ok(())
    }
}

fn digest(kind: &str, bytes: &[u8]) -> String {
    format!("{kind}:{}", hex::encode(Sha256::digest(bytes)))
}

/// Reads a regular file without following a link at its last component, at most `len`
/// bytes plus one (a file that grew is caught by the next fingerprint, not read forever).
fn read_regular(path: &Path, len: u64) -> Result<Vec<u8>, TrustError> {
    let read_err = |source| TrustError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(len.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    Ok(bytes)
}
