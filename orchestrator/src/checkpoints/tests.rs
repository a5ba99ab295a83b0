use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::*;

struct Fixture {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
        }
    }

    fn store(&self) -> Checkpoints {
        Checkpoints::open(self.home.path(), "s1", self.ws.path()).unwrap()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.ws.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.path(rel)).ok()
    }
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

#[test]
fn rewind_restores_changed_and_deleted_and_removes_created() {
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    f.write("b.txt", "x\n");
    f.write("c.txt", "c\n");
    f.write("dir/keep.txt", "k\n");
    let store = f.store();
    store.snapshot("m1").unwrap();
    std::fs::remove_file(f.path("a.txt")).unwrap();
    f.write("b.txt", "y\n");
    std::fs::rename(f.path("c.txt"), f.path("d.txt")).unwrap();
    f.write("new/deep/e.txt", "e\n");
    std::fs::remove_dir_all(f.path("dir")).unwrap();
    let report = store.rewind("m1").unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("a\n"));
    assert_eq!(f.read("b.txt").as_deref(), Some("x\n"));
    assert_eq!(f.read("c.txt").as_deref(), Some("c\n"));
    assert_eq!(f.read("dir/keep.txt").as_deref(), Some("k\n"));
    assert!(!f.path("d.txt").exists());
    assert!(
        !f.path("new").exists(),
        "directories created since are pruned"
    );
    let mut restored = report.restored.clone();
    restored.sort();
    assert_eq!(
        restored,
        paths(&["a.txt", "b.txt", "c.txt", "dir/keep.txt"])
    );
    let mut removed = report.removed.clone();
    removed.sort();
    assert_eq!(removed, paths(&["d.txt", "new/deep/e.txt"]));
}

#[test]
fn a_later_checkpoint_rewinds_only_later_changes() {
    let f = Fixture::new();
    f.write("a.txt", "1\n");
    let store = f.store();
    store.snapshot("m1").unwrap();
    f.write("a.txt", "2\n");
    f.write("b.txt", "b\n");
    store.snapshot("m2").unwrap();
    f.write("a.txt", "3\n");
    f.write("c.txt", "c\n");
    let report = store.rewind("m2").unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("2\n"));
    assert_eq!(f.read("b.txt").as_deref(), Some("b\n"));
    assert!(!f.path("c.txt").exists());
    assert_eq!(report.removed, paths(&["c.txt"]));
    let list = store.list().unwrap();
    let ids: Vec<&str> = list.iter().map(|c| c.user_message_uuid.as_str()).collect();
    assert_eq!(ids, ["m1", "m2"]);
    store.rewind("m1").unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("1\n"));
    assert!(!f.path("b.txt").exists());
}

#[test]
fn ignored_files_and_the_workspace_git_are_left_alone() {
    let f = Fixture::new();
    f.write(".gitignore", "build/\n");
    f.write("build/out.bin", "old\n");
    f.write(".git/config", "[core]\n");
    let store = f.store();
    store.snapshot("m1").unwrap();
    f.write("build/out.bin", "new\n");
    f.write(".git/config", "[core]\n\tchanged = true\n");
    f.write("build/extra", "x\n");
    let report = store.rewind("m1").unwrap();
    assert_eq!(report, RewindReport::default());
    assert_eq!(f.read("build/out.bin").as_deref(), Some("new\n"));
    assert!(f.read(".git/config").unwrap().contains("changed"));
    assert!(f.path("build/extra").exists());
}

