//! Git dirs made or changed during a session, vetted at teardown.
//!
//! A git dir that existed at start had its control files pinned read-only
//! ([`super::gitguard`]). Any other one (a `git init` in a workspace without a repository,
//! a `git clone`, a hand-made bare-looking directory, a `.git/modules/x` added for a fake
//! submodule, a nested repository the start's walk did not reach) is vetted once the
//! sandbox is gone and before the session ends, by a walk that never follows links. A
//! directory is a git dir here when git would take it for one, or when it is named `.git`
//! at all (a host `git init` there later keeps the hooks and config it finds):
//!
//! - `config` and `config.worktree` written during the session keep only the keys of the
//!   policy's `vetted_config` allow-list (a link or a non-file there is removed);
//! - every hook made during the session that is not a `*.sample` file is moved out of
//!   `hooks/` (a linked `hooks` is removed);
//! - a `commondir` made during the session is kept only when it names a git dir inside the
//!   workspace (which this walk vets or the start pinned);
//! - a link made during the session inside any git dir's `worktrees/` or `modules/`
//!   (pinned ones too) is moved out: git's worktree prune, run by automatic maintenance
//!   at a later host `git commit`, removes a stale worktree entry recursively and would
//!   delete whatever a link there names;
//! - an unfinished rebase or cherry-pick whose to-do list was written during the session
//!   and runs commands (`exec` lines, which a host `git rebase --continue` would run) is
//!   moved out;
//! - a `.git` file (`gitdir: PATH`) or link made during the session has the git dir it
//!   names vetted when that lies inside the workspace, and is itself moved aside
//!   (`.git.cordon-quarantine-<time>`) when it names anything else: the host's git would
//!   otherwise read a configuration this walk never saw (a submodule's status runs in it).
//!
//! A directory counts as a git dir by git's own test, which follows links (`objects` may
//! be a link to another repository's), as well as by the stricter start-time one.
//!
//! A directory the session made unlistable is vetted all the same: git opens `config`,
//! `HEAD` and `hooks/<name>` by path, so a `.git` (or `hooks/`) of mode 311 still works
//! for the host's git while a walk that skipped what it cannot list would never see it.
//! The session runs as the user, so such a directory is the user's own: it is given its
//! owner's read, write and search back ([`list`]); a `.git` still unlistable is vetted
//! through the paths git reads.
//!
//! Nothing is lost: what is removed goes to `cordon-quarantine-<time>/` inside that git
//! dir (git never reads it) with a `removed.txt` saying what and why, and the same lines
//! are logged. "During the session" is told by the inode change time, which no process can
//! set back: a file whose ctime is before the session's start (less a second of clock
//! granularity) was neither written, renamed nor linked since, so a user's untouched
//! repository is never rewritten even when the start did not reach it.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::gitguard::{self, GitPolicy, GuardRecord};
use crate::hostgit::{self, ConfigEntry};

/// Clock granularity allowance: file times come from a coarse clock.
const SLACK_SECS: i64 = 1;

/// One thing the vetting changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    pub what: String,
}

/// Vets the workspace recorded in `state_dir` (see the module docs), when the record
/// names `workspace`, the session's own (see [`check_record`]). A missing, damaged or
/// mismatched record vets nothing. Call only once no sandboxed process runs. The record
/// is removed either way, so a second call (teardown, then cleanup) is free.
pub fn vet_session(state_dir: &Path, workspace: &Path) -> Vec<Finding> {
    match take_record(state_dir) {
        Some(record) => vet_recorded(&record, workspace),
        None => Vec::new(),
    }
}

/// Takes the record out of `state_dir` (for a caller that must vet later, after the state
/// dir is gone).
pub fn take_record(state_dir: &Path) -> Option<GuardRecord> {
    let path = state_dir.join(gitguard::RECORD);
    let record = std::fs::read(&path)
        .ok()
        .and_then(|t| serde_json::from_slice::<GuardRecord>(&t).ok());
    let _ = std::fs::remove_file(&path);
    record
}

