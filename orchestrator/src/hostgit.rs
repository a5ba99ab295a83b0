//! Git on the host, for the orchestrator.
//!
//! [`command`] is the hardened base every host git starts from (see
//! [`sandbox_agent::hostgit`]: cleared environment, no system or global configuration, no
//! hooks, fsmonitor, pager, editor, ssh or credential helper). On top of it,
//! [`WorkspaceRepo`] reads a workspace's repository without ever letting git read that
//! repository's own control files: git runs against a private *shadow* git dir holding a
//! configuration Cordon wrote (format version and object format only) and links to the
//! repository's data (objects, refs, packed-refs, the index). So nothing the repository's
//! `config`, `config.worktree`, includes, `hooks/`, `info/attributes` or `commondir` says
//! is seen: no filter or diff driver is defined, no hook directory exists, no fsmonitor is
//! configured, whatever a session or a hostile archive put there. On top of that,
//! attributes come from the empty tree (`--attr-source`), submodules are not entered, and
//! a redirected git dir (`.git` a file or a link, a `commondir` pointing elsewhere) is
//! refused rather than followed.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub mod bounded;

pub use sandbox_agent::hostgit::{ConfigEntry, HostGitError, command, list_config};

/// The empty tree of each object format: attributes are read from it, i.e. there are none.
const EMPTY_TREE_SHA1: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
const EMPTY_TREE_SHA256: &str = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321";

/// The largest `HEAD` or `commondir` read.
const MAX_SMALL_FILE: usize = 4096;

/// Why a workspace's repository cannot be read safely.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("no git repository at or above {0}")]
    NotARepository(PathBuf),
    #[error("{path} redirects the git dir ({why}); not followed")]
    Redirected { path: PathBuf, why: &'static str },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {why}")]
    Invalid { path: PathBuf, why: String },
    #[error("preparing the shadow git dir: {0}")]
    Shadow(#[source] std::io::Error),
    #[error(transparent)]
    Git(#[from] HostGitError),
}

/// A workspace's repository, read through a private shadow git dir (see the module docs).
#[derive(Debug)]
pub struct WorkspaceRepo {
    shadow: tempfile::TempDir,
    work_tree: PathBuf,
    git_dir: PathBuf,
    empty_tree: &'static str,
}

impl WorkspaceRepo {
    /// Finds the repository containing `cwd` (the nearest `.git` at or above it) and
    /// prepares its shadow. A `.git` that is a file or a link, or a `commondir` that points
    /// anywhere but the git dir itself, is refused.
    pub fn open(cwd: &Path) -> Result<Self, RepoError> {
        let (work_tree, git_dir) = find_git_dir(cwd)?;
        check_commondir(&git_dir)?;
        check_data_shape(&git_dir)?;
        let config = read_small(
            &git_dir.join("config"),
            sandbox_agent::hostgit::MAX_CONFIG_BYTES,
        )?;
        let entries = list_config(&config.unwrap_or_default(), &work_tree)?;
        let format = RepoFormat::from_entries(&entries).map_err(|why| RepoError::Invalid {
            path: git_dir.join("config"),
            why,
        })?;
        let head_path = git_dir.join("HEAD");
        let head = read_small(&head_path, MAX_SMALL_FILE)?.ok_or_else(|| RepoError::Invalid {
            path: head_path.clone(),
            why: "missing".into(),
        })?;
        let head = valid_head(&head).ok_or_else(|| RepoError::Invalid {
            path: head_path,
            why: "not a ref or an object id".into(),
        })?;
        let shadow = tempfile::Builder::new()
            .prefix("cordon-git-")
            .tempdir()
            .map_err(RepoError::Shadow)?;
        build_shadow(shadow.path(), &git_dir, &head, &format).map_err(RepoError::Shadow)?;
        Ok(Self {
            shadow,
            work_tree,
            git_dir,
            empty_tree: if format.sha256 {
                EMPTY_TREE_SHA256
            } else {
                EMPTY_TREE_SHA1
            },
        })
    }

    /// The top of the work tree.
    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    /// A hardened git command on this repository, run in `cwd` (inside the work tree).
    pub fn command(&self, cwd: &Path) -> Command {
        let mut cmd = command(&self.work_tree);
        let index = self.git_dir.join("index");
        let index = match std::fs::symlink_metadata(&index) {
            Ok(m) if m.is_file() => index,
            // No index (a fresh repository), or not a plain file: an empty one.
            _ => self.shadow.path().join("index"),
        };
        cmd.env("GIT_DIR", self.shadow.path())
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_INDEX_FILE", index)
            .env("GIT_CEILING_DIRECTORIES", "/")
            // Command scope counts as protected configuration: ownership checks are moot
            // when nothing of the repository's configuration is read.
            .args(["-c", "safe.directory=*"])
            .arg(format!("--attr-source={}", self.empty_tree))
            .current_dir(cwd);
        cmd
    }

    /// Runs `args` in `cwd` within [`bounded::Bounds::PROMPT`]; stdout as text when git
    /// succeeds.
    pub fn output(&self, cwd: &Path, args: &[&str]) -> Option<String> {
        let mut cmd = self.command(cwd);
        cmd.args(args);
        match bounded::run(&mut cmd, None, bounded::Bounds::PROMPT) {
            Ok(out) => out
                .status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()),
            Err(e) => {
                tracing::warn!(error = %e, ?args, "host git on the workspace gave up");
                None
            }
        }
    }
}

/// The nearest `.git` at or above `cwd`: a real directory, or a refusal.
fn find_git_dir(cwd: &Path) -> Result<(PathBuf, PathBuf), RepoError> {
    for dir in cwd.ancestors() {
        let git = dir.join(".git");
        match std::fs::symlink_metadata(&git) {
            Ok(m) if m.is_dir() => return Ok((dir.to_path_buf(), git)),
            Ok(m) if m.is_file() => {
                return Err(RepoError::Redirected {
                    path: git,
                    why: "a gitdir file",
                });
            }
            Ok(_) => {
                return Err(RepoError::Redirected {
                    path: git,
                    why: "not a plain directory",
                });
            }
            Err(_) => {}
        }
    }
    Err(RepoError::NotARepository(cwd.to_path_buf()))
}

/// A `commondir` is accepted only when it names the git dir itself (the placeholder a
/// sandbox puts there to pin it), never another directory.
fn check_commondir(git_dir: &Path) -> Result<(), RepoError> {
    let path = git_dir.join("commondir");
    let Some(text) = read_small(&path, MAX_SMALL_FILE)? else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&text);
    let target = git_dir.join(text.trim_end_matches(['\n', '\r']));
    let same = match (
        std::fs::canonicalize(&target),
        std::fs::canonicalize(git_dir),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(RepoError::Redirected {
            path,
            why: "commondir names another directory",
        })
    }
}