#[test]
fn symlinks_and_exec_bits_come_back_and_links_are_not_followed() {
    let f = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim"), "safe\n").unwrap();
    f.write("run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(f.path("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    f.write("sub/file.txt", "inside\n");
    std::os::unix::fs::symlink("run.sh", f.path("link")).unwrap();
    let store = f.store();
    store.snapshot("m1").unwrap();
    std::fs::remove_file(f.path("run.sh")).unwrap();
    std::fs::remove_file(f.path("link")).unwrap();
    // A directory replaced by a symlink out of the workspace: the rewind must write the
    // file into a real directory, never through the link.
    std::fs::remove_dir_all(f.path("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), f.path("sub")).unwrap();
    std::fs::write(outside.path().join("file.txt"), "outside\n").unwrap();
    store.rewind("m1").unwrap();
    let mode = std::fs::metadata(f.path("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "exec bit restored");
    assert_eq!(
        std::fs::read_link(f.path("link")).unwrap(),
        Path::new("run.sh")
    );
    assert!(
        !std::fs::symlink_metadata(f.path("sub"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(f.read("sub/file.txt").as_deref(), Some("inside\n"));
    assert_eq!(
        std::fs::read_to_string(outside.path().join("file.txt")).unwrap(),
        "outside\n"
    );
    assert!(outside.path().join("victim").exists());
}

#[test]
fn large_files_are_skipped_and_reported() {
    let f = Fixture::new();
    f.write("small.txt", "s\n");
    let big = std::fs::File::create(f.path("big.bin")).unwrap();
    big.set_len(MAX_FILE_BYTES + 1).unwrap();
    let store = f.store();
    let cp = store.snapshot("m1").unwrap();
    assert_eq!(cp.skipped, paths(&["big.bin"]));
    let out = store
        .git
        .run("ls-tree", None, &["ls-tree", "--name-only", &cp.tree], None)
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "small.txt\n");
    f.write("small.txt", "changed\n");
    let report = store.rewind("m1").unwrap();
    assert_eq!(report.restored, paths(&["small.txt"]));
    assert_eq!(report.skipped, paths(&["big.bin"]));
    assert!(f.path("big.bin").exists());
}

#[test]
fn workspace_attributes_and_hooks_do_not_apply() {
    let f = Fixture::new();
    f.write(".gitattributes", "* text eol=crlf filter=evil\n");
    f.write("crlf.txt", "line\r\nother\n");
    f.write(
        ".git/hooks/pre-commit",
        "#!/bin/sh\ntouch /tmp/should-not-run\n",
    );
    let store = f.store();
    store.snapshot("m1").unwrap();
    std::fs::remove_file(f.path("crlf.txt")).unwrap();
    store.rewind("m1").unwrap();
    assert_eq!(
        std::fs::read(f.path("crlf.txt")).unwrap(),
        b"line\r\nother\n",
        "bytes come back exactly"
    );
}

#[test]
fn unknown_checkpoints_and_bad_ids_are_errors() {
    let f = Fixture::new();
    let store = f.store();
    assert!(matches!(
        store.rewind("nope"),
        Err(CheckpointError::Unknown(_))
    ));
    assert!(matches!(
        store.snapshot("../x"),
        Err(CheckpointError::InvalidId(_))
    ));
    assert!(Checkpoints::open(f.home.path(), "../s", f.ws.path()).is_err());
}

#[test]
fn sandbox_placeholders_are_not_content() {
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    let store = f.store();
    // A running local sandbox put an empty placeholder at a missing protected path.
    let state = f.home.path().join("run/s1");
    std::fs::create_dir_all(&state).unwrap();
    let bashrc = store.workspace().join(".bashrc");
    std::fs::write(&bashrc, "").unwrap();
    let record = serde_json::json!([{ "path": bashrc, "kind": "file", "id": null }]);
    std::fs::write(state.join("placeholders.json"), record.to_string()).unwrap();
    store.snapshot("m1").unwrap();
    // The sandbox ended: its placeholder is gone, and a rewind does not bring it back.
    std::fs::remove_file(&bashrc).unwrap();
    std::fs::remove_dir_all(&state).unwrap();
    let report = store.rewind("m1").unwrap();
    assert_eq!(report, RewindReport::default());
    assert!(!bashrc.exists());
}

#[test]
fn emptying_gitignore_does_not_make_pre_existing_ignored_files_new() {
    let f = Fixture::new();
    f.write(".gitignore", "precious/\n*.log\n");
    f.write("precious/db.txt", "the user's data\n");
    f.write("debug.log", "old log\n");
    f.write("src.rs", "fn main() {}\n");
    let store = f.store();
    store.snapshot("m1").unwrap();
    // The model empties .gitignore and creates a file of its own.
    f.write(".gitignore", "");
    f.write("made.txt", "new\n");
    f.write("precious/also-new.txt", "in an ignored dir\n");
    let report = store.rewind("m1").unwrap();
    assert_eq!(
        f.read("precious/db.txt").as_deref(),
        Some("the user's data\n")
    );
    assert_eq!(f.read("debug.log").as_deref(), Some("old log\n"));
    assert_eq!(f.read(".gitignore").as_deref(), Some("precious/\n*.log\n"));
    assert!(!f.path("made.txt").exists(), "created since: removed");
    assert_eq!(report.removed, paths(&["made.txt"]));
    let mut kept = report.kept.clone();
    kept.sort();
    // An ignored directory counts as a whole, as git ignores it whole.
    assert_eq!(
        kept,
        paths(&["debug.log", "precious/also-new.txt", "precious/db.txt"])
    );
}

#[test]
fn a_docker_sessions_placeholders_and_masks_are_never_recorded() {
    let f = Fixture::new();
    f.write("code.rs", "x\n");
    f.write(".env", "SECRET=1\n");
    let ws = f.ws.path().canonicalize().unwrap();
    // A running Docker sandbox of session s1 (a pool container: the directory is named
    // after its slot): placeholders at missing protected paths, .env masked.
    let run = crate::sandbox::docker::run_root(f.home.path()).join("cordon-pool-1-x");
    std::fs::create_dir_all(&run).unwrap();
    let record = serde_json::json!({
        "session_id": "s1", "uid": 300000, "workspace": ws,
        "masked": [ws.join(".env")], "acl": false,
    });
    std::fs::write(run.join("session.json"), record.to_string()).unwrap();
    let placeholders: Vec<sandbox_agent::launch::protected::Placeholder> =
        [".bashrc", ".envrc", ".mcp.json"]
            .iter()
            .map(|p| sandbox_agent::launch::protected::Placeholder {
                rel: p.into(),
                kind: sandbox_agent::launch::protected::EntryKind::File,
                content: None,
            })
            .collect();
    sandbox_agent::launch::protected::create_placeholders(&run, &ws, &placeholders, (0, 0))
        .unwrap();
    let store = f.store();
    let cp = store.snapshot("m1").unwrap();
    let listing = store
        .git
        .run(
            "ls-tree",
            None,
            &["ls-tree", "-r", "--name-only", &cp.tree],
            None,
        )
        .unwrap();
    let listing = String::from_utf8_lossy(&listing);
    assert!(listing.contains("code.rs"));
    for absent in [".bashrc", ".envrc", ".mcp.json", ".env"] {
        assert!(
            !listing.lines().any(|l| l == absent),
            "{absent} in {listing}"
        );
    }
    assert!(matches!(
        store.rewind_idle("m1"),
        Err(CheckpointError::SandboxRunning(_))
    ));
    // The session ends: placeholders go, the run directory with them.
    sandbox_agent::launch::protected::remove_placeholders(&run, &ws);
    std::fs::remove_dir_all(&run).unwrap();
    let report = store.rewind_idle("m1").unwrap();
    for absent in [".bashrc", ".envrc", ".mcp.json"] {
        assert!(!f.path(absent).exists(), "{absent} restored as a user file");
    }
    assert_eq!(
        f.read(".env").as_deref(),
        Some("SECRET=1\n"),
        "never removed"
    );
    assert!(report.removed.is_empty(), "{report:?}");
}

#[test]
fn a_snapshot_over_the_budget_fails_clearly_and_leaves_the_store_as_it_was() {
    let f = Fixture::new();
    f.write("small.txt", "s\n");
    let budget = 256 * 1024;
    let store = f.store().with_budget(budget);
    store.snapshot("m1").unwrap();
    // Incompressible content well over the budget (xorshift noise).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: String = (0..800_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 90) as u8)
        })
        .collect();
    f.write("big.txt", &noise);
    let err = store.snapshot("m2").unwrap_err();
    assert!(matches!(err, CheckpointError::Budget { .. }), "{err}");
    assert!(err.to_string().contains("checkpointStoreMaxMiB"), "{err}");
    assert!(super::store::size(&store.git.git_dir) <= budget);
    // A rewind first saves the current state; over the budget it refuses rather than
    // remove or overwrite anything unsaved.
    assert!(matches!(
        store.rewind("m1"),
        Err(CheckpointError::Budget { .. })
    ));
    assert!(f.path("big.txt").exists());
    // Within the budget again, the earlier checkpoint still rewinds.
    std::fs::remove_file(f.path("big.txt")).unwrap();
    f.write("small.txt", "changed\n");
    store.rewind("m1").unwrap();
    assert_eq!(f.read("small.txt").as_deref(), Some("s\n"));
}

#[test]
fn the_store_is_private_to_the_user() {
    use std::os::unix::fs::MetadataExt;
    let f = Fixture::new();
    f.write(".env", "SECRET=1\n");
    let store = f.store();
    store.snapshot("m1").unwrap();
    let root = f.home.path().join("checkpoints");
    let mut bad = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        if mode != 0o700 {
            bad.push(format!("{} {mode:o}", dir.display()));
        }
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() && meta.mode() & 0o077 != 0 {
                bad.push(format!("{} {:o}", e.path().display(), meta.mode() & 0o777));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn a_symlink_swapped_in_for_a_directory_cannot_redirect_a_rewind() {
    let f = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim.txt"), "outside\n").unwrap();
    f.write("dir/victim.txt", "v1\n");
    let store = f.store();
    store.snapshot("m1").unwrap();
    f.write("dir/victim.txt", "v2\n");
    f.write("dir/new.txt", "n\n");
    store.snapshot("m2").unwrap();
    // The sandbox swaps the directory for a link to a host directory.
    std::fs::rename(f.path("dir"), f.path("moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), f.path("dir")).unwrap();
    let _ = store.rewind("m1").unwrap();
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim.txt")).unwrap(),
        "outside\n",
        "nothing written through the link"
    );
    assert!(
        std::fs::symlink_metadata(f.path("dir")).unwrap().is_dir(),
        "the link was replaced"
    );
    assert_eq!(f.read("dir/victim.txt").as_deref(), Some("v1\n"));
}
