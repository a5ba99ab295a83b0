//! Files of the workspace that are hard links to names outside it (a pnpm store, a `cp -al`
//! backup, a `git clone` of a local path). Writing through such a name inside changes the
//! file outside, so the local backend mounts every one read-only inside the sandbox
//! (`launch::mounts`), like the protected paths; Write and Edit already refuse files with
//! more than one link.
//!
//! A file counts when its link count is higher than the number of names the walk found
//! for it in the workspace: its other names lie outside. Names inside that all belong to
//! one another (a file linked twice within the workspace) stay writable, unless one of
//! them is protected: a read-only mount guards a name, not the inode, so a second name of
//! `.git/config` (left by an earlier session: `ln sub/.git/config notes.txt`) would write
//! the protected file. Every name of such a file is mounted read-only too.
//!
//! Each such name costs one bind mount at start, so past [`DEFAULT_CAP`] names the
//! session refuses to start and says why and what to do, instead of a start that grows
//! with the store (figures in BENCHMARKS.md). What a user sees: a pnpm project whose
//! `node_modules` links thousands of files into the global store is refused with that
//! message (pnpm's `package-import-method=copy`, or a store inside the workspace, fixes
//! it); a project with a few linked files starts, and writing them inside fails with
//! "Read-only file system".

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::walk::{self, WalkError};

/// The most names made read-only one by one before the session refuses to start.
pub const DEFAULT_CAP: usize = 1000;
/// How many names the refusal lists.
const NAMED_IN_ERROR: usize = 5;

/// Why the scan refused.
#[derive(Debug, thiserror::Error)]
pub enum HardLinkError {
    #[error("scanning the workspace for hard links: {0}")]
    Walk(#[from] WalkError),
    #[error(
        "{count} files in the workspace are hard links to files outside it (for example \
         {}); each would be mounted read-only inside the sandbox, and more than {cap} are \
         refused. Make them independent copies first: for pnpm, `pnpm config set \
         package-import-method copy` and reinstall (or keep its store inside the \
         workspace); for a `cp -al` backup or a `git clone` of a local path, copy without \
         links (`cp -a`, `git clone --no-hardlinks`)",
        named.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    TooMany {
        count: usize,
        named: Vec<PathBuf>,
        cap: usize,
    },
}

/// Every name (relative to `workspace`) of a regular file that also has names outside
/// it, or another name at or below one of `protected` (relative, read-only inside), sorted.
pub fn linked_outside(workspace: &Path, protected: &[PathBuf]) -> Result<Vec<PathBuf>, WalkError> {
    // (dev, ino) -> (link count, names found inside); only files with several links.
    let mut seen: HashMap<(u64, u64), (u64, Vec<PathBuf>)> = HashMap::new();
    walk::walk(workspace, |e| {
        if e.kind() == libc::S_IFREG && e.stat.st_nlink > 1 {
            seen.entry((e.stat.st_dev, e.stat.st_ino))
                .or_insert_with(|| (e.stat.st_nlink, Vec::new()))
                .1
                .push(e.rel.to_path_buf());
        }
    })?;
    let is_protected = |name: &PathBuf| protected.iter().any(|p| name.starts_with(p));
    let mut out: Vec<PathBuf> = seen
        .into_values()
        .filter(|(nlink, names)| *nlink > names.len() as u64 || names.iter().any(is_protected))
        .flat_map(|(_, names)| names)
        .collect();
    out.sort();
    Ok(out)
}

/// The names to mount read-only (see [`linked_outside`]), or a refusal past `cap` of them.
pub fn read_only_names(
    workspace: &Path,
    protected: &[PathBuf],
    cap: usize,
) -> Result<Vec<PathBuf>, HardLinkError> {
    let names = linked_outside(workspace, protected)?;
    if names.len() > cap {
        return Err(HardLinkError::TooMany {
            count: names.len(),
            named: names.iter().take(NAMED_IN_ERROR).cloned().collect(),
            cap,
        });
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_with_names_outside_count() {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        let store = base.path().join("store");
        std::fs::create_dir_all(ws.join("node_modules/pkg")).unwrap();
        std::fs::create_dir(&store).unwrap();
        std::fs::write(store.join("index.js"), "x").unwrap();
        std::fs::hard_link(store.join("index.js"), ws.join("node_modules/pkg/index.js")).unwrap();
        std::fs::hard_link(store.join("index.js"), ws.join("copy.js")).unwrap();
        // Linked twice inside only: not a way out.
        std::fs::write(ws.join("a"), "x").unwrap();
        std::fs::hard_link(ws.join("a"), ws.join("b")).unwrap();
        std::fs::write(ws.join("plain"), "x").unwrap();
        let names = linked_outside(&ws, &[]).unwrap();
        assert_eq!(
            names,
            vec![
                PathBuf::from("copy.js"),
                PathBuf::from("node_modules/pkg/index.js")
            ]
        );
    }

    #[test]
    fn every_name_of_a_protected_file_is_read_only() {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        std::fs::create_dir_all(ws.join("sub/.git/hooks")).unwrap();
        std::fs::write(ws.join("sub/.git/config"), "[core]\n").unwrap();
        std::fs::hard_link(ws.join("sub/.git/config"), ws.join("notes.txt")).unwrap();
        std::fs::write(ws.join("sub/.git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::hard_link(ws.join("sub/.git/hooks/pre-commit"), ws.join("h")).unwrap();
        std::fs::write(ws.join("a"), "x").unwrap();
        std::fs::hard_link(ws.join("a"), ws.join("b")).unwrap();
        let protected = [
            PathBuf::from("sub/.git/config"),
            PathBuf::from("sub/.git/hooks"),
        ];
        assert_eq!(
            linked_outside(&ws, &protected).unwrap(),
            [
                PathBuf::from("h"),
                PathBuf::from("notes.txt"),
                PathBuf::from("sub/.git/config"),
                PathBuf::from("sub/.git/hooks/pre-commit"),
            ]
        );
    }

    #[test]
    fn past_the_cap_the_refusal_names_files_and_the_remedy() {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        for i in 0..4 {
            let out = base.path().join(format!("o{i}"));
            std::fs::write(&out, "x").unwrap();
            std::fs::hard_link(&out, ws.join(format!("f{i}"))).unwrap();
        }
        assert_eq!(read_only_names(&ws, &[], 4).unwrap().len(), 4);
        let err = read_only_names(&ws, &[], 3).unwrap_err().to_string();
        assert!(
            err.starts_with("4 files in the workspace are hard links"),
            "{err}"
        );
        assert!(err.contains("f0, f1, f2, f3"), "{err}");
        assert!(err.contains("package-import-method copy"), "{err}");
    }
}
