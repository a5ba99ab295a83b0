//! The workspace's `.claude/settings.local.json` as the interactive session edits it: an
//! allow rule added by "allow always", a rule removed from `/permissions`. Other keys are
//! kept as they were.
//!
//! The file sits in the workspace, which the sandbox can write: a session may have planted
//! a symbolic link at `.claude` or at the file to make the host write elsewhere. So every
//! step goes through a directory descriptor opened without following links, and the new
//! content is written to a fresh file beside the old one and renamed over it (a crash
//! leaves either the old file or the new one, never half of one).

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{Mode, mkdirat};
use serde_json::{Map, Value};

/// The file's name inside `.claude`.
const FILE: &str = "settings.local.json";
/// The largest file read (settings files are small; a huge one is not ours to rewrite).
const MAX_BYTES: u64 = 1024 * 1024;

/// Which permission list a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleList {
    Allow,
    Ask,
    Deny,
}

impl RuleList {
    pub fn key(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LocalRulesError {
    #[error("{path}: cannot open: {source}")]
    Open { path: PathBuf, source: Errno },
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: larger than {MAX_BYTES} bytes; not rewriting it")]
    TooLarge { path: PathBuf },
    #[error("{path}: invalid JSON ({source}); fix or remove it first")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {problem}; fix it first")]
    Shape {
        path: PathBuf,
        problem: &'static str,
    },
    #[error("{path}: cannot write: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `<workspace>/.claude/settings.local.json`.
pub fn path(workspace: &Path) -> PathBuf {
    workspace.join(".claude").join(FILE)
}

/// Adds `rule` to `permissions.allow`; `Ok(false)` when it was there already.
pub fn add_allow(workspace: &Path, rule: &str) -> Result<bool, LocalRulesError> {
    edit(workspace, true, |root| {
        let list = rule_list(root, RuleList::Allow, true)?;
        let Some(list) = list else { return Ok(false) };
        if list.iter().any(|r| r.as_str() == Some(rule)) {
            return Ok(false);
        }
        list.push(Value::String(rule.to_string()));
        Ok(true)
    })
}

/// Removes `rule` from `permissions.<list>`; `Ok(false)` when it was not there.
pub fn remove(workspace: &Path, list: RuleList, rule: &str) -> Result<bool, LocalRulesError> {
    edit(workspace, false, |root| {
        let Some(entries) = rule_list(root, list, false)? else {
            return Ok(false);
        };
        let before = entries.len();
        entries.retain(|r| r.as_str() != Some(rule));
        Ok(entries.len() != before)
    })
}

/// `permissions.<list>` of `root`, created when `create`; `None` when absent.
fn rule_list(
    root: &mut Map<String, Value>,
    list: RuleList,
    create: bool,
) -> Result<Option<&mut Vec<Value>>, &'static str> {
    if !create && !root.contains_key("permissions") {
        return Ok(None);
    }
    let permissions = root
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(permissions) = permissions else {
        return Err("`permissions` is not an object");
    };
    if !create && !permissions.contains_key(list.key()) {
        return Ok(None);
    }
    let entries = permissions
        .entry(list.key())
        .or_insert_with(|| Value::Array(Vec::new()));
    match entries {
        Value::Array(entries) => Ok(Some(entries)),
        _ => Err("a permission list is not an array"),
    }
}

/// Reads the file (an absent one is `{}`), lets `change` edit it, and writes it back when
/// `change` says it changed something. `create`: make `.claude` when it is missing.
fn edit(
    workspace: &Path,
    create: bool,
    change: impl FnOnce(&mut Map<String, Value>) -> Result<bool, &'static str>,
) -> Result<bool, LocalRulesError> {
    let shown = path(workspace);
    let Some(dir) = claude_dir(workspace, create)? else {
        return Ok(false);
    };
    let mut root = read(&dir, &shown)?;
    let changed = change(&mut root).map_err(|problem| LocalRulesError::Shape {
        path: shown.clone(),
        problem,
    })?;
    if changed {
        write(&dir, &shown, &root)?;
    }
    Ok(changed)
}

/// `.claude` in the workspace (created if missing and `create`, else `None`); never
/// through a link.
fn claude_dir(workspace: &Path, create: bool) -> Result<Option<OwnedFd>, LocalRulesError> {
    let dir_flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let open_err = |path: PathBuf| move |source| LocalRulesError::Open { path, source };
    // The workspace itself is the user's own (canonical) path, so following links up to
    // it is fine; `.claude` beneath it is the sandbox's to plant, so it is not followed.
    let ws = nix::fcntl::open(workspace, dir_flags, Mode::empty())
        .map_err(open_err(workspace.to_path_buf()))?;
    let claude = workspace.join(".claude");
    if create {
        match mkdirat(&ws, ".claude", Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(source) => return Err(open_err(claude)(source)),
        }
    }
    match openat(&ws, ".claude", dir_flags, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) if !create => Ok(None),
        Err(source) => Err(open_err(claude)(source)),
    }
}

fn read(dir: &OwnedFd, shown: &Path) -> Result<Map<String, Value>, LocalRulesError> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
    let fd = match openat(dir, FILE, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(Map::new()),
        Err(source) => {
            return Err(LocalRulesError::Open {
                path: shown.to_path_buf(),
                source,
            });
        }
    };
    let read_err = |source| LocalRulesError::Read {
        path: shown.to_path_buf(),
        source,
    };
    let file = std::fs::File::from(fd);
    // A FIFO or device planted in its place is not a settings file.
    if !file.metadata().map_err(read_err)?.is_file() {
        return Err(read_err(std::io::Error::other("not a regular file")));
    }
    let mut text = String::new();
    file.take(MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_BYTES {
        return Err(LocalRulesError::TooLarge {
            path: shown.to_path_buf(),
        });
    }
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(LocalRulesError::Shape {
            path: shown.to_path_buf(),
            problem: "the file is not a JSON object",
        }),
        Err(source) => Err(LocalRulesError::Parse {
            path: shown.to_path_buf(),
            source,
        }),
    }
}

