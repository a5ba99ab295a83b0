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
