//! Rewind and the Docker workspace after a hostile session: a model that empties
//! `.gitignore` cannot get pre-existing ignored files deleted by a rewind; a Docker
//! session's placeholders are never restored as user files; what a Docker session made
//! is the workspace owner's, with no ACL left on the tree, even when the container
//! could not be created.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use cordon_tests::agent::{Output, cordon_command};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, backend_ready};
use serde_json::json;

/// A uid and gid no host user has: the workspace owner in these tests, so "owned by the
/// owner" cannot pass by accident as root.
const OWNER: u32 = 4242;

fn bash(id: &str, command: &str) -> Turn {
    Turn::tool_use(id, "Bash", json!({ "command": command }))
}

/// `cordon run` on `backend` with `turns`, in `home`; returns its output (exit 0 asserted)
/// and the session id.
async fn run(backend: Backend, ws: &Path, home: &Path, turns: Vec<Turn>) -> (Output, String) {
    let model = ScriptedModel::start(turns).await.unwrap();
    let ws_arg = ws.to_str().unwrap();
    let out = Output::of(cordon_command(
        &model,
        home,
        &[
            "run",
            "--sandbox",
            backend.name(),
            "--workspace",
            ws_arg,
            "--output-format",
            "json",
            "--permission-mode",
            "bypassPermissions",
            "do it",
        ],
    ))
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let session = out.json()["session_id"].as_str().unwrap().to_string();
    (out, session)
}

/// `cordon rewind --session S --to <first checkpoint> --json`.
async fn rewind_to_first(home: &Path, session: &str) -> serde_json::Value {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let list = Output::of(cordon_command(
        &model,
        home,
        &["rewind", "--session", session, "--list", "--json"],
    ))
    .await;
    assert_eq!(list.code, 0, "{}", list.stderr);
    let uuid = list.json()[0]["user_message_uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let out = Output::of(cordon_command(
        &model,
        home,
        &["rewind", "--session", session, "--to", &uuid, "--json"],
    ))
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    out.json()
}