/// Why a git record is not acted on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the session's workspace {0} is not an absolute, canonical directory other than /")]
    Workspace(PathBuf),
    #[error("the record names the workspace {recorded}, not the session's {session}")]
    OtherWorkspace { recorded: PathBuf, session: PathBuf },
    #[error("the record pins {0}, which is not inside the workspace")]
    PinnedOutside(PathBuf),
}

/// Cross-checks a record read from run state against the workspace the session itself
/// recorded (its launch config, its container record): the vetting rewrites and moves
/// files, so it acts only on the session's own workspace, canonical (no link on its way)
/// and not `/`, and only with pinned git dirs strictly inside it (a pinned dir is skipped
/// by the vetting, so one outside could only be a tampered record).
pub fn check_record(record: &GuardRecord, workspace: &Path) -> Result<(), RecordError> {
    let canonical = std::fs::canonicalize(workspace).ok();
    if !workspace.is_absolute()
        || workspace == Path::new("/")
        || canonical.as_deref() != Some(workspace)
        || !workspace.is_dir()
    {
        return Err(RecordError::Workspace(workspace.to_path_buf()));
    }
    if record.workspace != workspace {
        return Err(RecordError::OtherWorkspace {
            recorded: record.workspace.clone(),
            session: workspace.to_path_buf(),
        });
    }
    let inside = |p: &Path| {
        p.strip_prefix(workspace).is_ok_and(|rel| {
            rel.components().next().is_some()
                && rel
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
        })
    };
    match record.git_dirs.iter().find(|d| !inside(d)) {
        Some(out) => Err(RecordError::PinnedOutside(out.clone())),
        None => Ok(()),
    }
}

/// Vets what `record` describes, once [`check_record`] accepts it for the session's
/// `workspace`; otherwise logs why and vets nothing.
pub fn vet_recorded(record: &GuardRecord, workspace: &Path) -> Vec<Finding> {
    if let Err(e) = check_record(record, workspace) {
        tracing::warn!(workspace = %workspace.display(), "git vetting skipped: {e}");
        return Vec::new();
    }
    let Ok(policy) = gitguard::policy() else {
        return Vec::new();
    };
    let findings = vet(record, policy);
    for f in &findings {
        tracing::warn!(path = %f.path.display(), "git vetting: {}", f.what);
    }
    findings
}

/// Walks the workspace and vets each git dir not pinned at start.
pub fn vet(record: &GuardRecord, policy: &GitPolicy) -> Vec<Finding> {
    let since = (record.started.0 - SLACK_SECS, record.started.1);
    let mut findings = Vec::new();
    // Every git dir met (pinned ones too: their `worktrees/` and `modules/` stay
    // writable), and the `.git` entries that are not directories.
    let mut git_dirs = Vec::new();
    let mut git_files = Vec::new();
    let mut queue = VecDeque::from([record.workspace.clone()]);
    // No cap: a session must not be able to pad the tree past one and leave a git dir
    // unvetted (the privilege-bit sweep walks the whole tree too). One listing per
    // directory; a directory is stat'ed further only when its names look like a git dir.
    while let Some(dir) = queue.pop_front() {
        // A `.git` directory is vetted whatever its shape: a host `git init` there later
        // keeps the hooks and configuration it finds.
        let named = dir.file_name().is_some_and(|n| n == ".git");
        let Ok(entries) = list(&dir) else {
            // Security: git needs no listing to use a git dir (it opens its files by
            // path), so one this walk cannot list is vetted through the same paths.
            if named || gitguard::git_takes_for_git_dir(&dir) {
                git_dirs.push(dir);
            }
            continue;
        };
        let mut names = GitNames::default();
        for entry in entries.flatten() {
            let name = entry.file_name();
            names.see(&name);
            match entry.file_type() {
                Ok(t) if t.is_dir() => queue.push_back(entry.path()),
                Ok(_) if name == ".git" => git_files.push(entry.path()),
                _ => {}
            }
        }
        if named || (names.may_be_git_dir() && gitguard::git_takes_for_git_dir(&dir)) {
            git_dirs.push(dir);
        }
    }
    for file in &git_files {
        match gitdir_target(file, since, &record.workspace) {
            GitFile::Untouched => {}
            GitFile::Inside(dir) if !git_dirs.contains(&dir) => git_dirs.push(dir),
            GitFile::Inside(_) => {}
            GitFile::Elsewhere(why) => findings.extend(set_aside(file, &why, since)),
        }
    }
    for dir in &git_dirs {
        let mut v = Vetting {
            dir,
            since,
            policy,
            workspace: &record.workspace,
            removed: Vec::new(),
        };
        if !record.git_dirs.contains(dir) {
            v.config("config");
            v.config("config.worktree");
            v.hooks();
            v.commondir();
            // What its configuration points at outside it was not pinned either (a
            // nested repository past the start's survey caps).
            v.pointed_at();
        }
        // In every git dir, pinned or not (refs and info stay writable): objects the
        // host's git would show in place of others.
        v.replace_refs();
        v.grafts();
        v.links_in("worktrees", false);
        v.links_in("modules", true);
        v.sequencer_exec("rebase-merge", "git-rebase-todo");
        v.sequencer_exec("sequencer", "todo");
        findings.extend(v.finish());
    }
    findings
}

