//! Git control files pinned at start (`policies/git.json`).
//!
//! The host's git runs what a repository's control files name. So at start, before the
//! sandbox exists, the launcher (or the Docker backend) finds every git dir of the
//! workspace and protects, in each, the entries of the policy's `git_dir` list (config,
//! config.worktree, hooks, commondir) as read-only binds with placeholders, plus what the
//! configuration points at inside the workspace: `core.hooksPath` directories and
//! `include.path` / `includeIf.*.path` files (followed recursively, as git does). Gitdir
//! files (`sub/.git` holding `gitdir: ...`) are protected as they stand, so a submodule
//! cannot be repointed.
//!
//! What it finds:
//! - `.git` directories anywhere in the workspace (a bounded walk that never follows links
//!   and never enters a git dir except its `modules/` and `worktrees/`);
//! - submodule git dirs below `.git/modules/` (nested too) and linked worktrees' git dirs
//!   below `.git/worktrees/`: any directory with a `HEAD` and either `objects` + `refs` or
//!   a `commondir`, git's own test for a git dir.
//!
//! A workspace without `.git` gets no placeholder there: `git init` must work inside. Git
//! dirs made during the session are vetted at teardown ([`super::gitvet`]), which needs to
//! know which git dirs were pinned and when the session began: [`session_entries`] records
//! both in the state dir.

use std::collections::VecDeque;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::LaunchError;
use super::protected::{EntryKind, ProtectedPath};
use crate::hostgit::{self, ConfigEntry};

/// The git policy, compiled in.
pub const POLICY: &str = include_str!("../../../policies/git.json");

/// The record [`session_entries`] writes for [`super::gitvet`].
pub const RECORD: &str = "git-guard.json";

/// How deep git follows includes (its own limit is 10).
const MAX_INCLUDE_DEPTH: usize = 10;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitPolicy {
    pub version: u32,
    pub why: String,
    pub git_dir: Vec<GitDirEntry>,
    pub hook_manager_files: HookManagerFiles,
    pub walk: WalkLimits,
    pub vetted_config: Vec<VettedKey>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitDirEntry {
    pub path: PathBuf,
    pub kind: EntryKind,
    #[serde(default)]
    pub placeholder: Option<String>,
    pub why: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookManagerFiles {
    pub why: String,
    pub paths: Vec<WorkTreeEntry>,
    /// Hooks-path directory names whose parent holds the scripts their shims run.
    pub shim_dirs: Vec<ShimDir>,
}

impl HookManagerFiles {
    /// Where a hooks path `rel` (inside the workspace, normalized) is a shim directory,
    /// the non-empty parent whose scripts its shims run.
    fn scripts_beside<'a>(&self, rel: &'a Path) -> Option<&'a Path> {
        let name = rel.file_name()?;
        self.shim_dirs
            .iter()
            .any(|s| name == s.name.as_str())
            .then(|| rel.parent())
            .flatten()
            .filter(|p| !p.as_os_str().is_empty())
    }
}

/// A hooks path named `name` is a directory of shims that run scripts from its parent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShimDir {
    pub name: String,
    pub why: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkTreeEntry {
    pub path: PathBuf,
    pub kind: EntryKind,
    pub why: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkLimits {
    pub max_dirs: usize,
    pub max_git_dirs: usize,
    pub why: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VettedKey {
    /// `section.name` or `section.*.name` (any subsection), lower-case.
    pub key: String,
    pub why: String,
}

impl VettedKey {
    /// Whether `e` is this key.
    pub fn matches(&self, e: &ConfigEntry) -> bool {
        match self.key.split('.').collect::<Vec<_>>().as_slice() {
            [s, n] => e.subsection.is_none() && e.is(s, n),
            [s, "*", n] => e.subsection.is_some() && e.is(s, n),
            _ => false,
        }
    }
}

fn invalid(why: String) -> LaunchError {
    LaunchError::Config(format!("policies/git.json: {why}"))
}

fn parse_policy() -> Result<GitPolicy, LaunchError> {
    let p: GitPolicy = serde_json::from_str(POLICY).map_err(|e| invalid(e.to_string()))?;
    let whys = p
        .git_dir
        .iter()
        .map(|e| &e.why)
        .chain(p.vetted_config.iter().map(|k| &k.why))
        .chain(p.hook_manager_files.paths.iter().map(|e| &e.why));
    let heads = [&p.why, &p.walk.why, &p.hook_manager_files.why];
    if whys.chain(heads).any(|w| w.trim().is_empty()) {
        return Err(invalid("every entry needs a why".into()));
    }
    let paths = p.git_dir.iter().map(|e| (&e.path, e.kind));
    let more = p.hook_manager_files.paths.iter().map(|e| (&e.path, e.kind));
    for (path, kind) in paths.chain(more) {
        ProtectedPath::new(path, kind).validate()?;
    }
    for k in &p.vetted_config {
        let parts: Vec<&str> = k.key.split('.').collect();
        let ok = matches!(parts.len(), 2 | 3)
            && (parts.len() == 2 || parts[1] == "*")
            && k.key == k.key.to_ascii_lowercase();
        if !ok {
            return Err(invalid(format!("bad vetted key {:?}", k.key)));
        }
    }
    Ok(p)
}

/// The compiled-in policy, parsed once; an invalid policy refuses every start.
pub fn policy() -> Result<&'static GitPolicy, LaunchError> {
    static POLICY_CELL: OnceLock<Result<GitPolicy, String>> = OnceLock::new();
    POLICY_CELL
        .get_or_init(|| parse_policy().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| LaunchError::Config(e.clone()))
}

/// What the start found, relative to the workspace.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Survey {
    /// Git dirs whose control files are pinned.
    pub git_dirs: Vec<PathBuf>,
    /// Gitdir files (`.git` files) protected as they stand.
    pub git_files: Vec<PathBuf>,
    /// Why the survey is incomplete (caps reached), for the log.
    pub notes: Vec<String>,
}

