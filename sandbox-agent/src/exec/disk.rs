//! The workspace disk budget: how much a session may grow its workspace.
//!
//! Why a measurement after each command: the workspace is the user's own directory on
//! the host's filesystem, so neither a tmpfs size nor a cgroup can cap it;
//! `RLIMIT_FSIZE` caps one file, not their sum; project quotas exist on few filesystems
//! and need root to set up. So the agent measures the workspace's allocated blocks
//! (hard links once, symlinks not followed, other mounts not entered) when it starts and
//! after every command. A command that took the workspace past the budget gets a clear
//! message on its stderr, and every later command is refused (with the same message)
//! until files are removed: the overshoot is at most what one command wrote, which the
//! per-file `RLIMIT_FSIZE` bounds too. Off unless `sandbox.limits.disk` is set (a walk
//! of a large tree per command is not free).

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{AgentError, ErrorCode};

/// A budget for the growth of one directory tree.
#[derive(Debug)]
pub struct DiskBudget {
    root: PathBuf,
    budget: u64,
    baseline: u64,
}

impl DiskBudget {
    /// Measures `root` now; later growth past `budget` bytes is refused.
    pub fn new(root: &Path, budget: u64) -> DiskBudget {
        DiskBudget {
            root: root.to_path_buf(),
            budget,
            baseline: usage(root),
        }
    }

    /// An error when the tree grew past the budget since the start.
    pub fn check(&self) -> Result<(), AgentError> {
        let grown = usage(&self.root).saturating_sub(self.baseline);
        if grown <= self.budget {
            return Ok(());
        }
        Err(AgentError::new(
            ErrorCode::TooLarge,
            format!(
                "workspace disk budget exceeded: the workspace grew by {} MiB this session, \
                 over its budget of {} MiB (sandbox.limits.disk); remove files to run \
                 commands again",
                grown >> 20,
                self.budget >> 20
            ),
        ))
    }
}

/// Bytes allocated under `root` (st_blocks), each inode once, not crossing mounts.
pub fn usage(root: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return 0;
    };
    let dev = meta.dev();
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(m) = entry.metadata() else { continue };
            if m.dev() != dev {
                continue;
            }
            if m.nlink() > 1 && !m.is_dir() && !seen.insert(m.ino()) {
                continue;
            }
            total = total.saturating_add(m.blocks().saturating_mul(512));
            if m.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_past_the_budget_is_refused_and_removal_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("before"), vec![1u8; 1 << 20]).unwrap();
        let budget = DiskBudget::new(dir.path(), 2 << 20);
        assert!(
            budget.check().is_ok(),
            "what was there before does not count"
        );
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/big"), vec![1u8; 3 << 20]).unwrap();
        let err = budget.check().unwrap_err();
        assert_eq!(err.code, ErrorCode::TooLarge);
        assert!(
            err.message.contains("disk budget exceeded"),
            "{}",
            err.message
        );
        // A hard link adds no bytes.
        std::fs::hard_link(dir.path().join("before"), dir.path().join("link")).unwrap();
        std::fs::remove_file(dir.path().join("sub/big")).unwrap();
        assert!(budget.check().is_ok());
    }
}
