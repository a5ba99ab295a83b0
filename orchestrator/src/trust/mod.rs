//! Workspace trust: whether a workspace's own settings may widen what runs.
//!
//! A workspace is untrusted until its user trusts it: `cordon trust [DIR]` (or the
//! interactive prompt, through [`trust_workspace`]), `--trust` for one headless run (unless
//! the managed settings set `allowHeadlessTrust: false`), or a `trustedDirectories` entry
//! in the user's or the managed settings. Until then the settings the workspace carries may
//! only narrow ([`untrusted`] applies `policies/untrusted-settings.json`).
//!
//! # Layout
//!
//! - [`fingerprint`]: the content hashes of the files a trust decision binds.
//! - [`store`]: the record of trusted workspaces in `$CORDON_HOME` (mode 0600).
//! - [`untrusted`]: what an untrusted workspace's settings keep, and what is ignored.
//!
//! Why a record binds content: trust is given to what the user saw. A later `git pull`
//! that changes `.claude/settings.json` (or the hooks it names in `.claude/hooks/`, or
//! `.mcp.json`, or `.cordon/`) makes the workspace untrusted again until it is trusted
//! anew. Inside a session these files are read-only to the sandbox (see
//! `policies/protected-paths.json`), so a session cannot re-trust itself.

pub mod fingerprint;
pub mod store;
pub mod untrusted;

use std::path::{Path, PathBuf};

pub use fingerprint::Fingerprint;
pub use store::{TrustRecord, TrustStore};
pub use untrusted::IgnoredSetting;

/// Why a trust operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: cannot write: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: invalid trust record: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{path}: refusing a trust record that another user owns or can write (owner {uid}, mode {mode:o})"
    )]
    Insecure { path: PathBuf, uid: u32, mode: u32 },
    #[error("{path}: too much to fingerprint ({what}); trust a smaller configuration")]
    TooLarge { path: PathBuf, what: String },
    #[error("workspace {path} does not exist: {source}")]
    NoWorkspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Settings(#[from] Box<crate::settings::SettingsError>),
}

/// How a workspace came to be trusted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "by", content = "detail")]
pub enum TrustBasis {
    /// `cordon trust` (or the interactive prompt) recorded exactly these files.
    Record,
    /// `--trust` for this run.
    Flag,
    /// A `trustedDirectories` entry of the user's or the managed settings.
    Directory(PathBuf),
}

/// Why a workspace is untrusted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "why", content = "files")]
pub enum UntrustedReason {
    /// Never trusted.
    NeverTrusted,
    /// Trusted once; these bound files changed (or appeared, or went) since.
    Changed(Vec<String>),
    /// Trusted once, but the bound files cannot be fingerprinted now (why).
    Unverifiable(String),
}

/// A workspace's trust, decided at the start of a session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum WorkspaceTrust {
    Trusted {
        #[serde(flatten)]
        basis: TrustBasis,
    },
    Untrusted {
        #[serde(flatten)]
        reason: UntrustedReason,
    },
}

impl WorkspaceTrust {
    pub fn is_trusted(&self) -> bool {
        matches!(self, Self::Trusted { .. })
    }
}

impl Default for WorkspaceTrust {
    fn default() -> Self {
        Self::Untrusted {
            reason: UntrustedReason::NeverTrusted,
        }
    }
}

/// What decides a workspace's trust, besides its files.
#[derive(Debug, Clone, Default)]
pub struct TrustInputs<'a> {
    /// `--trust` was given (and the managed settings allow it).
    pub flag: bool,
    /// `trustedDirectories` of the user's and the managed settings, absolute.
    pub directories: &'a [PathBuf],
    /// The record of trusted workspaces, when there is a data directory.
    pub store: Option<&'a TrustStore>,
}

/// Decides `workspace`'s trust; `fingerprint` gives its bound files now, and is called
/// only when a trust record must be compared. A workspace whose files cannot be
/// fingerprinted (unreadable, too many) is untrusted, not an error: a repository must not
/// be able to stop every session by shipping 10,000 files in `.cordon/`.
pub fn decide(
    workspace: &Path,
    fingerprint: impl FnOnce() -> Result<Fingerprint, TrustError>,
    inputs: &TrustInputs<'_>,
) -> Result<WorkspaceTrust, TrustError> {
    if inputs.flag {
        return Ok(WorkspaceTrust::Trusted {
            basis: TrustBasis::Flag,
        });
    }
    if let Some(dir) = inputs.directories.iter().find(|d| {
        // The workspace is canonical; so is the entry where it exists.
        let dir = d
            .canonicalize()
            .unwrap_or_else(|_| crate::permissions::paths::clean(d));
        workspace.starts_with(dir)
    }) {
        return Ok(WorkspaceTrust::Trusted {
            basis: TrustBasis::Directory(dir.clone()),
        });
    }
    let Some(record) = inputs.store.map(|s| s.recorded(workspace)).transpose()? else {
        return Ok(WorkspaceTrust::default());
    };
    let Some(record) = record else {
        return Ok(WorkspaceTrust::default());
    };
    let current = match fingerprint() {
        Ok(fp) => fp,
        Err(e) => {
            return Ok(WorkspaceTrust::Untrusted {
                reason: UntrustedReason::Unverifiable(e.to_string()),
            });
        }
    };
    let changed = current.changed_since(&record.files);
    Ok(if changed.is_empty() {
        WorkspaceTrust::Trusted {
            basis: TrustBasis::Record,
        }
    } else {
        WorkspaceTrust::Untrusted {
            reason: UntrustedReason::Changed(changed),
        }
    })
}

/// Trusts `workspace` as its files are now: what `cordon trust`, the interactive prompt and
/// `/trust` call. Returns the canonical workspace and the fingerprint recorded.
pub fn trust_workspace(
    store: &TrustStore,
    workspace: &Path,
) -> Result<(PathBuf, Fingerprint), TrustError> {
    let workspace = workspace
        .canonicalize()
        .map_err(|source| TrustError::NoWorkspace {
            path: workspace.to_path_buf(),
            source,
        })?;
    let fingerprint = current_fingerprint(&workspace)?;
    store.record(&workspace, &fingerprint)?;
    Ok((workspace, fingerprint))
}

/// The workspace's fingerprint now, its settings files read exactly as the settings
/// loader reads them.
pub fn current_fingerprint(workspace: &Path) -> Result<Fingerprint, TrustError> {
    let texts = crate::settings::read_repository_files(workspace).map_err(Box::new)?;
    let texts: Vec<(&str, Option<&[u8]>)> = texts
        .iter()
        .map(|(rel, text)| (*rel, text.as_deref().map(str::as_bytes)))
        .collect();
    Fingerprint::of(workspace, &texts)
}

#[cfg(test)]
mod tests;