/// Reads a small regular file without following a link or blocking on a FIFO; `None`
/// when it does not exist.
fn read_small(path: &Path, max: usize) -> Result<Option<Vec<u8>>, RepoError> {
    let err = |source| RepoError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(e)),
    };
    let meta = file.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(RepoError::Invalid {
            path: path.to_path_buf(),
            why: "not a regular file".into(),
        });
    }
    let mut buf = Vec::new();
    file.take(max as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(err)?;
    if buf.len() > max {
        return Err(RepoError::Invalid {
            path: path.to_path_buf(),
            why: format!("larger than {max} bytes"),
        });
    }
    Ok(Some(buf))
}

/// What the shadow's configuration must repeat for git to read the data correctly.
#[derive(Debug, Default, PartialEq, Eq)]
struct RepoFormat {
    version: u32,
    sha256: bool,
    reftable: bool,
}

impl RepoFormat {
    fn from_entries(entries: &[ConfigEntry]) -> Result<Self, String> {
        let mut f = Self::default();
        for e in entries {
            let v = e.value.as_deref().unwrap_or("").to_ascii_lowercase();
            if e.is("core", "repositoryformatversion") {
                f.version = v.parse().map_err(|_| format!("format version {v:?}"))?;
            } else if e.is("extensions", "objectformat") {
                f.sha256 = match v.as_str() {
                    "sha1" => false,
                    "sha256" => true,
                    _ => return Err(format!("object format {v:?}")),
                };
            } else if e.is("extensions", "refstorage") {
                f.reftable = match v.as_str() {
                    "files" => false,
                    "reftable" => true,
                    _ => return Err(format!("ref storage {v:?}")),
                };
            }
        }
        if f.version > 1 {
            return Err(format!("format version {}", f.version));
        }
        Ok(f)
    }

