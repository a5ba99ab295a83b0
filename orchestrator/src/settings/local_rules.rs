//! Writing an allow rule to the workspace's `.claude/settings.local.json`: what the
//! interactive session's "allow always" (and `/permissions`) calls.
//!
//! The file is in the workspace, which a hostile repository shaped, so it is written on
//! the host without following links: `.claude` and the file are opened with `O_NOFOLLOW`
//! relative to the workspace's descriptor, and the new content goes to a temporary file
//! created with `O_EXCL` beside it, then renamed over it. A `.claude` that is a symbolic
//! link (to `~/.ssh`, say) is refused, never written through.
//!
//! When the workspace was trusted with exactly its current files, the trust record is
//! updated to the file just written: the user made this change, so it must not untrust
//! the workspace. Any other change still does.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{Mode, mkdirat};
use serde_json::{Map, Value};

use super::LOCAL_FILE;
use crate::permissions::{Rule, RuleError};
use crate::trust::{TrustError, TrustStore};

const DIR: &str = ".claude";
const NAME: &str = "settings.local.json";
const TMP: &str = "settings.local.json.cordon-tmp";
/// Largest local settings file read back.
const MAX_LEN: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum LocalRuleError {
    #[error("not a permission rule: {0}")]
    Rule(#[from] RuleError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a settings object ({problem}); left unchanged")]
    Invalid { path: PathBuf, problem: String },
    #[error(transparent)]
    Trust(#[from] TrustError),
}

/// What [`add_local_allow_rule`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRuleAdded {
    /// The file written.
    pub path: PathBuf,
    /// The rule as written (`Bash(npm test *)`).
    pub rule: String,
    /// False when the file already held it (nothing was written).
    pub added: bool,
    /// The workspace was trusted and stays trusted with the new file.
    pub still_trusted: bool,
}

/// Adds `rule` to `permissions.allow` of `<workspace>/.claude/settings.local.json`, keeping
/// everything else in the file. `store`: the trust record to keep current.
pub fn add_local_allow_rule(
    workspace: &Path,
    rule: &str,
    store: Option<&TrustStore>,
) -> Result<LocalRuleAdded, LocalRuleError> {
    let rule = Rule::parse(rule)?.to_string();
    // The trust record is keyed by the canonical path.
    let workspace = &workspace
        .canonicalize()
        .map_err(|source| LocalRuleError::Io {
            path: workspace.to_path_buf(),
            source,
        })?;
    let path = workspace.join(LOCAL_FILE);
    let io = |source: nix::Error| LocalRuleError::Io {
        path: path.clone(),
        source: source.into(),
    };
    // Was the workspace trusted with exactly its current files?
    let trusted_before = match store {
        Some(s) => {
            let current = crate::trust::current_fingerprint(workspace)?;
            s.recorded(workspace)?
                .filter(|r| r.files == current)
                .map(|_| (s, current))
        }
        None => None,
    };
    let dir = open_dir(workspace).map_err(io)?;
    let mut value = read_object(&dir, &path)?;
    let allow = allow_list(&mut value, &path)?;
    let added = !allow.iter().any(|v| v.as_str() == Some(&rule));
    if added {
        allow.push(Value::String(rule.clone()));
        let mut text = serde_json::to_vec_pretty(&value).map_err(|e| LocalRuleError::Invalid {
            path: path.clone(),
            problem: e.to_string(),
        })?;
        text.push(b'\n');
        replace(&dir, &text).map_err(|source| LocalRuleError::Io {
            path: path.clone(),
            source,
        })?;
        if let Some((s, current)) = &trusted_before {
            s.record(workspace, &current.clone().with_file(LOCAL_FILE, &text))?;
        }
    }
    Ok(LocalRuleAdded {
        path,
        rule,
        added,
        still_trusted: trusted_before.is_some(),
    })
}

/// `<workspace>/.claude`, made if missing, opened without following a link.
fn open_dir(workspace: &Path) -> nix::Result<OwnedFd> {
    let ws = nix::fcntl::open(
        workspace,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    match mkdirat(&ws, DIR, Mode::from_bits_truncate(0o755)) {
        Ok(()) | Err(nix::Error::EEXIST) => {}
        Err(e) => return Err(e),
    }
    openat(
        &ws,
        DIR,
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// The file's JSON object (empty when the file does not exist).
fn read_object(dir: &OwnedFd, path: &Path) -> Result<Value, LocalRuleError> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = match openat(dir, NAME, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(nix::Error::ENOENT) => return Ok(Value::Object(Map::new())),
        Err(e) => {
            return Err(LocalRuleError::Io {
                path: path.to_path_buf(),
                source: e.into(),
            });
        }
    };
    let invalid = |problem: String| LocalRuleError::Invalid {
        path: path.to_path_buf(),
        problem,
    };
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(|source| LocalRuleError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() || meta.len() > MAX_LEN {
        return Err(invalid("not a regular file of at most 1 MiB".into()));
    }
    let mut text = String::new();
    file.take(MAX_LEN)
        .read_to_string(&mut text)
        .map_err(|source| LocalRuleError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let value: Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    if !value.is_object() {
        return Err(invalid("the top level is not an object".into()));
    }
    Ok(value)
}

/// `permissions.allow` of `value`, made if missing.
fn allow_list<'a>(value: &'a mut Value, path: &Path) -> Result<&'a mut Vec<Value>, LocalRuleError> {
    let invalid = |problem: &str| LocalRuleError::Invalid {
        path: path.to_path_buf(),
        problem: problem.into(),
    };
    let perms = value
        .as_object_mut()
        .ok_or_else(|| invalid("the top level is not an object"))?
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| invalid("permissions is not an object"))?;
    perms
        .entry("allow")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| invalid("permissions.allow is not a list"))
}

/// Writes `text` to a new temporary file in `dir` and renames it over the file.
fn replace(dir: &OwnedFd, text: &[u8]) -> std::io::Result<()> {
    let _ = nix::unistd::unlinkat(dir, TMP, nix::unistd::UnlinkatFlags::NoRemoveDir);
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(dir, TMP, flags, Mode::from_bits_truncate(0o644))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(text)?;
    file.sync_all()?;
    renameat(dir, TMP, dir, NAME)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_a_rule_keeping_the_rest_and_keeps_the_trust_it_had() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join(".claude")).unwrap();
        std::fs::write(
            ws.join(LOCAL_FILE),
            r#"{"model": "m", "permissions": {"allow": ["Read"]}}"#,
        )
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        let store = TrustStore::at(home.path());
        crate::trust::trust_workspace(&store, &ws).unwrap();
        let done = add_local_allow_rule(&ws, "Bash(npm test:*)", Some(&store)).unwrap();
        assert!(done.added && done.still_trusted, "{done:?}");
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(ws.join(LOCAL_FILE)).unwrap()).unwrap();
        assert_eq!(v["model"], "m");
        assert_eq!(v["permissions"]["allow"][1], done.rule);
        let again = add_local_allow_rule(&ws, "Bash(npm test:*)", Some(&store)).unwrap();
        assert!(!again.added);
        let fp = crate::trust::current_fingerprint(&ws).unwrap();
        assert_eq!(store.recorded(&ws).unwrap().unwrap().files, fp);
        assert!(!ws.join(".claude").join(TMP).exists());
    }

    #[test]
    fn never_writes_through_a_linked_claude_dir_and_keeps_a_broken_file() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join(".claude")).unwrap();
        assert!(add_local_allow_rule(ws.path(), "Bash", None).is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join(".claude")).unwrap();
        std::fs::write(ws.path().join(LOCAL_FILE), "{not json").unwrap();
        let err = add_local_allow_rule(ws.path(), "Bash", None).unwrap_err();
        assert!(matches!(err, LocalRuleError::Invalid { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(ws.path().join(LOCAL_FILE)).unwrap(),
            "{not json"
        );
        // An untrusted workspace stays untrusted.
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let store = TrustStore::at(home.path());
        let done = add_local_allow_rule(ws.path(), "Edit", Some(&store)).unwrap();
        assert!(done.added && !done.still_trusted);
        assert!(store.recorded(ws.path()).unwrap().is_none());
    }
}