/// Whether `dir` is a git dir by git's own test: a `HEAD`, and `objects` and `refs`
/// directories or a `commondir` naming where they are.
pub fn looks_like_git_dir(dir: &Path) -> bool {
    let meta = |name: &str| std::fs::symlink_metadata(dir.join(name));
    meta("HEAD").is_ok()
        && (meta("commondir").is_ok_and(|m| m.is_file())
            || (meta("objects").is_ok_and(|m| m.is_dir())
                && meta("refs").is_ok_and(|m| m.is_dir())))
}

/// Whether git itself would take `dir` for a git dir: a `HEAD`, and `objects` and `refs`
/// that are directories once links are followed (git tests them with `access`), or a
/// `commondir`. Wider than [`looks_like_git_dir`], which follows no link: every directory that
/// one takes, this takes too.
pub fn git_takes_for_git_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join("HEAD")).is_ok()
        && (std::fs::symlink_metadata(dir.join("commondir")).is_ok()
            || (std::fs::metadata(dir.join("objects")).is_ok_and(|m| m.is_dir())
                && std::fs::metadata(dir.join("refs")).is_ok_and(|m| m.is_dir())))
}

/// Finds the workspace's git dirs and gitdir files (see the module docs). `skip` lists
/// absolute directories not to enter (Cordon's own data when inside the workspace).
pub fn survey(workspace: &Path, limits: &WalkLimits, skip: &[PathBuf]) -> Survey {
    let mut out = Survey::default();
    let mut queue: VecDeque<PathBuf> = VecDeque::from([PathBuf::new()]);
    let mut visited = 0usize;
    while let Some(rel) = queue.pop_front() {
        visited += 1;
        if visited > limits.max_dirs {
            out.notes.push(format!(
                "stopped looking for nested repositories after {} directories",
                limits.max_dirs
            ));
            break;
        }
        let Ok(entries) = std::fs::read_dir(workspace.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            let child = rel.join(entry.file_name());
            if entry.file_name() == ".git" {
                if ft.is_dir() {
                    out.git_dirs.push(child.clone());
                    inner_git_dirs(workspace, &child, &mut out.git_dirs, &mut visited);
                } else if ft.is_file() {
                    out.git_files.push(child);
                }
            } else if ft.is_dir() && !skip.contains(&workspace.join(&child)) {
                queue.push_back(child);
            }
        }
    }
    if out.git_dirs.len() > limits.max_git_dirs {
        out.notes.push(format!(
            "{} git dirs found, the first {} pinned; the rest are vetted at teardown",
            out.git_dirs.len(),
            limits.max_git_dirs
        ));
        out.git_dirs.truncate(limits.max_git_dirs);
    }
    out
}

/// Submodule git dirs below `git_dir/modules` (nested to any depth) and linked worktrees'
/// git dirs below `git_dir/worktrees`.
fn inner_git_dirs(workspace: &Path, git_dir: &Path, found: &mut Vec<PathBuf>, visited: &mut usize) {
    let mut queue: VecDeque<PathBuf> =
        VecDeque::from([git_dir.join("modules"), git_dir.join("worktrees")]);
    while let Some(rel) = queue.pop_front() {
        *visited += 1;
        let Ok(entries) = std::fs::read_dir(workspace.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let child = rel.join(entry.file_name());
            if looks_like_git_dir(&workspace.join(&child)) {
                found.push(child.clone());
                queue.push_back(child.join("modules"));
            } else if rel.starts_with(git_dir.join("modules")) {
                // A submodule named `a/b` lives at modules/a/b.
                queue.push_back(child);
            }
        }
    }
}