    fn config_text(&self) -> String {
        let mut text = format!(
            "[core]\n\trepositoryformatversion = {}\n\tbare = false\n",
            if self.sha256 || self.reftable {
                1
            } else {
                self.version
            }
        );
        if self.sha256 || self.reftable {
            text.push_str("[extensions]\n");
        }
        if self.sha256 {
            text.push_str("\tobjectformat = sha256\n");
        }
        if self.reftable {
            text.push_str("\trefstorage = reftable\n");
        }
        text
    }
}

/// `HEAD` as a symbolic ref below `refs/` or a bare object id; anything else is refused.
fn valid_head(raw: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(raw).ok()?.trim_end_matches('\n');
    if let Some(target) = text.strip_prefix("ref: ") {
        let ok = target.starts_with("refs/")
            && !target.contains("..")
            && target
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b"\\:?*[~^".contains(&b));
        return ok.then(|| format!("ref: {target}\n"));
    }
    let hex = text.len() == 40 || text.len() == 64;
    (hex && text.bytes().all(|b| b.is_ascii_hexdigit())).then(|| format!("{text}\n"))
}

/// The repository's data, which the shadow links to, must be its own: `objects`, `refs`
/// and `reftable` real directories, `packed-refs`, `shallow` and the split index's shared
/// parts regular files, and no alternates.
///
/// Security: a session writes these. A link there (or an alternates file) would have
/// Cordon's `git status` read another repository of the host's (`objects ->
/// /home/u/secret/.git/objects`), whose paths and branch then go into the system prompt,
/// to the model.
fn check_data_shape(git_dir: &Path) -> Result<(), RepoError> {
    let kind = |name: &str| std::fs::symlink_metadata(git_dir.join(name)).ok();
    for name in ["objects", "refs", "reftable"] {
        if kind(name).is_some_and(|m| !m.is_dir()) {
            return Err(RepoError::Redirected {
                path: git_dir.join(name),
                why: "a link or not a directory",
            });
        }
    }
    let mut files = vec!["packed-refs".to_string(), "shallow".to_string()];
    if let Ok(entries) = std::fs::read_dir(git_dir) {
        files.extend(
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("sharedindex.")),
        );
    }
    for name in &files {
        if kind(name).is_some_and(|m| !m.is_file()) {
            return Err(RepoError::Redirected {
                path: git_dir.join(name),
                why: "a link or not a regular file",
            });
        }
    }
    for name in ["objects/info/alternates", "objects/info/http-alternates"] {
        if kind(name).is_some() {
            return Err(RepoError::Redirected {
                path: git_dir.join(name),
                why: "alternates name another object store",
            });
        }
    }
    Ok(())
}

/// Fills the shadow git dir: our own `HEAD` copy and configuration, links to the data.
fn build_shadow(
    shadow: &Path,
    git_dir: &Path,
    head: &str,
    format: &RepoFormat,
) -> std::io::Result<()> {
    std::fs::write(shadow.join("HEAD"), head)?;
    std::fs::write(shadow.join("config"), format.config_text())?;
    let link = |name: &str| -> std::io::Result<()> {
        let target = git_dir.join(name);
        if std::fs::symlink_metadata(&target).is_ok() {
            std::os::unix::fs::symlink(&target, shadow.join(name))?;
        }
        Ok(())
    };
    // Data only: git reads objects, refs and the shallow list, and never runs them.
    for name in ["objects", "refs", "packed-refs", "reftable", "shallow"] {
        link(name)?;
    }
    if !shadow.join("objects").exists() {
        std::fs::create_dir(shadow.join("objects"))?;
    }
    if !shadow.join("refs").exists() {
        std::fs::create_dir(shadow.join("refs"))?;
    }
    // The user's own exclude list keeps status meaningful; attributes are not linked.
    std::fs::create_dir(shadow.join("info"))?;
    let exclude = git_dir.join("info/exclude");
    if std::fs::symlink_metadata(&exclude).is_ok_and(|m| m.is_file()) {
        std::os::unix::fs::symlink(&exclude, shadow.join("info/exclude"))?;
    }
    // A split index names its shared part relative to the git dir.
    for entry in std::fs::read_dir(git_dir)?.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("sharedindex.") {
            std::os::unix::fs::symlink(entry.path(), shadow.join(&name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