/// What a `.git` entry that is not a directory (a gitdir file, or a link) leads to.
#[derive(Debug, PartialEq, Eq)]
enum GitFile {
    /// Not written, renamed or linked during the session: as the start found it.
    Untouched,
    /// Made during the session and naming this directory inside the workspace.
    Inside(PathBuf),
    /// Made during the session and naming something else (why, for the finding).
    Elsewhere(String),
}

/// Where the `.git` entry `file` points, if it changed during the session.
fn gitdir_target(file: &Path, since: (i64, i64), workspace: &Path) -> GitFile {
    let Ok(meta) = std::fs::symlink_metadata(file) else {
        return GitFile::Untouched;
    };
    if !changed_since(&meta, since) {
        return GitFile::Untouched;
    }
    let Some(parent) = file.parent() else {
        return GitFile::Elsewhere("no parent directory".into());
    };
    let named = if meta.file_type().is_symlink() {
        Some(file.to_path_buf())
    } else if meta.is_file() {
        read_nofollow(file).and_then(|text| {
            let text = String::from_utf8(text).ok()?;
            let path = text.strip_prefix("gitdir:")?.trim();
            (!path.is_empty()).then(|| parent.join(path))
        })
    } else {
        None
    };
    let Some(named) = named else {
        return GitFile::Elsewhere("a .git entry that names no git dir".into());
    };
    // Resolved as git resolves it (following links), then held to the workspace. The
    // path is the session's text: quoted and escaped (`{:?}`) in the finding, which is
    // logged and may be shown on a terminal.
    match std::fs::canonicalize(&named) {
        Ok(real) if real.starts_with(workspace) && real != workspace && real.is_dir() => {
            GitFile::Inside(real)
        }
        Ok(real) => GitFile::Elsewhere(format!(
            "names {real:?}, not a directory inside the workspace"
        )),
        Err(e) => GitFile::Elsewhere(format!("names {named:?}: {e}")),
    }
}

/// Moves a `.git` file or link made during the session aside, beside itself (git looks
/// for `.git` only), or removes it when that cannot be done.
fn set_aside(file: &Path, why: &str, since: (i64, i64)) -> Vec<Finding> {
    let stamp = since.0 + SLACK_SECS;
    let aside = file.with_file_name(format!(".git.cordon-quarantine-{stamp}"));
    // rename(2) moves the entry itself, never what a link names; an existing name at
    // `aside` (a second such entry in one directory) is never overwritten.
    let moved = std::fs::symlink_metadata(&aside).is_err() && std::fs::rename(file, &aside).is_ok();
    if !moved {
        let _ = std::fs::remove_file(file);
    }
    vec![Finding {
        path: file.to_path_buf(),
        what: format!(
            "a .git entry made during the session {why}: {}",
            if moved { "moved aside" } else { "removed" }
        ),
    }]
}

