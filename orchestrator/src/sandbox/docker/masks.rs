//! Mounts over parts of the workspace inside a session container: the protected paths
//! (`policies/protected-paths.json`: `.git/hooks`, `.git/config`, `.claude`, rc files...),
//! the session's denied-write paths (read-only) and its denied-read paths (masked).
//! The same plan as the local backend's launcher (`sandbox_agent::launch::protected` and
//! `::denied`), expressed as container mounts:
//! - a protected or denied-write path: a read-only bind of the path onto itself;
//! - each proper ancestor of one (e.g. `.git` for `.git/hooks`): a read-write bind onto
//!   itself, so that a sandboxed `mv .git .git.old && mkdir -p .git/hooks` fails (a mount
//!   point cannot be renamed) instead of sidestepping the protection;
//! - a missing protected path: an empty placeholder created on the host first (owned by
//!   the workspace's owner, recorded in the run directory before it exists, removed at
//!   destroy or by reconcile after a crash if still empty), so the mount has a target and
//!   a sandboxed process cannot create the entry (a missing `.git` is protected whole);
//! - a denied-read file: a read-only bind of an empty mode-0000 root-owned file; a
//!   denied-read directory: a read-only bind of an empty mode-0000 root-owned directory.
//!   The sandbox uid has no capability, so `cat .env` fails with EACCES;
//! - a file hard-linked to a name outside the workspace (a pnpm store, a `cp -al` backup):
//!   a read-only bind of the name onto itself, so Bash cannot write through it to the file
//!   outside; past [`hardlinks::DEFAULT_CAP`] such names the session refuses to start and
//!   names them (the same scan and cap as the local launcher, see
//!   `sandbox_agent::hostside::hardlinks`).
//!
//! Cold containers get these as `HostConfig.Mounts` (typed binds: a missing source is an
//! error, never silently created by the engine); warm-pool containers get them injected
//! with the workspace (see [`super::pool`]).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sandbox_agent::hostside::hardlinks;
use sandbox_agent::launch::protected::{self, EntryKind, ProtectedPath};
use sandbox_agent::launch::{LaunchError, denied, gitguard, gitvet};

use crate::sandbox::{SandboxError, SandboxSpec};

/// The empty masks in the run directory (host-only; the container sees them only as the
/// sources of its mask binds).
const MASK_FILE: &str = "mask-file";
const MASK_DIR: &str = "mask-dir";

/// One bind inside the container, `source` on the host onto `target` (a path inside the
/// workspace, the same inside and out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub source: PathBuf,
    pub target: PathBuf,
    pub read_only: bool,
}

/// What a session container must mount over its workspace, shallowest target first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Masks {
    pub binds: Vec<Bind>,
    /// Absolute paths made read-only (reported to the agent as its protected paths).
    pub protected: Vec<PathBuf>,
}

fn launch_err(e: LaunchError) -> SandboxError {
    SandboxError::Setup {
        step: "plan protected and denied paths",
        source: std::io::Error::other(e.to_string()),
    }
}

/// Plans the mounts for `spec` on `workspace` (canonical), creates the placeholders and the
/// empty masks under `run_dir`. On error nothing created stays behind except what
/// [`remove_placeholders`] removes.
pub fn prepare(
    workspace: &Path,
    spec: &SandboxSpec,
    run_dir: &Path,
) -> Result<Masks, SandboxError> {
    prepare_tree(workspace, &spec.denied_write, &spec.denied_read, run_dir)
}

/// [`prepare`] for one writable tree (the workspace, an additional directory) with its
/// own denied-write and denied-read paths and its own `run_dir` for the records.
pub fn prepare_tree(
    workspace: &Path,
    denied_write: &[PathBuf],
    denied_read: &[PathBuf],
    run_dir: &Path,
) -> Result<Masks, SandboxError> {
    let mut entries: Vec<ProtectedPath> = crate::sandbox::local::protected_paths()?;
    entries.extend(denied::write_entries(workspace, denied_write).map_err(launch_err)?);
    // The git control files of every git dir already there (and the record the teardown
    // vetting of new ones needs), exactly as the local launcher does.
    entries.extend(gitguard::session_entries(workspace, run_dir, &[]).map_err(launch_err)?);
    let plan = protected::plan(workspace, &entries).map_err(launch_err)?;
    let hidden = denied::hidden(workspace, denied_read).map_err(launch_err)?;
    // Before any placeholder exists: a refusal here leaves the workspace untouched.
    let linked = hardlinks::read_only_names(workspace, &plan.read_only, hardlinks::DEFAULT_CAP)
        .map_err(|e| SandboxError::Setup {
            step: "checking the tree for hard links",
            source: std::io::Error::other(e.to_string()),
        })?;
    let meta = std::fs::metadata(workspace).map_err(|source| SandboxError::Setup {
        step: "stat workspace",
        source,
    })?;
    protected::create_placeholders(
        run_dir,
        workspace,
        &plan.placeholders,
        (meta.uid(), meta.gid()),
    )
    .map_err(launch_err)?;
    make_masks(run_dir)?;
    Ok(binds_for(workspace, run_dir, &plan, &hidden, &linked))
}