/// Lexically resolves `.` and `..`; `None` if it climbs above the root.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    Some(out)
}

/// `path` relative to the workspace, if it lies strictly inside.
fn inside(workspace: &Path, path: &Path) -> Option<PathBuf> {
    let rel = normalize(path)?.strip_prefix(workspace).ok()?.to_path_buf();
    (rel.components().count() > 0).then_some(rel)
}

/// Expands a path value the way git does for `include.path` and `core.hooksPath`: `~/`
/// is the user's home, a relative path is relative to `base`.
fn expand(value: &str, base: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    if let Some(rest) = value.strip_prefix("~/") {
        return Some(home?.join(rest));
    }
    let p = Path::new(value);
    if p.is_absolute() {
        Some(p.to_path_buf())
    } else {
        Some(base?.join(p))
    }
}

/// A configuration file's entries, if it is a regular file git can parse. Anything else
/// (missing, a link, unparsable) names nothing git would run: git dies on a bad config.
fn read_config(path: &Path, workspace: &Path) -> Vec<ConfigEntry> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Vec::new();
    };
    if !meta.is_file() || meta.len() > hostgit::MAX_CONFIG_BYTES as u64 {
        return Vec::new();
    }
    match std::fs::read(path).map(|t| hostgit::list_config(&t, workspace)) {
        Ok(Ok(entries)) => entries,
        Ok(Err(e)) => {
            tracing::debug!(path = %path.display(), error = %e, "config not parsed");
            Vec::new()
        }
        Err(_) => Vec::new(),
    }
}

/// The chain of configuration files starting at `file` (includes followed, as git does)
/// and every `core.hooksPath` value in it.
#[derive(Debug, Default)]
struct Chain {
    files: Vec<PathBuf>,
    hooks_paths: Vec<String>,
}

/// Where to look for the user's home and which tree is untrusted, for [`follow`].
struct Ctx<'a> {
    home: Option<&'a Path>,
    workspace: &'a Path,
}

fn follow(file: &Path, ctx: &Ctx, depth: usize, chain: &mut Chain) {
    if depth > MAX_INCLUDE_DEPTH || chain.files.iter().any(|f| f == file) {
        return;
    }
    chain.files.push(file.to_path_buf());
    for e in read_config(file, ctx.workspace) {
        let Some(value) = e.value.as_deref() else {
            continue;
        };
        if e.is("core", "hookspath") {
            chain.hooks_paths.push(value.to_string());
        } else if (e.section == "include" || e.section == "includeif") && e.name == "path" {
            // Every include is followed whatever its condition: over-protecting costs a
            // bind, under-protecting a planted config.
            if let Some(next) = expand(value, file.parent(), ctx.home).and_then(|p| normalize(&p)) {
                follow(&next, ctx, depth + 1, chain);
            }
        }
    }
}

/// The user-level configuration files the host's git reads (system, global, XDG).
fn user_configs(home: Option<&Path>) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("/etc/gitconfig")];
    if let Some(global) = std::env::var_os("GIT_CONFIG_GLOBAL") {
        files.push(PathBuf::from(global));
    }
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".config")));
    if let Some(xdg) = xdg {
        files.push(xdg.join("git/config"));
    }
    if let Some(home) = home {
        files.push(home.join(".gitconfig"));
    }
    files
}

/// Whether `dir` holds a hook git would run (anything but the `*.sample` files).
fn has_hooks(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| !e.file_name().to_string_lossy().ends_with(".sample"))
    })
}

/// The directory hooks run in for the git dir `git_dir` (absolute): the top of its work
/// tree, when that can be told.
fn work_tree_of(git_dir: &Path, config: &[ConfigEntry]) -> Option<PathBuf> {
    if git_dir.file_name().is_some_and(|n| n == ".git") {
        return git_dir.parent().map(Path::to_path_buf);
    }
    let wt = config.iter().rev().find(|e| e.is("core", "worktree"))?;
    normalize(&git_dir.join(wt.value.as_deref()?))
}