fn changed_since(meta: &std::fs::Metadata, since: (i64, i64)) -> bool {
    (meta.ctime(), meta.ctime_nsec()) >= since
}

/// The names of a directory's entries that make git take it for a git dir.
#[derive(Debug, Default)]
struct GitNames {
    head: bool,
    objects: bool,
    refs: bool,
    commondir: bool,
}

impl GitNames {
    fn see(&mut self, name: &std::ffi::OsStr) {
        match name.as_encoded_bytes() {
            b"HEAD" => self.head = true,
            b"objects" => self.objects = true,
            b"refs" => self.refs = true,
            b"commondir" => self.commondir = true,
            _ => {}
        }
    }

    /// Whether [`gitguard::git_takes_for_git_dir`] could say yes (it needs these names).
    fn may_be_git_dir(&self) -> bool {
        self.head && (self.commondir || (self.objects && self.refs))
    }
}

/// One thing the vetting takes out of place.
struct Removed {
    /// Its name in the quarantine (the name in the git dir, or `outside/` and its path in
    /// the workspace for what the configuration points at).
    name: String,
    /// Where it is.
    from: PathBuf,
    why: String,
    /// The original text of a rewritten file, kept in the quarantine.
    original: Option<Vec<u8>>,
}

/// The vetting of one git dir; what it removes is collected, then quarantined.
struct Vetting<'a> {
    dir: &'a Path,
    since: (i64, i64),
    policy: &'a GitPolicy,
    workspace: &'a Path,
    removed: Vec<Removed>,
}

