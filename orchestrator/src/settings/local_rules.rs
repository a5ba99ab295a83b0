//! The workspace's `.claude/settings.local.json` as Cordon itself edits it: an allow rule
//! added by the interactive session's "allow always", a rule removed from `/permissions`.
//! Every other key of the file is kept as it was. The one place Cordon writes that file.
//!
//! The file is in the workspace, which the sandbox can write and a hostile repository
//! shaped, so it is written on the host without following links: `.claude` and the file
//! are opened with `O_NOFOLLOW` relative to the workspace's descriptor, and the new content
//! goes to a fresh file created with `O_EXCL` beside it, then renamed over it (a crash
//! leaves the old file or the new one, never half of one). A `.claude` or a file that is a
//! symbolic link (to `~/.ssh`, say) is refused, never written through.
//!
//! When the workspace was trusted with exactly its current files, the trust record is
//! updated to the file just written: the user made this change, so it must not untrust
//! the workspace. Any other change still does.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{Mode, mkdirat};
use serde_json::{Map, Value};

use super::LOCAL_FILE;
use crate::permissions::{Rule, RuleError};
use crate::trust::{Fingerprint, TrustError, TrustStore};

const DIR: &str = ".claude";
const NAME: &str = "settings.local.json";
/// Largest local settings file read back (settings files are small; a huge one is not
/// ours to rewrite).
const MAX_LEN: u64 = 1024 * 1024;

/// Which permission list a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleList {
    Allow,
    Ask,
    Deny,
}

impl RuleList {
    /// The list's key under `permissions`.
    pub fn key(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LocalRuleError {
    #[error("not a permission rule: {0}")]
    Rule(#[from] RuleError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a settings object ({problem}); left unchanged, fix it first")]
    Invalid { path: PathBuf, problem: String },
    #[error(transparent)]
    Trust(#[from] TrustError),
}

/// What an edit of the local settings file did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRuleEdit {
    /// The file.
    pub path: PathBuf,
    /// The rule as written or removed (`Bash(npm test *)`).
    pub rule: String,
    /// False when there was nothing to do (the rule was already there, or was not there to
    /// remove): nothing was written.
    pub changed: bool,
    /// The workspace was trusted with its files as they were, and stays trusted with the
    /// new file.
    pub still_trusted: bool,
}

/// `<workspace>/.claude/settings.local.json`.
pub fn local_file(workspace: &Path) -> PathBuf {
    workspace.join(LOCAL_FILE)
}

/// Adds `rule` to `permissions.allow` of `<workspace>/.claude/settings.local.json` (made
/// with `.claude` when missing), keeping everything else in the file. `store`: the trust
/// record to keep current.
pub fn add_local_allow_rule(
    workspace: &Path,
    rule: &str,
    store: Option<&TrustStore>,
) -> Result<LocalRuleEdit, LocalRuleError> {
    let rule = Rule::parse(rule)?.to_string();
    edit(workspace, &rule, true, store, |root| {
        // Made when missing, so `None` does not happen; it would change nothing.
        let Some(list) = rule_list(root, RuleList::Allow, true)? else {
            return Ok(false);
        };
        if list.iter().any(|v| v.as_str() == Some(rule.as_str())) {
            return Ok(false);
        }
        list.push(Value::String(rule.clone()));
        Ok(true)
    })
}

/// Removes `rule` (exactly as listed) from `permissions.<list>` of the local settings
/// file, keeping everything else. Nothing is created when the file or the list is absent.
pub fn remove_local_rule(
    workspace: &Path,
    list: RuleList,
    rule: &str,
    store: Option<&TrustStore>,
) -> Result<LocalRuleEdit, LocalRuleError> {
    edit(workspace, rule, false, store, |root| {
        let Some(entries) = rule_list(root, list, false)? else {
            return Ok(false);
        };
        let before = entries.len();
        entries.retain(|r| r.as_str() != Some(rule));
        Ok(entries.len() != before)
    })
}

/// Reads the file (an absent or empty one is `{}`), lets `change` edit it, and writes it
/// back when `change` says it changed something, keeping a matching trust record current.
/// `create`: make `.claude` when it is missing.
fn edit(
    workspace: &Path,
    rule: &str,
    create: bool,
    store: Option<&TrustStore>,
    change: impl FnOnce(&mut Map<String, Value>) -> Result<bool, &'static str>,
) -> Result<LocalRuleEdit, LocalRuleError> {
    // The trust record is keyed by the canonical path.
    let workspace = &workspace
        .canonicalize()
        .map_err(|source| LocalRuleError::Io {
            path: workspace.to_path_buf(),
            source,
        })?;
    let path = local_file(workspace);
    let trusted_before = trusted_as_is(workspace, store)?;
    let mut done = LocalRuleEdit {
        path: path.clone(),
        rule: rule.to_string(),
        changed: false,
        still_trusted: trusted_before.is_some(),
    };
    let Some(dir) = claude_dir(workspace, create, &path)? else {
        return Ok(done);
    };
    let mut root = read_object(&dir, &path)?;
    done.changed = change(&mut root).map_err(|problem| LocalRuleError::Invalid {
        path: path.clone(),
        problem: problem.into(),
    })?;
    if !done.changed {
        return Ok(done);
    }
    let mut text = serde_json::to_vec_pretty(&root).map_err(|e| LocalRuleError::Invalid {
        path: path.clone(),
        problem: e.to_string(),
    })?;
    text.push(b'\n');
    replace(&dir, &text).map_err(|source| LocalRuleError::Io {
        path: path.clone(),
        source,
    })?;
    if let Some((s, current)) = trusted_before {
        s.record(workspace, &current.with_file(LOCAL_FILE, &text))?;
    }
    Ok(done)
}

/// The store and the workspace's fingerprint, when it was trusted with exactly its
/// current files.
fn trusted_as_is<'a>(
    workspace: &Path,
    store: Option<&'a TrustStore>,
) -> Result<Option<(&'a TrustStore, Fingerprint)>, LocalRuleError> {
    let Some(s) = store else { return Ok(None) };
    let Some(record) = s.recorded(workspace)? else {
        return Ok(None);
    };
    let current = crate::trust::current_fingerprint(workspace)?;
    Ok((record.files == current).then_some((s, current)))
}

/// `permissions.<list>` of `root`, made when `create`; `None` when absent.
fn rule_list(
    root: &mut Map<String, Value>,
    list: RuleList,
    create: bool,
) -> Result<Option<&mut Vec<Value>>, &'static str> {
    if !create && !root.contains_key("permissions") {
        return Ok(None);
    }
    let Value::Object(perms) = root
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()))
    else {
        return Err("permissions is not an object");
    };
    if !create && !perms.contains_key(list.key()) {
        return Ok(None);
    }
    match perms
        .entry(list.key())
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(entries) => Ok(Some(entries)),
        _ => Err("a permission list is not a list"),
    }
}