/// Everything to protect for the survey: the policy's entries in each git dir, gitdir
/// files, and hook directories and included files inside the workspace.
pub fn entries(workspace: &Path, survey: &Survey, policy: &GitPolicy) -> Vec<ProtectedPath> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let home = home.as_deref();
    let mut out: Vec<ProtectedPath> = survey
        .git_files
        .iter()
        .map(|f| ProtectedPath::new(f, EntryKind::File))
        .collect();
    if survey.git_dirs.is_empty() {
        // No repository: nothing reads a hooks path or an include (and no git runs here).
        return out;
    }
    // Relative hook paths from the user's own configuration apply to every work tree.
    let ctx = Ctx { home, workspace };
    let mut user = Chain::default();
    for file in user_configs(home) {
        follow(&file, &ctx, 0, &mut user);
    }
    for rel in &survey.git_dirs {
        for e in &policy.git_dir {
            out.push(ProtectedPath {
                path: rel.join(&e.path),
                kind: e.kind,
                placeholder: e.placeholder.clone(),
            });
        }
        let git_dir = workspace.join(rel);
        let mut chain = Chain::default();
        for name in ["config", "config.worktree"] {
            follow(&git_dir.join(name), &ctx, 0, &mut chain);
        }
        let work_tree = work_tree_of(&git_dir, &read_config(&git_dir.join("config"), workspace));
        for file in chain.files.iter().skip(1) {
            if let Some(rel) = inside(workspace, file) {
                out.push(ProtectedPath::new(rel, EntryKind::File));
            }
        }
        let mut hook_dirs = vec![git_dir.join("hooks")];
        for value in chain.hooks_paths.iter().chain(&user.hooks_paths) {
            let Some(dir) = expand(value, work_tree.as_deref(), home) else {
                continue;
            };
            if let Some(rel) = inside(workspace, &dir) {
                // A shim directory's hooks run what lies beside it (`husky <dir>` makes
                // `<dir>/_` the hooks path, whose shims run `<dir>/pre-commit`): its
                // parent is as much the hooks as the path itself.
                if let Some(scripts) = policy.hook_manager_files.scripts_beside(&rel) {
                    out.push(ProtectedPath::new(scripts.to_path_buf(), EntryKind::Dir));
                }
                out.push(ProtectedPath::new(rel, EntryKind::Dir));
            }
            hook_dirs.push(dir);
        }
        let runs_hooks = hook_dirs.iter().any(|d| has_hooks(d));
        if let Some(wt) = work_tree.as_deref().and_then(normalize) {
            for e in &policy.hook_manager_files.paths {
                let path = wt.join(&e.path);
                let exists = std::fs::symlink_metadata(&path).is_ok();
                if let Some(rel) = inside(workspace, &path).filter(|_| runs_hooks || exists) {
                    out.push(ProtectedPath::new(rel, e.kind));
                }
            }
        }
    }
    // Files included by the user's own configuration that lie in the workspace.
    for file in &user.files {
        if let Some(rel) = inside(workspace, file) {
            out.push(ProtectedPath::new(rel, EntryKind::File));
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    out
}

/// [`entries`] of the one git dir `git_dir` (relative to the workspace): what the start
/// would have pinned for it, for the teardown's vetting of one it did not reach.
pub fn entries_for(workspace: &Path, git_dir: &Path, policy: &GitPolicy) -> Vec<ProtectedPath> {
    let survey = Survey {
        git_dirs: vec![git_dir.to_path_buf()],
        ..Survey::default()
    };
    entries(workspace, &survey, policy)
}

/// What [`super::gitvet`] needs at teardown.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GuardRecord {
    pub workspace: PathBuf,
    /// When the session began (seconds, nanoseconds since the epoch), taken before any
    /// placeholder or sandbox existed.
    pub started: (i64, i64),
    /// The git dirs pinned at start (absolute): their control files could not change.
    pub git_dirs: Vec<PathBuf>,
}

/// Surveys the workspace, records what teardown needs in `state_dir`, and returns the
/// entries to protect. Used by both backends.
pub fn session_entries(
    workspace: &Path,
    state_dir: &Path,
    skip: &[PathBuf],
) -> Result<Vec<ProtectedPath>, LaunchError> {
    let policy = policy()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| LaunchError::Config(format!("reading the clock: {e}")))?;
    let survey = survey(workspace, &policy.walk, skip);
    for note in &survey.notes {
        tracing::warn!(workspace = %workspace.display(), "{note}");
    }
    let record = GuardRecord {
        workspace: workspace.to_path_buf(),
        started: (
            i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
            i64::from(now.subsec_nanos()),
        ),
        git_dirs: survey.git_dirs.iter().map(|d| workspace.join(d)).collect(),
    };
    let path = state_dir.join(RECORD);
    let text = serde_json::to_vec(&record).map_err(|e| LaunchError::State {
        path: path.clone(),
        source: e.into(),
    })?;
    std::fs::write(&path, text).map_err(|source| LaunchError::State { path, source })?;
    Ok(entries(workspace, &survey, policy))
}

#[cfg(test)]
pub(crate) mod tests;