impl Vetting<'_> {
    fn meta(&self, name: &str) -> Option<std::fs::Metadata> {
        std::fs::symlink_metadata(self.dir.join(name)).ok()
    }

    /// A configuration written during the session keeps only allow-listed keys.
    fn config(&mut self, name: &str) {
        let Some(meta) = self.meta(name) else { return };
        if !changed_since(&meta, self.since) {
            return;
        }
        if !meta.is_file() {
            self.take(name, "not a regular file");
            return;
        }
        let text = read_nofollow(&self.dir.join(name)).unwrap_or_default();
        let entries = match hostgit::list_config(&text, self.workspace) {
            Ok(entries) => entries,
            Err(e) => {
                self.replace(name, text, String::new(), &format!("unreadable: {e}"));
                return;
            }
        };
        let (kept, dropped): (Vec<ConfigEntry>, Vec<ConfigEntry>) =
            entries.into_iter().partition(|e| self.allowed(e));
        if dropped.is_empty() {
            return;
        }
        let keys: Vec<String> = dropped.iter().map(key_of).collect();
        let why = format!("dropped {}", keys.join(", "));
        self.replace(name, text, hostgit::render_config(&kept), &why);
    }

    fn allowed(&self, e: &ConfigEntry) -> bool {
        let listed = self.policy.vetted_config.iter().any(|k| k.matches(e));
        // A transport that runs a command, or a value git could take for an option.
        let url = matches!(e.name.as_str(), "url" | "pushurl");
        let bad_url = e.value.as_deref().is_some_and(|v| {
            let v = v.trim_start().to_ascii_lowercase();
            v.starts_with("ext::") || v.starts_with("fd::") || v.starts_with('-')
        });
        listed && !(url && bad_url)
    }

    /// Hooks made during the session, other than samples, leave `hooks/`.
    fn hooks(&mut self) {
        let Some(meta) = self.meta("hooks") else {
            return;
        };
        if !meta.is_dir() {
            if changed_since(&meta, self.since) {
                self.take("hooks", "not a directory");
            }
            return;
        }
        // A hooks dir made or moved here during the session: every entry counts.
        let all = changed_since(&meta, self.since);
        let Ok(entries) = list(&self.dir.join("hooks")) else {
            // Security: git runs a hook by its path, listing or not; a hooks dir changed
            // during the session (a chmod counts) that still cannot be listed goes whole.
            if all {
                self.take("hooks", "a hooks directory that cannot be listed");
            }
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(m) = entry.metadata() else { continue };
            let sample = name.ends_with(".sample") && m.is_file();
            if !sample && (all || changed_since(&m, self.since)) {
                self.take(&format!("hooks/{name}"), "a hook made during the session");
            }
        }
    }

    /// A `commondir` made during the session must name a git dir in the workspace.
    fn commondir(&mut self) {
        let Some(meta) = self.meta("commondir") else {
            return;
        };
        if !changed_since(&meta, self.since) {
            return;
        }
        let ok = meta.is_file()
            && read_nofollow(&self.dir.join("commondir")).is_some_and(|t| {
                let t = String::from_utf8_lossy(&t);
                let target = self.dir.join(t.trim_end_matches(['\n', '\r']));
                std::fs::canonicalize(&target).is_ok_and(|real| {
                    real.starts_with(self.workspace) && gitguard::looks_like_git_dir(&real)
                })
            });
        if !ok {
            self.take("commondir", "names no git dir inside the workspace");
        }
    }

    /// Links made during the session in `sub` (`worktrees/<id>`, or on the way to a
    /// submodule's git dir below `modules/` when `deep`: submodule names nest) leave the
    /// git dir. Security: git's
    /// worktree prune removes a stale entry there recursively, opening it as a directory
    /// without looking at what it is, so a link to a directory outside the workspace would
    /// have a later host `git commit` (its automatic maintenance) or `git gc` empty it.
    fn links_in(&mut self, sub: &str, deep: bool) {
        let why = "a link made during the session (git's prune would delete through it)";
        // Security: the root is walked where it really is, and only inside the workspace
        // (git follows a link there; a walk through one to elsewhere would act on links
        // anywhere it leads). A link to elsewhere made during the session is taken.
        let Some(root) = self.resolved_inside(sub) else {
            if self
                .meta(sub)
                .is_some_and(|m| m.file_type().is_symlink() && changed_since(&m, self.since))
            {
                self.take(sub, why);
            }
            return;
        };
        // A submodule's own git dir is vetted as one (its `objects` may rightly be a
        // link); only the names leading to it are walked here.
        let descend = |m: &std::fs::Metadata, p: &Path| {
            deep && m.is_dir() && !gitguard::git_takes_for_git_dir(p)
        };
        for (path, label, meta) in entries_below(root, PathBuf::from(sub), descend) {
            if meta.file_type().is_symlink() && changed_since(&meta, self.since) {
                self.take_path(&path, &label.to_string_lossy(), why);
            }
        }
    }

    /// Where git finds `name` of this git dir (links followed, as git follows them), when
    /// that is a directory inside the workspace: the only place a session could have
    /// written to. Walked from there on without following a link.
    fn resolved_inside(&self, name: &str) -> Option<PathBuf> {
        let real = std::fs::canonicalize(self.dir.join(name)).ok()?;
        (real.starts_with(self.workspace) && real.is_dir()).then_some(real)
    }

    /// An unfinished rebase's (or cherry-pick's) state whose to-do list was written during
    /// the session and holds an `exec` line leaves the git dir. Security: the host's `git
    /// status` tells the user to run `git rebase --continue`, which runs those lines on
    /// the host. A to-do list without one is left as it is (a rebase stopped at a conflict
    /// stays the user's to finish).
    fn sequencer_exec(&mut self, state: &str, todo: &str) {
        let path = format!("{state}/{todo}");
        let Some(meta) = self.meta(&path) else { return };
        if !changed_since(&meta, self.since) {
            return;
        }
        let runs = read_nofollow(&self.dir.join(&path)).is_none_or(|text| {
            String::from_utf8_lossy(&text)
                .lines()
                .any(|line| matches!(line.split_whitespace().next(), Some("exec" | "x")))
        });
        if runs {
            self.take(
                state,
                "an unfinished rebase whose to-do list, written during the session, runs commands",
            );
        }
    }

    /// What this git dir's configuration points at inside the workspace but outside the
    /// git dir (hook directories, included files, hook managers' lists: what the start
    /// pins for a git dir it reaches), as written during the session, leaves its place:
    /// a file changed since the start, or each entry of a hook directory that was.
    fn pointed_at(&mut self) {
        let Ok(rel) = self.dir.strip_prefix(self.workspace) else {
            return;
        };
        for p in gitguard::entries_for(self.workspace, rel, self.policy) {
            let path = self.workspace.join(&p.path);
            // Security: the configuration (a repository's own, from before the session) and
            // the tree are the repository's: a link on the way (`u -> ../..`) would have
            // the moves below act on host files outside the workspace. Only what is
            // reached through real directories is looked at.
            if path.starts_with(self.dir) || !no_link_on_the_way(self.workspace, &p.path) {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let label = format!("outside/{}", p.path.display());
            if !meta.is_dir() {
                if changed_since(&meta, self.since) {
                    self.take_path(
                        &path,
                        &label,
                        "written during the session where this git dir's configuration points",
                    );
                }
                continue;
            }
            // A directory changes with every entry made in it: its entries are told apart.
            let Ok(entries) = list(&path) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(m) = entry.metadata() else { continue };
                let name = entry.file_name().to_string_lossy().into_owned();
                let sample = name.ends_with(".sample") && m.is_file();
                if !sample && changed_since(&m, self.since) {
                    self.take_path(
                        &entry.path(),
                        &format!("{label}/{name}"),
                        "a hook made during the session in this git dir's hook directory",
                    );
                }
            }
        }
    }

    /// Replace refs written during the session leave `refs/replace/`, and so do their
    /// lines in a `packed-refs` written during the session. Security: the host's git shows
    /// a replaced object's replacement instead (another history, tree or content than the
    /// one it would push), and the user never asked for it.
    fn replace_refs(&mut self) {
        // Looked for where git finds them (a submodule's `refs` may rightly be a link),
        // only inside the workspace, and never through a link from there on.
        if let Some(root) = self.resolved_inside("refs/replace") {
            // A directory made during the session goes whole, with whatever it holds.
            let since = self.since;
            let descend = |m: &std::fs::Metadata, _: &Path| m.is_dir() && !changed_since(m, since);
            for (path, label, m) in entries_below(root, PathBuf::from("refs/replace"), descend) {
                if !changed_since(&m, since) {
                    continue;
                }
                let why = if m.is_dir() {
                    "replace refs made during the session"
                } else {
                    "a replace ref made during the session"
                };
                self.take_path(&path, &label.to_string_lossy(), why);
            }
        }
        self.packed_replace_refs();
    }

    /// Replace refs in a `packed-refs` written during the session (see [`Self::replace_refs`]).
    fn packed_replace_refs(&mut self) {
        let Some(meta) = self.meta("packed-refs") else {
            return;
        };
        if !meta.is_file() || !changed_since(&meta, self.since) {
            return;
        }
        let Some(text) = read_nofollow(&self.dir.join("packed-refs")) else {
            return;
        };
        let mut kept = String::new();
        let mut dropped = 0usize;
        let mut after_replace = false;
        for line in String::from_utf8_lossy(&text).split_inclusive('\n') {
            // A `^` line peels the ref above it: it goes with it.
            let peel = line.starts_with('^');
            let replace = if peel {
                after_replace
            } else {
                line.split_whitespace()
                    .nth(1)
                    .is_some_and(|r| r.starts_with("refs/replace/"))
            };
            if !peel {
                after_replace = replace;
            }
            if replace {
                dropped += 1;
            } else {
                kept.push_str(line);
            }
        }
        if dropped > 0 {
            self.replace(
                "packed-refs",
                text,
                kept,
                "dropped replace refs written during the session",
            );
        }
    }

    /// An `info/grafts` written during the session leaves it: git (still) reads it to give
    /// commits other parents than they have.
    fn grafts(&mut self) {
        if self
            .meta("info/grafts")
            .is_some_and(|m| changed_since(&m, self.since))
        {
            self.take("info/grafts", "grafts written during the session");
        }
    }

    /// Records `path` (outside the git dir, or reached through a link git follows) for
    /// removal, kept in the quarantine as `name`.
    fn take_path(&mut self, path: &Path, name: &str, why: &str) {
        self.removed.push(Removed {
            name: name.to_string(),
            from: path.to_path_buf(),
            why: why.to_string(),
            original: None,
        });
    }

    /// Records `name` for removal (moved to quarantine in [`Self::finish`]).
    fn take(&mut self, name: &str, why: &str) {
        self.removed.push(Removed {
            name: name.to_string(),
            from: self.dir.join(name),
            why: why.to_string(),
            original: None,
        });
    }

    /// Rewrites `name` to `new`, keeping the original for the quarantine.
    fn replace(&mut self, name: &str, original: Vec<u8>, new: String, why: &str) {
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!(".{name}.cordon-vet"));
        let _ = std::fs::remove_file(&tmp);
        let owner = self.meta(name).map(|m| (m.uid(), m.gid()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(new.as_bytes())?;
                // The rewritten file keeps the owner of the one it replaces.
                match owner {
                    Some((uid, gid)) => std::os::unix::fs::fchown(&f, Some(uid), Some(gid)),
                    None => Ok(()),
                }
            })
            .and_then(|()| std::fs::rename(&tmp, &path));
        match written {
            Ok(()) => self.removed.push(Removed {
                name: name.to_string(),
                from: path,
                why: why.to_string(),
                original: Some(original),
            }),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                self.take(name, &format!("{why} (rewriting failed: {e})"));
            }
        }
    }

    /// Moves what was taken into a fresh quarantine dir (deleting it if that cannot be
    /// made) and writes the list of what was removed.
    fn finish(self) -> Vec<Finding> {
        if self.removed.is_empty() {
            return Vec::new();
        }
        // Without a quarantine (none could be made) what is taken is removed rather than
        // left in place.
        let q = fresh_quarantine(self.dir, self.since.0 + SLACK_SECS).unwrap_or_default();
        let have_q = !q.as_os_str().is_empty() && std::fs::create_dir(q.join("hooks")).is_ok();
        let mut report = String::new();
        let mut findings = Vec::new();
        for Removed {
            name,
            from,
            why,
            original,
        } in &self.removed
        {
            let kept = have_q && keep(from, &q.join(name), original.as_deref());
            if original.is_none() && !kept {
                remove_any(from);
            }
            report.push_str(&format!("{name}: {why}\n"));
            findings.push(Finding {
                path: from.clone(),
                what: why.clone(),
            });
        }
        if have_q {
            let _ = std::fs::write(q.join("removed.txt"), report);
            // The quarantine belongs to whoever owns the git dir, so the user can read it.
            if let Ok(m) = std::fs::symlink_metadata(self.dir) {
                chown_tree(&q, m.uid(), m.gid());
            }
        }
        findings
    }
}

