//! Checkpoints: the workspace as it was before each user prompt, so that rewinding to any
//! earlier user message restores the files, including what Bash changed (`rm`, `sed -i`,
//! `mv`), which only a whole-workspace snapshot covers.
//!
//! The store is a shadow git object store per session, a bare repository at
//! `$CORDON_HOME/checkpoints/<session_id>/` used with the workspace as its work tree (see
//! [`git`] for the isolation: the workspace's own `.git`, hooks and config are never used
//! or touched). A snapshot is `add -A` + `write-tree` + `commit-tree`, recorded in
//! `checkpoints.jsonl` against the user message's uuid. A rewind computes the difference
//! between that tree and a fresh snapshot of now: files changed or deleted since are
//! written back, files created since are removed.
//!
//! What is and is not covered:
//! - `.gitignore` is respected: ignored files (build outputs, `node_modules`) are not
//!   snapshotted and not rewound; neither are `.git` directories.
//! - Files over [`MAX_FILE_BYTES`] are skipped and reported.
//! - Git records content, symlinks and the executable bit; other mode bits, owners and
//!   empty directories are not restored (restored files get the default mode).
//! - A file that existed when a checkpoint was taken is never removed by a rewind to it,
//!   even when it was not snapshotted: each checkpoint records, next to its tree, what
//!   existed but was left out (ignored under the checkpoint's own ignore rules, too large,
//!   the sandbox's footprint), and "created since" is computed against that. Emptying
//!   `.gitignore` later cannot turn a pre-existing ignored file into a "new" one.
//! - Checkpoints never record the sandbox's placeholders or masked (denied-read) paths:
//!   the backend says what they are ([`crate::sandbox::footprint`]).
//! - A rewind never follows a symlink out of the workspace: it changes the tree only
//!   through held directory descriptors ([`sandbox_agent::beneath`]), replacing a symlink in the
//!   way instead of writing through it. Snapshots and rewinds in a live session run while
//!   the sandbox is frozen ([`crate::sandbox::Supervisor::frozen`]); `cordon rewind`
//!   refuses while a sandbox of the session runs.
//! - Before changing anything, a rewind snapshots the current state under
//!   `refs/cordon/before-rewind`, so a rewind can itself be undone by hand.
//! - The store has a size budget ([`DEFAULT_BUDGET_BYTES`], `checkpointStoreMaxMiB` in the
//!   settings): a snapshot that would pass it fails with a clear error and leaves the
//!   store as it was. The store is the user's alone (directories 0700, files 0600): it
//!   holds copies of workspace files.

mod git;
mod observer;
mod rewind;
mod store;
#[cfg(test)]
mod tests;

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use observer::{CheckpointObserver, while_quiet};
pub use rewind::{RewindConversationError, rewind_conversation};

use git::Git;

/// Files larger than this are not snapshotted (and reported).
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;
/// The checkpoint store's default size budget per session.
pub const DEFAULT_BUDGET_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Under the store: per checkpoint commit, what existed but was left out of its tree.
const KEPT_DIR: &str = "kept";

const INDEX_FILE: &str = "checkpoints.jsonl";

/// Why a checkpoint operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("invalid id {0:?}: use 1-64 of [A-Za-z0-9_-]")]
    InvalidId(String),
    #[error("creating the checkpoint store {path}: {source}")]
    Init {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("running git ({step}): {source}")]
    Spawn {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("git failed ({step}): {stderr}")]
    Git { step: &'static str, stderr: String },
    #[error("reading the checkpoint list {path}: {why}")]
    List { path: PathBuf, why: String },
    #[error("recording the checkpoint in {path}: {source}")]
    Record {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no checkpoint for user message {0}")]
    Unknown(String),
    #[error("restoring {path}: {why}")]
    Restore { path: PathBuf, why: String },
    #[error(
        "the checkpoint store would grow to {used} bytes, over its budget of {budget} bytes; \
         this prompt is not checkpointed (raise checkpointStoreMaxMiB in the settings, or \
         ignore large generated files in .gitignore)"
    )]
    Budget { used: u64, budget: u64 },
    #[error("a sandbox of session {0} is running: end the session before rewinding its files")]
    SandboxRunning(String),
}

/// One recorded checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The user message this state precedes.
    pub user_message_uuid: String,
    pub commit: String,
    pub tree: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// Files left out because they exceed [`MAX_FILE_BYTES`].
    #[serde(default)]
    pub skipped: Vec<PathBuf>,
    /// Whether the store holds the list of what existed but was left out (checkpoints
    /// made before that list existed have none: a rewind to them removes nothing).
    #[serde(default)]
    pub kept: bool,
}

