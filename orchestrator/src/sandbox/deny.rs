//! Deny rules that bind the kernel: `Read(...)` and `Edit(...)` deny rules resolved to
//! absolute paths inside the workspace before the sandbox starts, for
//! [`SandboxSpec::denied_read`](super::SandboxSpec) and `denied_write`. The local backend
//! masks them in the sandbox's mount namespace (`sandbox_agent::launch::denied`).
//!
//! Patterns follow the rules' gitignore-style anchors: `//abs` (filesystem root), `~/`
//! (home), `/x` (the project root of the settings file that holds the rule), `./x` or a
//! bare path with a slash (the workspace); a bare name without a slash (`*.pem`, `.env`)
//! matches at any depth below the workspace. A trailing `/` or `/**` covers the whole
//! directory. Globs (`*`, `?`, `**`, `[...]`) are expanded against the workspace at start,
//! without following symlinks; a matching symlink is replaced by its target when that
//! lies inside the workspace.
//!
//! Limits (the tool-level rules still apply in every case):
//! - files created after the start that match a glob are not covered in the kernel;
//! - only paths inside the workspace are bound (outside it the sandbox sees only system
//!   directories); a rule covering the whole workspace is left to the tool level, and so
//!   is one inside an additional directory (`permissions.additionalDirectories`);
//! - the docker backend applies the same masks as extra mounts in the container spec.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// Most directory entries one glob expansion walks.
const MAX_WALK: usize = 200_000;

/// One deny rule with a path specifier, as settings hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    /// `Read`, `Edit` or `Write`.
    pub tool: String,
    /// The specifier between the parentheses.
    pub pattern: String,
    /// The project root of the settings file the rule came from (for `/x` anchors).
    pub root: PathBuf,
}

impl PathRule {
    /// Parses `Tool(pattern)`; `None` for a bare tool or another tool.
    pub fn parse(rule: &str, root: &Path) -> Option<PathRule> {
        let rule = rule.trim();
        let open = rule.find('(')?;
        let inner = rule[open + 1..].strip_suffix(')')?;
        let tool = rule[..open].trim();
        if !matches!(tool, "Read" | "Edit" | "Write") || inner.trim().is_empty() {
            return None;
        }
        Some(PathRule {
            tool: tool.into(),
            pattern: inner.trim().into(),
            root: root.to_path_buf(),
        })
    }
}

/// The kernel-bound paths of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelDenies {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
}

/// Resolves `rules` against `workspace` (canonical) and `home`.
pub fn resolve(rules: &[PathRule], workspace: &Path, home: Option<&Path>) -> KernelDenies {
    let mut read = BTreeSet::new();
    let mut write = BTreeSet::new();
    for rule in rules {
        let Some(pattern) = absolute_pattern(rule, workspace, home) else {
            continue;
        };
        let is_read = rule.tool == "Read";
        for path in expand(&pattern, workspace) {
            if let Some(p) = inside(&path, workspace, !is_read) {
                if is_read {
                    read.insert(p);
                } else {
                    write.insert(p);
                }
            }
        }
    }
    KernelDenies {
        read: read.into_iter().collect(),
        write: write.into_iter().collect(),
    }
}