/// Turns a plan into binds: anchors read-write, protected entries and hard-linked names
/// (`linked`, relative) read-only, hidden entries masked; nothing below a hidden directory
/// (the mask covers it, and a mount point inside the mask would have to be created in
/// it), each target once.
fn binds_for(
    workspace: &Path,
    run_dir: &Path,
    plan: &protected::Plan,
    hidden: &[(PathBuf, EntryKind)],
    linked: &[PathBuf],
) -> Masks {
    let under_hidden = |rel: &Path| {
        hidden
            .iter()
            .any(|(h, kind)| rel.starts_with(h) && (*kind == EntryKind::Dir || rel == h))
    };
    let mut binds = Vec::new();
    let mut protected = Vec::new();
    let self_bind = |rel: &PathBuf, read_only: bool| Bind {
        source: workspace.join(rel),
        target: workspace.join(rel),
        read_only,
    };
    for rel in plan.anchors.iter().filter(|r| !under_hidden(r)) {
        binds.push(self_bind(rel, false));
    }
    for rel in plan.read_only.iter().filter(|r| !under_hidden(r)) {
        binds.push(self_bind(rel, true));
        protected.push(workspace.join(rel));
    }
    // Not reported as protected paths: Write and Edit refuse any file with several links
    // already; these binds are what stops Bash.
    for rel in linked.iter().filter(|r| !under_hidden(r)) {
        if !plan.read_only.contains(rel) {
            binds.push(self_bind(rel, true));
        }
    }
    for (rel, kind) in hidden {
        // A hidden path below another hidden directory is already covered.
        if hidden
            .iter()
            .any(|(h, k)| *k == EntryKind::Dir && h != rel && rel.starts_with(h))
        {
            continue;
        }
        let mask = match kind {
            EntryKind::File => MASK_FILE,
            EntryKind::Dir => MASK_DIR,
        };
        binds.retain(|b| b.target != workspace.join(rel));
        binds.push(Bind {
            source: run_dir.join(mask),
            target: workspace.join(rel),
            read_only: true,
        });
    }
    // Parents before children: a child's mount point must be reached through its parent's
    // mount (the engine sorts the same way; the pool injects in this order).
    binds.sort_by_key(|b| b.target.components().count());
    Masks { binds, protected }
}

/// The empty, mode-0000, root-owned file and directory that masks bind over denied reads.
fn make_masks(run_dir: &Path) -> Result<(), SandboxError> {
    let setup = |step| move |source| SandboxError::Setup { step, source };
    let file = run_dir.join(MASK_FILE);
    let dir = run_dir.join(MASK_DIR);
    if !file.exists() {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o000)
            .open(&file)
            .map_err(setup("create mask file"))?;
    }
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .mode(0o000)
            .create(&dir)
            .map_err(setup("create mask dir"))?;
    }
    // The umask cannot add bits, but be explicit: no one but root may open either.
    for p in [&file, &dir] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o000))
            .map_err(setup("chmod mask"))?;
    }
    Ok(())
}

/// Removes the placeholders recorded in `run_dir` that are still empty (idempotent), only
/// beneath `workspace` (the session's, as recorded): see
/// [`protected::remove_placeholders`].
pub fn remove_placeholders(run_dir: &Path, workspace: &Path) {
    protected::remove_placeholders(run_dir, workspace);
}