/// Every entry below the directory `root` (its path, its `label` joined with its name, and
/// its metadata, never following a link), entering the directories `descend` takes.
fn entries_below(
    root: PathBuf,
    label: PathBuf,
    descend: impl Fn(&std::fs::Metadata, &Path) -> bool,
) -> Vec<(PathBuf, PathBuf, std::fs::Metadata)> {
    let mut found = Vec::new();
    let mut queue = VecDeque::from([(root, label)]);
    while let Some((dir, label)) = queue.pop_front() {
        let Ok(entries) = list(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let (path, child) = (entry.path(), label.join(entry.file_name()));
            if descend(&meta, &path) {
                queue.push_back((path.clone(), child.clone()));
            }
            found.push((path, child, meta));
        }
    }
    found
}

/// Lists the directory `dir` (reached through real directories only), first giving its
/// owner read, write and search back when this process owns it but may not list or search
/// it (see the module docs).
///
/// Security: the session runs as the user, so it could chmod its own directory just as
/// well, and the owner may at will: nothing new is granted, and a directory another user
/// owns is never changed. The chmod goes by path, which follows a final link: `dir` is
/// stat'ed without following just before and must be a directory, and vetting runs only
/// once no sandboxed process is left ([`vet_session`]) to swap it in between.
fn list(dir: &Path) -> std::io::Result<std::fs::ReadDir> {
    use nix::unistd::AccessFlags;
    let refused = nix::unistd::eaccess(dir, AccessFlags::R_OK | AccessFlags::X_OK)
        == Err(nix::errno::Errno::EACCES);
    if refused
        && let Ok(m) = std::fs::symlink_metadata(dir)
        && m.is_dir()
        && m.uid() == nix::unistd::geteuid().as_raw()
    {
        let mode = (m.mode() | 0o700) & 0o7777;
        match std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)) {
            Ok(()) => tracing::warn!(
                dir = %dir.display(), mode = format_args!("{:04o}", m.mode() & 0o7777),
                "git vetting: a directory of the user's could not be listed (a session, \
                 which runs as the user, may have made it so): its owner's read, write \
                 and search are given back so that it is vetted"
            ),
            Err(e) => tracing::warn!(
                dir = %dir.display(), error = %e,
                "git vetting could not make a directory listable"
            ),
        }
    }
    std::fs::read_dir(dir)
}