/// The rule's pattern as an absolute, lexically normalised pattern.
fn absolute_pattern(rule: &PathRule, workspace: &Path, home: Option<&Path>) -> Option<String> {
    let p = rule.pattern.as_str();
    let (base, rest): (PathBuf, &str) = if let Some(r) = p.strip_prefix("//") {
        (PathBuf::from("/"), r)
    } else if let Some(r) = p.strip_prefix("~/") {
        (home?.to_path_buf(), r)
    } else if let Some(r) = p.strip_prefix('/') {
        (rule.root.clone(), r)
    } else if let Some(r) = p.strip_prefix("./") {
        (workspace.to_path_buf(), r)
    } else if p.trim_end_matches('/').contains('/') {
        (workspace.to_path_buf(), p)
    } else {
        // gitignore: a name without a slash matches at any depth.
        (workspace.join("**"), p)
    };
    let mut rest = rest.to_string();
    if rest.ends_with('/') {
        rest.push_str("**");
    }
    let mut out = PathBuf::new();
    for comp in base.join(&rest).components() {
        match comp {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    Some(out.to_string_lossy().into_owned())
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The existing (or, without globs, possible) paths the pattern names; a directory
/// matched by the pattern stands for everything below it.
fn expand(pattern: &str, workspace: &Path) -> Vec<PathBuf> {
    let comps: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let literal = comps.iter().take_while(|c| !is_glob(c)).count();
    let prefix: PathBuf = std::iter::once("/")
        .chain(comps[..literal].iter().copied())
        .collect();
    let rest = &comps[literal..];
    if rest.is_empty() || rest == ["**"] {
        return vec![prefix];
    }
    let Some(re) = glob_regex(pattern) else {
        return Vec::new();
    };
    let root = if prefix.starts_with(workspace) {
        prefix
    } else if workspace.starts_with(&prefix) {
        workspace.to_path_buf()
    } else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut stack = vec![root];
    let mut walked = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            walked += 1;
            if walked > MAX_WALK {
                tracing::warn!(
                    pattern,
                    "deny pattern expansion stopped after {MAX_WALK} entries"
                );
                return found;
            }
            let path = entry.path();
            let matched = re.is_match(&path.to_string_lossy());
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if matched {
                found.push(path);
            } else if is_dir {
                stack.push(path);
            }
        }
    }
    found
}

/// A glob as an anchored regex over absolute paths: `**/` any directories (or none), `**`
/// anything, `*` and `?` within one component, `[...]` a class.
fn glob_regex(pattern: &str) -> Option<regex::Regex> {
    let mut re = String::from("^");
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    re.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    re.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '[' => {
                let end = chars[i + 1..].iter().position(|c| *c == ']')? + i + 1;
                let mut class: String = chars[i + 1..end].iter().collect();
                if let Some(rest) = class.strip_prefix('!') {
                    class = format!("^{rest}");
                }
                re.push('[');
                re.push_str(&class.replace('\\', "\\\\").replace('[', "\\["));
                re.push(']');
                i = end;
            }
            c => re.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    re.push('$');
    regex::Regex::new(&re).ok()
}

/// `path` as a canonical path strictly inside `workspace`: symlinks resolved (a link's
/// target counts, the link itself does not need masking). A missing path is kept only
/// when `keep_missing` (a write deny blocks its creation), resolved through its deepest
/// existing ancestor.
fn inside(path: &Path, workspace: &Path, keep_missing: bool) -> Option<PathBuf> {
    let resolved = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(_) if std::fs::symlink_metadata(path).is_ok() => return None, // dangling link
        Err(_) if !keep_missing => return None,
        Err(_) => {
            let mut existing = path.to_path_buf();
            let mut tail = Vec::new();
            while std::fs::symlink_metadata(&existing).is_err() {
                tail.push(existing.file_name()?.to_os_string());
                existing = existing.parent()?.to_path_buf();
            }
            let mut p = std::fs::canonicalize(&existing).ok()?;
            p.extend(tail.iter().rev());
            p
        }
    };
    if resolved.starts_with(workspace) && resolved != workspace {
        Some(resolved)
    } else {
        if resolved == workspace {
            tracing::warn!(
                path = %path.display(),
                "a deny rule covering the whole workspace is enforced by the tool-level rules only"
            );
        }
        None
    }
}

/// The `Read`/`Edit`/`Write` deny rules of the merged settings (every source, CLI flags
/// included, after the managed-only locks applied), with the project root each came from.
pub fn rules_from_settings(settings: &crate::settings::Settings) -> Vec<PathRule> {
    settings
        .permissions
        .deny
        .iter()
        .filter_map(|scoped| PathRule::parse(&scoped.origin.rule, &scoped.root))
        .collect()
}

#[cfg(test)]
mod tests;