/// `.claude` in the workspace (made if missing and `create`, else `None`), opened without
/// following a link.
fn claude_dir(
    workspace: &Path,
    create: bool,
    path: &Path,
) -> Result<Option<OwnedFd>, LocalRuleError> {
    let io = |source: Errno| LocalRuleError::Io {
        path: path.to_path_buf(),
        source: source.into(),
    };
    // The workspace itself is the user's own canonical path, so following links up to it
    // is fine; `.claude` beneath it is the sandbox's to plant, so it is not followed.
    let ws = nix::fcntl::open(
        workspace,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)?;
    if create {
        match mkdirat(&ws, DIR, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(io(e)),
        }
    }
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    match openat(&ws, DIR, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) if !create => Ok(None),
        Err(e) => Err(io(e)),
    }
}

/// The file's JSON object (empty when the file does not exist or is empty).
fn read_object(dir: &OwnedFd, path: &Path) -> Result<Map<String, Value>, LocalRuleError> {
    let io = |source: std::io::Error| LocalRuleError::Io {
        path: path.to_path_buf(),
        source,
    };
    let invalid = |problem: String| LocalRuleError::Invalid {
        path: path.to_path_buf(),
        problem,
    };
    // O_NONBLOCK: a FIFO planted in its place must not hang the session.
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = match openat(dir, NAME, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(Map::new()),
        Err(e) => return Err(io(e.into())),
    };
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || meta.len() > MAX_LEN {
        return Err(invalid("not a regular file of at most 1 MiB".into()));
    }
    let mut text = String::new();
    file.take(MAX_LEN).read_to_string(&mut text).map_err(io)?;
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(invalid("the top level is not an object".into())),
        Err(e) => Err(invalid(e.to_string())),
    }
}

/// Writes `text` to a new file in `dir` (a fresh name, `O_EXCL`) and renames it over the
/// settings file; the new file is removed when any step fails.
fn replace(dir: &OwnedFd, text: &[u8]) -> std::io::Result<()> {
    let tmp = format!(
        ".{NAME}.cordon-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(dir, tmp.as_str(), flags, Mode::from_bits_truncate(0o644))?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(text)
        .and_then(|()| file.sync_all())
        .and_then(|()| Ok(renameat(dir, tmp.as_str(), dir, NAME)?));
    if written.is_err() {
        let _ = nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
    written
}

#[cfg(test)]
mod tests;