/// Every path under `ws` that carries an extended ACL (getfacl prints none otherwise).
fn acl_entries(ws: &Path) -> String {
    let out = Command::new("getfacl")
        .args(["-R", "-P", "-p", "-n", "--skip-base"])
        .arg(ws)
        .output()
        .expect("getfacl (Debian package acl)");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn chown_tree(ws: &Path, uid: u32) {
    let ok = Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(ws)
        .status()
        .unwrap();
    assert!(ok.success());
}

async fn emptied_gitignore_then_rewind_keeps_precious_files(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let ws = Workspace::new();
    std::fs::write(ws.join(".gitignore"), "precious/\n*.db\n").unwrap();
    std::fs::create_dir_all(ws.join("precious")).unwrap();
    std::fs::write(ws.join("precious/db.txt"), "years of data\n").unwrap();
    std::fs::write(ws.join("cache.db"), "local cache\n").unwrap();
    std::fs::write(ws.join("main.rs"), "fn main() {}\n").unwrap();
    let home = tempfile::tempdir().unwrap();
    let (_, session) = run(
        backend,
        ws.path(),
        home.path(),
        vec![
            bash("b1", ": > .gitignore && echo mine > model-made.txt"),
            Turn::text("done"),
        ],
    )
    .await;
    assert_eq!(std::fs::read_to_string(ws.join(".gitignore")).unwrap(), "");
    let report = rewind_to_first(home.path(), &session).await;
    assert_eq!(
        std::fs::read_to_string(ws.join("precious/db.txt")).unwrap(),
        "years of data\n",
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("cache.db")).unwrap(),
        "local cache\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".gitignore")).unwrap(),
        "precious/\n*.db\n"
    );
    assert!(!ws.join("model-made.txt").exists(), "{report}");
    assert_eq!(report["removed"], json!(["model-made.txt"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_emptied_gitignore_then_rewind_keeps_precious_files() {
    emptied_gitignore_then_rewind_keeps_precious_files(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_emptied_gitignore_then_rewind_keeps_precious_files() {
    emptied_gitignore_then_rewind_keeps_precious_files(Backend::Docker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_rewind_does_not_restore_the_sandbox_placeholders() {
    if !backend_ready(Backend::Docker) {
        return;
    }
    let ws = Workspace::new();
    std::fs::write(ws.join("main.rs"), "fn main() {}\n").unwrap();
    let home = tempfile::tempdir().unwrap();
    let (_, session) = run(
        Backend::Docker,
        ws.path(),
        home.path(),
        vec![
            // The placeholders exist while the session runs (read-only, empty).
            bash("b1", "ls -a; echo changed > main.rs"),
            Turn::text("done"),
        ],
    )
    .await;
    let report = rewind_to_first(home.path(), &session).await;
    assert_eq!(report["restored"], json!(["main.rs"]), "{report}");
    for rc in [
        ".bashrc",
        ".zshrc",
        ".profile",
        ".envrc",
        ".mcp.json",
        ".claude",
    ] {
        assert!(
            std::fs::symlink_metadata(ws.join(rc)).is_err(),
            "{rc} left or restored in the workspace: {report}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_files_made_inside_are_the_owners_and_no_acl_is_left() {
    if !backend_ready(Backend::Docker) {
        return;
    }
    let ws = Workspace::new();
    std::fs::write(ws.join("existing.txt"), "old\n").unwrap();
    chown_tree(ws.path(), OWNER);
    let home = tempfile::tempdir().unwrap();
    let (out, _) = run(
        Backend::Docker,
        ws.path(),
        home.path(),
        vec![
            bash(
                "b1",
                "mkdir -p made/deep && echo x > made/deep/f && echo y >> existing.txt \
                 && cp /bin/busybox made/suid; chmod 4755 made/suid; chmod u+s,g+s made/suid; \
                 ls -ln made existing.txt",
            ),
            Turn::text("done"),
        ],
    )
    .await;
    for rel in ["made", "made/deep", "made/deep/f", "existing.txt"] {
        let meta = std::fs::symlink_metadata(ws.join(rel)).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (OWNER, OWNER),
            "{rel} is not the workspace owner's\n{}",
            out.stdout
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("existing.txt")).unwrap(),
        "old\ny\n"
    );
    assert_eq!(acl_entries(ws.path()), "", "ACL entries left on the tree");
    // The copy is there, the owner's, and carries no privilege bit on the host.
    let meta = std::fs::symlink_metadata(ws.join("made/suid")).unwrap();
    assert_eq!(meta.uid(), OWNER);
    assert_eq!(
        meta.mode() & (libc::S_ISUID | libc::S_ISGID),
        0,
        "made/suid is {:o} on the host\n{}",
        meta.mode(),
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_docker_container_creation_leaves_no_acl() {
    if !backend_ready(Backend::Docker) {
        return;
    }
    // An image the engine has whose container cannot start: no agent in it.
    let image = "cordon-test-broken";
    let have = Command::new("docker")
        .args(["image", "inspect", image])
        .output()
        .unwrap();
    if !have.status.success() {
        let import = Command::new("sh")
            .args([
                "-c",
                &format!("tar -c -T /dev/null | docker import - {image} >/dev/null"),
            ])
            .status()
            .unwrap();
        assert!(import.success(), "docker import of an empty image");
    }
    let ws = Workspace::new();
    std::fs::write(ws.join("f.txt"), "x\n").unwrap();
    chown_tree(ws.path(), OWNER);
    let before = acl_entries(ws.path());
    let model = ScriptedModel::start(vec![Turn::text("never")])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = Output::of(cordon_command(
        &model,
        home.path(),
        &[
            "run",
            "--sandbox",
            "docker",
            "--image",
            image,
            "--workspace",
            ws.path().to_str().unwrap(),
            "-p",
            "hello",
        ],
    ))
    .await;
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(out.stderr.contains("sandbox"), "{}", out.stderr);
    assert_eq!(acl_entries(ws.path()), before, "the tree's ACLs changed");
    let meta = std::fs::metadata(ws.path()).unwrap();
    assert_eq!(meta.uid(), OWNER);
}
