//! Glob and grep in-process with ripgrep's libraries.
//!
//! - `glob`: file paths matching a glob, newest first.
//! - `grep`: regex search with ripgrep's searcher, three output modes;
//!   `output` formats its lines and enforces its caps.
//!
//! Shared rules: the search path (default: the session's working directory; a relative
//! one is taken from it) must resolve beneath an allowed root, checked with the same
//! `openat2` resolution as file operations. The walk never follows symlinks, skips `.git`,
//! includes other hidden files, and respects `.gitignore` / `.ignore` files even outside a
//! git repository. Grep opens every file it searches beneath a root again, so a file
//! swapped for a link during the walk is never read through.

mod glob;
mod grep;
mod output;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ignore::WalkBuilder;

use crate::error::AgentError;
use crate::fsops::Resolver;

pub use glob::glob;
pub use grep::grep;

/// Where a search starts: a lexical absolute path beneath a root.
pub(crate) struct Base {
    pub path: PathBuf,
    pub is_dir: bool,
}

/// Resolves the search path (`requested`, or `cwd` when empty) beneath a root.
pub(crate) fn base(resolver: &Resolver, cwd: &Path, requested: &str) -> Result<Base, AgentError> {
    let path = if requested.is_empty() {
        cwd.to_path_buf()
    } else {
        cwd.join(requested)
    };
    let fd = resolver.open(&path, libc::O_PATH)?;
    let stat = nix::sys::stat::fstat(&fd)
        .map_err(|e| AgentError::from_io(&e.into(), &path.display().to_string()))?;
    let is_dir = stat.st_mode & libc::S_IFMT == libc::S_IFDIR;
    Ok(Base { path, is_dir })
}

/// A walker with the shared rules: no links followed, `.git` skipped, hidden files kept,
/// ignore files respected, entries in name order (so output is stable).
pub(crate) fn walker(root: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .follow_links(false)
        .require_git(false)
        .git_global(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b));
    builder
}

/// Last modification time without following a link; the epoch when unknown.
pub(crate) fn mtime(path: &Path) -> SystemTime {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Sorts newest first; ties by path, so the order is stable.
pub(crate) fn newest_first(files: &mut [(SystemTime, PathBuf)]) {
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    /// Writes `text` to `root/rel` (creating parents) with an mtime `age_s` seconds ago.
    pub fn file(root: &Path, rel: &str, text: &str, age_s: u64) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        let when = SystemTime::now() - Duration::from_secs(age_s);
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(when).unwrap();
    }
}