/// What a rewind changed, as workspace-relative paths.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RewindReport {
    /// Written back (changed or deleted since the checkpoint).
    pub restored: Vec<PathBuf>,
    /// Removed (created since the checkpoint).
    pub removed: Vec<PathBuf>,
    /// Too large to snapshot now, so left as they are.
    pub skipped: Vec<PathBuf>,
    /// Not in the checkpoint but left in place: they existed then without being
    /// snapshotted (ignored, too large, the sandbox's), or the checkpoint cannot tell.
    pub kept: Vec<PathBuf>,
}

/// A state captured but not yet recorded against a user message.
#[derive(Debug, Clone)]
pub struct Captured {
    pub commit: String,
    pub tree: String,
    pub skipped: Vec<PathBuf>,
}

impl Captured {
    /// Whether the store has the kept list of this capture (always, for new captures).
    fn has_kept(&self, git: &Git) -> bool {
        git.git_dir.join(KEPT_DIR).join(&self.commit).is_file()
    }
}

/// One session's checkpoint store over one workspace.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    git: Git,
    session_id: String,
    /// Cordon's data directory: the backends answer for this session's footprint there.
    home: PathBuf,
    /// Most bytes the store may hold.
    budget: u64,
}

/// Whether `id` is safe as a path component and a ref name.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Checkpoints {
    /// Opens (creating on first use) the store of `session_id` under `home` for
    /// `workspace`.
    pub fn open(home: &Path, session_id: &str, workspace: &Path) -> Result<Self, CheckpointError> {
        if !valid_id(session_id) {
            return Err(CheckpointError::InvalidId(session_id.into()));
        }
        let root = home.join("checkpoints");
        let git_dir = root.join(session_id);
        let empty_home = root.join(".empty-home");
        let init = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CheckpointError::Init { path, source }
        };
        for dir in [&root, &empty_home, &git_dir] {
            crate::paths::private_dir(dir).map_err(init(dir))?;
        }
        let work_tree = std::fs::canonicalize(workspace).map_err(init(workspace))?;
        let git = Git {
            git_dir: git_dir.clone(),
            work_tree: work_tree.clone(),
            empty_home,
        };
        if !git_dir.join("HEAD").exists() {
            let mut cmd = git.command(None);
            cmd.env_remove("GIT_WORK_TREE").env_remove("GIT_DIR");
            // --shared=0600: git writes the store's files 0600 and its directories 0700.
            // No template: no sample hooks, nothing but what the store needs.
            let status = cmd
                .args(["init", "--bare", "-q", "--shared=0600", "--template="])
                .arg(&git_dir)
                .status()
                .map_err(|source| CheckpointError::Spawn {
                    step: "init",
                    source,
                })?;
            if !status.success() {
                return Err(CheckpointError::Git {
                    step: "init",
                    stderr: format!("git init exited with {status}"),
                });
            }
        }
        for dir in [git_dir.join("info"), git_dir.join(KEPT_DIR)] {
            crate::paths::private_dir(&dir).map_err(init(&dir))?;
        }
        let info = git_dir.join("info");
        let mut exclude = git::EXCLUDE.as_bytes().to_vec();
        // Cordon's own data never belongs in a snapshot, even when it lies in the workspace.
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        if let Ok(rel) = home.strip_prefix(&work_tree)
            && let Some(pattern) = git::exact_ignore_pattern(rel)
        {
            exclude.extend(pattern);
        }
        crate::paths::write_private(&info.join("exclude"), &exclude).map_err(init(&info))?;
        crate::paths::write_private(&info.join("attributes"), git::ATTRIBUTES.as_bytes())
            .map_err(init(&info))?;
        Ok(Self {
            git,
            session_id: session_id.into(),
            home,
            budget: DEFAULT_BUDGET_BYTES,
        })
    }

    /// The same store with another size budget.
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = bytes;
        self
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn workspace(&self) -> &Path {
        &self.git.work_tree
    }

    /// Records the workspace's current state as the checkpoint of `user_message_uuid`.
    pub fn snapshot(&self, user_message_uuid: &str) -> Result<Checkpoint, CheckpointError> {
        let captured = self.capture()?;
        self.record(user_message_uuid, captured)
    }

    /// What the session's sandbox puts in (or hides of) the workspace, relative to it.
    fn footprint(&self) -> crate::sandbox::Footprint {
        crate::sandbox::footprint::of_session(&self.home, &self.session_id)
    }

    /// Captures the workspace's current state (a commit in the store) without recording it.
    /// Call only while no sandbox process runs (see the module docs).
    pub fn capture(&self) -> Result<Captured, CheckpointError> {
        let skipped = self.large_files()?;
        // The sandbox's placeholders and masks are the backend's, not the user's: never
        // snapshotted, never "restored".
        let footprint = self.footprint().relative_to(&self.git.work_tree);
        let left_out: Vec<&PathBuf> = skipped.iter().chain(&footprint).collect();
        let excludes_arg = self.leave_out(&left_out)?;
        let kept = self.kept_list(&excludes_arg, &left_out)?;
        let parent = self
            .git
            .line(
                "rev-parse",
                None,
                &["rev-parse", "-q", "--verify", "refs/heads/checkpoints"],
            )
            .ok()
            .filter(|s| !s.is_empty());
        self.git
            .run("add", None, &["-c", &excludes_arg, "add", "-A"], None)?;
        self.within_budget(parent.as_deref())?;
        let tree = self.git.line("write-tree", None, &["write-tree"])?;
        let mut args = vec!["commit-tree", tree.as_str(), "-m", "cordon checkpoint"];
        if let Some(p) = &parent {
            args.extend(["-p", p.as_str()]);
        }
        let commit = self.git.line("commit-tree", None, &args)?;
        let kept_path = self.git.git_dir.join(KEPT_DIR).join(&commit);
        crate::paths::write_private(&kept_path, &kept).map_err(|source| {
            CheckpointError::Record {
                path: kept_path,
                source,
            }
        })?;
        self.git.run(
            "update-ref",
            None,
            &["update-ref", "refs/heads/checkpoints", &commit],
            None,
        )?;
        Ok(Captured {
            commit,
            tree,
            skipped,
        })
    }

    /// Keeps `left_out` (workspace-relative) out of the next tree: drops them from the
    /// store's index and writes an excludes file naming exactly them. Returns the `-c`
    /// setting that applies the file.
    fn leave_out(&self, left_out: &[&PathBuf]) -> Result<String, CheckpointError> {
        let mut patterns = Vec::new();
        if !left_out.is_empty() {
            // Tracked entries ignore exclude patterns: drop them from the index first.
            let mut spec = Vec::new();
            for rel in left_out {
                spec.extend_from_slice(rel.as_os_str().as_bytes());
                spec.push(0);
                patterns.extend(git::exact_ignore_pattern(rel).unwrap_or_default());
            }
            let mut cmd_args = vec!["rm", "--cached", "-q", "--ignore-unmatch", "-r"];
            cmd_args.extend(["--pathspec-from-file=-", "--pathspec-file-nul"]);
            self.run_literal("forgetting large files", &cmd_args, &spec)?;
        }
        let excludes = self.git.git_dir.join("large-excludes");
        crate::paths::write_private(&excludes, &patterns).map_err(|source| {
            CheckpointError::Record {
                path: excludes.clone(),
                source,
            }
        })?;
        Ok(format!("core.excludesFile={}", excludes.display()))
    }

    /// What exists but stays out of the tree, under this checkpoint's own ignore rules
    /// (ignored directories as a whole, ending in `/`) and `left_out`: NUL-separated.
    fn kept_list(
        &self,
        excludes_arg: &str,
        left_out: &[&PathBuf],
    ) -> Result<Vec<u8>, CheckpointError> {
        let mut kept = self.git.run(
            "listing ignored files",
            None,
            &[
                "-c",
                excludes_arg,
                "ls-files",
                "-z",
                "--others",
                "--ignored",
                "--exclude-standard",
                "--directory",
            ],
            None,
        )?;
        for rel in left_out {
            kept.extend_from_slice(rel.as_os_str().as_bytes());
            kept.push(0);
        }
        Ok(kept)
    }

    /// After `add -A` wrote the new objects: when the store is now over its budget, puts
    /// the index back as it was at `parent`, drops the objects no checkpoint references,
    /// and fails with [`CheckpointError::Budget`].
    fn within_budget(&self, parent: Option<&str>) -> Result<(), CheckpointError> {
        let used = store::size(&self.git.git_dir);
        if used <= self.budget {
            return Ok(());
        }
        match parent {
            Some(p) => self.git.run("read-tree", None, &["read-tree", p], None)?,
            None => self
                .git
                .run("read-tree", None, &["read-tree", "--empty"], None)?,
        };
        self.git.run(
            "prune",
            None,
            &["prune", "--expire=now", "--no-progress"],
            None,
        )?;
        Err(CheckpointError::Budget {
            used,
            budget: self.budget,
        })
    }

    /// Records a captured state as the checkpoint of `user_message_uuid`.
    pub fn record(
        &self,
        user_message_uuid: &str,
        captured: Captured,
    ) -> Result<Checkpoint, CheckpointError> {
        if !valid_id(user_message_uuid) {
            return Err(CheckpointError::InvalidId(user_message_uuid.into()));
        }
        let kept = captured.has_kept(&self.git);
        let checkpoint = Checkpoint {
            user_message_uuid: user_message_uuid.into(),
            commit: captured.commit,
            tree: captured.tree,
            created_at: crate::session::record::now_rfc3339(),
            kept,
            skipped: captured.skipped,
        };
        let reference = format!("refs/cordon/checkpoints/{user_message_uuid}");
        self.git.run(
            "update-ref",
            None,
            &["update-ref", &reference, &checkpoint.commit],
            None,
        )?;
        let path = self.git.git_dir.join(INDEX_FILE);
        let mut line = serde_json::to_vec(&checkpoint).map_err(|e| CheckpointError::Record {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(&line).and_then(|()| f.sync_data()))
            .map_err(|source| CheckpointError::Record { path, source })?;
        Ok(checkpoint)
    }

    /// Every checkpoint, oldest first.
    pub fn list(&self) -> Result<Vec<Checkpoint>, CheckpointError> {
        let path = self.git.git_dir.join(INDEX_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(CheckpointError::List {
                    path,
                    why: e.to_string(),
                });
            }
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).map_err(|e| CheckpointError::List {
                    path: path.clone(),
                    why: e.to_string(),
                })
            })
            .collect()
    }

    /// The checkpoint recorded for `user_message_uuid` (the latest, if recorded twice).
    pub fn get(&self, user_message_uuid: &str) -> Result<Checkpoint, CheckpointError> {
        self.list()?
            .into_iter()
            .rev()
            .find(|c| c.user_message_uuid == user_message_uuid)
            .ok_or_else(|| CheckpointError::Unknown(user_message_uuid.into()))
    }

    /// Restores the workspace to the checkpoint of `user_message_uuid`. Call only while no
    /// sandbox process runs: in a live session through
    /// [`crate::sandbox::Supervisor::frozen`]; otherwise [`Checkpoints::rewind_idle`].
    pub fn rewind(&self, user_message_uuid: &str) -> Result<RewindReport, CheckpointError> {
        let target = self.get(user_message_uuid)?;
        let now = self.capture()?;
        self.git.run(
            "update-ref",
            None,
            &["update-ref", "refs/cordon/before-rewind", &now.commit],
            None,
        )?;
        let kept = if target.kept {
            let path = self.git.git_dir.join(KEPT_DIR).join(&target.commit);
            let list = std::fs::read(&path).map_err(|e| CheckpointError::List {
                path,
                why: e.to_string(),
            })?;
            Some(rewind::Kept::parse(&list))
        } else {
            None
        };
        rewind::restore(&self.git, &target.tree, &now, kept.as_ref())
    }

    /// [`Checkpoints::rewind`] from outside the session (`cordon rewind`): refuses while a
    /// sandbox of the session runs, since its processes could change the tree under us.
    pub fn rewind_idle(&self, user_message_uuid: &str) -> Result<RewindReport, CheckpointError> {
        if self.footprint().running {
            return Err(CheckpointError::SandboxRunning(self.session_id.clone()));
        }
        self.rewind(user_message_uuid)
    }

    /// Non-ignored files over [`MAX_FILE_BYTES`], relative to the workspace.
    fn large_files(&self) -> Result<Vec<PathBuf>, CheckpointError> {
        let out = self.git.run(
            "ls-files",
            None,
            &[
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            None,
        )?;
        let mut large: Vec<PathBuf> = git::nul_split(&out)
            .into_iter()
            .filter(|rel| {
                std::fs::symlink_metadata(self.git.work_tree.join(rel))
                    .is_ok_and(|m| m.is_file() && m.size() > MAX_FILE_BYTES)
            })
            .collect();
        large.dedup();
        Ok(large)
    }

    fn run_literal(
        &self,
        step: &'static str,
        args: &[&str],
        input: &[u8],
    ) -> Result<(), CheckpointError> {
        let mut all = vec!["--literal-pathspecs"];
        all.extend_from_slice(args);
        self.git.run(step, None, &all, Some(input)).map(drop)
    }
}