/// A quarantine dir made fresh in `git_dir` (mode 0700): `cordon-quarantine-<stamp>`, or
/// with a suffix of the clock's nanoseconds when that name is taken. Security: a name the
/// session could make first would turn the keeping below into removal.
fn fresh_quarantine(git_dir: &Path, stamp: i64) -> Option<PathBuf> {
    let plain = git_dir.join(format!("cordon-quarantine-{stamp}"));
    let make = |p: &Path| std::fs::DirBuilder::new().mode(0o700).create(p).is_ok();
    if make(&plain) {
        return Some(plain);
    }
    (0..16).find_map(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let p = git_dir.join(format!("cordon-quarantine-{stamp}-{nanos:09}"));
        make(&p).then_some(p)
    })
}

/// Whether no component of `rel` below `workspace` but the last is a link (each an
/// existing real directory); the last may be anything.
fn no_link_on_the_way(workspace: &Path, rel: &Path) -> bool {
    let mut at = workspace.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for c in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            _ => return false,
        }
    }
    true
}

/// Keeps a removed entry in the quarantine: the original text of a rewritten file, or the
/// entry itself moved there (without execute bits).
fn keep(path: &Path, dest: &Path, original: Option<&[u8]>) -> bool {
    match original {
        Some(text) => std::fs::write(dest, text).is_ok(),
        None => {
            // `worktrees/<id>` and `modules/<name>` keep their place below the quarantine.
            if let Some(parent) = dest.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            let moved = std::fs::rename(path, dest).is_ok();
            if moved
                && let Ok(m) = std::fs::symlink_metadata(dest)
                && m.is_file()
            {
                let _ = std::fs::set_permissions(
                    dest,
                    std::fs::Permissions::from_mode(m.mode() & 0o666),
                );
            }
            moved
        }
    }
}

/// Gives `dir` and everything in it (never through a link) to `uid:gid`.
fn chown_tree(dir: &Path, uid: u32, gid: u32) {
    let _ = std::os::unix::fs::lchown(dir, Some(uid), Some(gid));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                chown_tree(&entry.path(), uid, gid);
            } else {
                let _ = std::os::unix::fs::lchown(entry.path(), Some(uid), Some(gid));
            }
        }
    }
}

fn remove_any(path: &Path) {
    let gone = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => Ok(()),
    };
    if let Err(e) = gone {
        tracing::warn!(path = %path.display(), error = %e, "git vetting could not remove");
    }
}

fn key_of(e: &ConfigEntry) -> String {
    match &e.subsection {
        Some(sub) => format!("{}.{sub}.{}", e.section, e.name),
        None => format!("{}.{}", e.section, e.name),
    }
}

/// A regular file's bytes, never through a link nor from a FIFO, at most the config cap.
fn read_nofollow(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    f.take(hostgit::MAX_CONFIG_BYTES as u64)
        .read_to_end(&mut buf)
        .ok()?;
    Some(buf)
}

#[cfg(test)]
mod tests;