/// Vets the git dirs made during the session (see `sandbox_agent::launch::gitvet`), when
/// the record in `run_dir` names the session's `workspace`. Call only once the container
/// is gone: the vetting must not race a sandboxed process.
pub fn vet_git(run_dir: &Path, workspace: &Path) {
    gitvet::vet_session(run_dir, workspace);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ws: &Path) -> SandboxSpec {
        SandboxSpec::new("s", ws)
    }

    fn target<'a>(m: &'a Masks, ws: &Path, rel: &str) -> Option<&'a Bind> {
        m.binds.iter().find(|b| b.target == ws.join(rel))
    }

    #[test]
    fn protected_paths_become_read_only_binds_with_placeholders() {
        let ws = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".bashrc"), "# rc\n").unwrap();
        let m = prepare(&ws, &spec(&ws), run.path()).unwrap();
        let git = target(&m, &ws, ".git").expect(".git anchored");
        assert!(!git.read_only, "anchors stay writable");
        for rel in [
            ".git/hooks",
            ".git/config",
            ".bashrc",
            ".claude",
            ".mcp.json",
        ] {
            let b = target(&m, &ws, rel).unwrap_or_else(|| panic!("{rel} bound"));
            assert!(b.read_only, "{rel}");
            assert_eq!(b.source, b.target, "{rel} bound onto itself");
            assert!(ws.join(rel).exists(), "{rel} exists (placeholder)");
        }
        let depth: Vec<usize> = m
            .binds
            .iter()
            .map(|b| b.target.components().count())
            .collect();
        assert!(depth.windows(2).all(|w| w[0] <= w[1]), "parents first");
        remove_placeholders(run.path(), &ws);
        for rel in [".git/config", ".claude", ".mcp.json", ".envrc"] {
            assert!(!ws.join(rel).exists(), "{rel} placeholder removed");
        }
        assert!(ws.join(".git/hooks").is_dir() && ws.join(".bashrc").is_file());
    }

    #[test]
    fn denied_reads_are_masked_and_denied_writes_read_only() {
        let ws = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        std::fs::write(ws.join(".env"), "KEY=1\n").unwrap();
        std::fs::create_dir_all(ws.join("secrets/inner")).unwrap();
        std::fs::create_dir_all(ws.join("config")).unwrap();
        let mut s = spec(&ws);
        s.denied_read = vec![
            ws.join(".env"),
            ws.join("secrets"),
            ws.join("secrets/inner"),
            ws.join("missing"),
        ];
        s.denied_write = vec![ws.join("config")];
        let m = prepare(&ws, &s, run.path()).unwrap();
        let env = target(&m, &ws, ".env").unwrap();
        assert_eq!(env.source, run.path().join(MASK_FILE));
        assert!(env.read_only);
        let secrets = target(&m, &ws, "secrets").unwrap();
        assert_eq!(secrets.source, run.path().join(MASK_DIR));
        assert!(
            target(&m, &ws, "secrets/inner").is_none(),
            "covered by its parent"
        );
        assert!(target(&m, &ws, "missing").is_none(), "nothing to hide");
        let config = target(&m, &ws, "config").unwrap();
        assert!(config.read_only && config.source == config.target);
        assert!(m.protected.contains(&ws.join("config")));
        for mask in [MASK_FILE, MASK_DIR] {
            let mode = std::fs::metadata(run.path().join(mask)).unwrap().mode();
            assert_eq!(mode & 0o7777, 0, "{mask} is mode 0000");
        }
        remove_placeholders(run.path(), &ws);
    }

    #[test]
    fn names_hard_linked_outside_are_read_only_binds_and_past_the_cap_refused() {
        let base = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let base = base.path().canonicalize().unwrap();
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join("node_modules/pkg")).unwrap();
        std::fs::create_dir_all(ws.join("secrets")).unwrap();
        let outside = base.join("store.js");
        std::fs::write(&outside, "x").unwrap();
        std::fs::hard_link(&outside, ws.join("node_modules/pkg/index.js")).unwrap();
        std::fs::hard_link(&outside, ws.join("secrets/key")).unwrap();
        // Two names inside only: an ordinary file, no bind.
        std::fs::write(ws.join("a"), "a").unwrap();
        std::fs::hard_link(ws.join("a"), ws.join("b")).unwrap();
        let mut s = spec(&ws);
        s.denied_read = vec![ws.join("secrets")];
        let m = prepare(&ws, &s, run.path()).unwrap();
        let b = target(&m, &ws, "node_modules/pkg/index.js").expect("linked name bound");
        assert!(b.read_only && b.source == b.target);
        assert!(target(&m, &ws, "secrets/key").is_none(), "under a mask");
        assert!(target(&m, &ws, "a").is_none() && target(&m, &ws, "b").is_none());
        assert!(!m.protected.contains(&ws.join("node_modules/pkg/index.js")));
        remove_placeholders(run.path(), &ws);

        // Past the cap: refused before any placeholder is made, naming files and remedy.
        let store = base.join("store");
        std::fs::create_dir(&store).unwrap();
        for i in 0..hardlinks::DEFAULT_CAP {
            let src = store.join(format!("f{i}"));
            std::fs::write(&src, "x").unwrap();
            std::fs::hard_link(&src, ws.join(format!("node_modules/f{i:05}"))).unwrap();
        }
        let run = tempfile::tempdir().unwrap();
        let err = prepare(&ws, &spec(&ws), run.path())
            .unwrap_err()
            .to_string();
        // The cap's worth plus the two linked names from above.
        let count = hardlinks::DEFAULT_CAP + 2;
        assert!(
            err.contains(&format!("{count} files in the workspace are hard links")),
            "{err}"
        );
        assert!(err.contains("package-import-method copy"), "{err}");
        assert!(!ws.join(".mcp.json").exists(), "no placeholder made");
    }

    #[test]
    fn a_denied_path_outside_the_workspace_refuses_the_start() {
        let ws = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let mut s = spec(&ws);
        s.denied_read = vec![PathBuf::from("/etc/passwd")];
        assert!(prepare(&ws, &s, run.path()).is_err());
    }
}
