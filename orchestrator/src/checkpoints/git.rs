//! Running git against the shadow store. The workspace is untrusted: its own `.git`, hooks,
//! config, fsmonitor and attribute-driven filters must never run or apply. So every call
//! uses our bare git dir and an explicit work tree, a cleared environment (no system or
//! global config, HOME pointed at an empty dir), hooks and fsmonitor disabled, and no
//! optional locks; content conversions from the workspace's `.gitattributes` are
//! overridden in `info/attributes` (see [`ATTRIBUTES`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::CheckpointError;

/// `$GIT_DIR/info/attributes` wins over every `.gitattributes` in the work tree: no
/// end-of-line conversion, no clean/smudge filter, no ident or re-encoding, so a snapshot
/// stores the bytes exactly and a rewind writes them back exactly.
pub const ATTRIBUTES: &str = "* -text -eol -crlf -ident -filter -working-tree-encoding\n";

/// The workspace's own repository (and nested ones) is never part of a snapshot.
pub const EXCLUDE: &str = ".git\n";

/// One shadow store bound to one work tree.
#[derive(Debug, Clone)]
pub struct Git {
    pub git_dir: PathBuf,
    pub work_tree: PathBuf,
    /// An empty directory used as HOME, so no user config is read.
    pub empty_home: PathBuf,
}

impl Git {
    /// A git command with the isolation described in the module docs. `index` replaces
    /// the store's own index file.
    pub fn command(&self, index: Option<&Path>) -> Command {
        // The hardened base (cleared environment, no system or global configuration, no
        // hooks, fsmonitor, pager, editor, ssh or credential helper), then this store.
        let mut cmd = crate::hostgit::command(&self.work_tree);
        cmd.env("HOME", &self.empty_home)
            .env("XDG_CONFIG_HOME", &self.empty_home)
            .env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_AUTHOR_NAME", "cordon")
            .env("GIT_AUTHOR_EMAIL", "cordon@localhost")
            .env("GIT_COMMITTER_NAME", "cordon")
            .env("GIT_COMMITTER_EMAIL", "cordon@localhost");
        if let Some(index) = index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        for setting in [
            "core.autocrlf=false",
            "core.safecrlf=false",
            "core.symlinks=true",
            "core.fileMode=true",
            "core.quotePath=false",
            "core.sparseCheckout=false",
        ] {
            cmd.arg("-c").arg(setting);
        }
        cmd.current_dir(&self.work_tree).stdin(Stdio::null());
        cmd
    }

    /// Runs `args`, feeding `input` on stdin; returns stdout.
    pub fn run(
        &self,
        step: &'static str,
        index: Option<&Path>,
        args: &[&str],
        input: Option<&[u8]>,
    ) -> Result<Vec<u8>, CheckpointError> {
        let mut cmd = self.command(index);
        cmd.args(args);
        // Bounded: the work tree is what a session left (a FIFO where git opens a file, a
        // ref linked to /dev/zero), see `hostgit::bounded`.
        let bounds = crate::hostgit::bounded::Bounds::CHECKPOINT;
        let out = crate::hostgit::bounded::run(&mut cmd, input.map(<[u8]>::to_vec), bounds)
            .map_err(|e| match e {
                crate::hostgit::bounded::BoundError::Spawn(source) => {
                    CheckpointError::Spawn { step, source }
                }
                other => CheckpointError::Git {
                    step,
                    stderr: other.to_string(),
                },
            })?;
        if !out.status.success() {
            return Err(CheckpointError::Git {
                step,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out.stdout)
    }

    /// Runs `args` and returns stdout as one trimmed line (an object id).
    pub fn line(
        &self,
        step: &'static str,
        index: Option<&Path>,
        args: &[&str],
    ) -> Result<String, CheckpointError> {
        let out = self.run(step, index, args, None)?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }
}

/// Splits NUL-separated git output into paths.
pub fn nul_split(out: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    out.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| PathBuf::from(std::ffi::OsStr::from_bytes(s)))
        .collect()
}

/// Escapes a workspace-relative path as an anchored gitignore pattern matching exactly
/// it; `None` when gitignore cannot express it (a newline in the name).
pub fn exact_ignore_pattern(rel: &Path) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = rel.as_os_str().as_bytes();
    if bytes.contains(&b'\n') {
        return None;
    }
    let mut out = vec![b'/'];
    for &b in bytes {
        if matches!(b, b'\\' | b'*' | b'?' | b'[' | b' ' | b'!' | b'#') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'\n');
    Some(out)
}