fn write(dir: &OwnedFd, shown: &Path, root: &Map<String, Value>) -> Result<(), LocalRulesError> {
    let write_err = |source| LocalRulesError::Write {
        path: shown.to_path_buf(),
        source,
    };
    let mut text = serde_json::to_string_pretty(root)
        .map_err(std::io::Error::from)
        .map_err(write_err)?;
    text.push('\n');
    let tmp = format!(
        ".{FILE}.cordon-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(dir, tmp.as_str(), flags, Mode::from_bits_truncate(0o644))
        .map_err(|e| write_err(e.into()))?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(write_err)
        .and_then(|()| renameat(dir, tmp.as_str(), dir, FILE).map_err(|e| write_err(e.into())));
    if written.is_err() {
        let _ = nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ws() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn content(ws: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(path(ws)).unwrap()).unwrap()
    }

    #[test]
    fn adds_a_rule_creating_the_file_and_keeps_other_keys() {
        let ws = ws();
        assert!(add_allow(ws.path(), "Bash(make test)").unwrap());
        assert_eq!(
            content(ws.path()),
            json!({"permissions": {"allow": ["Bash(make test)"]}})
        );
        std::fs::write(
            path(ws.path()),
            r#"{"env": {"A": "1"}, "permissions": {"deny": ["Read(.env)"], "allow": ["Read"]}}"#,
        )
        .unwrap();
        assert!(add_allow(ws.path(), "Edit(/src/a.rs)").unwrap());
        assert!(!add_allow(ws.path(), "Edit(/src/a.rs)").unwrap());
        assert_eq!(
            content(ws.path()),
            json!({"env": {"A": "1"}, "permissions": {
                "deny": ["Read(.env)"], "allow": ["Read", "Edit(/src/a.rs)"]}})
        );
    }

    #[test]
    fn removes_a_rule_from_its_list() {
        let ws = ws();
        assert!(!remove(ws.path(), RuleList::Deny, "Read(.env)").unwrap());
        std::fs::create_dir(ws.path().join(".claude")).unwrap();
        std::fs::write(
            path(ws.path()),
            r#"{"permissions": {"deny": ["Read(.env)", "Bash(rm *)"]}}"#,
        )
        .unwrap();
        assert!(remove(ws.path(), RuleList::Deny, "Read(.env)").unwrap());
        assert!(!remove(ws.path(), RuleList::Allow, "Read(.env)").unwrap());
        assert_eq!(
            content(ws.path()),
            json!({"permissions": {"deny": ["Bash(rm *)"]}})
        );
    }

    #[test]
    fn bad_files_are_reported_and_left_alone() {
        let ws = ws();
        std::fs::create_dir(ws.path().join(".claude")).unwrap();
        for bad in ["{not json", "[1]", r#"{"permissions": {"allow": "Read"}}"#] {
            std::fs::write(path(ws.path()), bad).unwrap();
            assert!(add_allow(ws.path(), "Read").is_err(), "{bad}");
            assert_eq!(std::fs::read_to_string(path(ws.path())).unwrap(), bad);
        }
        let names: Vec<_> = std::fs::read_dir(ws.path().join(".claude"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from(FILE)],
            "no temp files left"
        );
    }

    #[test]
    fn planted_links_are_not_followed() {
        let ws = ws();
        let outside = tempfile::tempdir().unwrap();
        // `.claude` a link to a directory outside: refused, nothing written there.
        std::os::unix::fs::symlink(outside.path(), ws.path().join(".claude")).unwrap();
        assert!(add_allow(ws.path(), "Bash").is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // The file a link to a file outside: refused, the target untouched.
        std::fs::remove_file(ws.path().join(".claude")).unwrap();
        std::fs::create_dir(ws.path().join(".claude")).unwrap();
        let target = outside.path().join("victim.json");
        std::fs::write(&target, "{}").unwrap();
        std::os::unix::fs::symlink(&target, path(ws.path())).unwrap();
        assert!(add_allow(ws.path(), "Bash").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");
    }
}
