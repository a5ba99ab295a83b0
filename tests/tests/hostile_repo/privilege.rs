//! Privilege that would outlive the session on the host: setuid/setgid files made by Bash
//! (issue 8, item 2) and files hard-linked to names outside the workspace written through
//! by Bash (item 4). The hard-link cases run on both backends.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use cordon_tests::agent::{Output, run_command, run_json_ok, tool_results};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, backend_ready};
use serde_json::json;

/// One Bash call with `command` on the local backend, then a final answer; returns the
/// Bash result's text.
async fn run_bash(ws: &Path, command: &str) -> String {
    run_bash_on(Backend::Local, ws, command).await
}

/// [`run_bash`] on `backend`.
async fn run_bash_on(backend: Backend, ws: &Path, command: &str) -> String {
    let turns = vec![
        Turn::tool_use("b1", "Bash", json!({"command": command})),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    run_json_ok(
        &model,
        home.path(),
        ws,
        &[
            "--sandbox",
            backend.name(),
            "--permission-mode",
            "bypassPermissions",
            "-p",
        ],
        "go",
    )
    .await;
    let requests = model.requests();
    let results = tool_results(&requests[1].body);
    results[0].1.clone()
}

fn mode_and_owner(path: &Path) -> (u32, u32) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (meta.permissions().mode() & 0o7777, meta.uid())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setuid_shell_made_by_bash_is_not_setuid_on_the_host() {
    let ws = Workspace::new();
    let owner = std::fs::metadata(ws.path()).unwrap().uid();
    let text = run_bash(
        ws.path(),
        "cp /bin/sh x; chmod 6755 x; install -m 4755 /bin/sh y; \
         python3 -c \"import os; os.open('z', os.O_CREAT | os.O_WRONLY, 0o4755)\"; \
         mkdir -m 2755 d; ls -ln",
    )
    .await;
    assert!(text.contains("Operation not permitted"), "{text}");
    for name in ["x", "y"] {
        let (mode, uid) = mode_and_owner(&ws.join(name));
        assert_eq!(mode & 0o6000, 0, "{name}: {mode:o} on the host");
        assert_eq!(uid, owner, "{name} is owned by the workspace owner");
    }
    assert!(!ws.join("z").exists(), "the setuid create was refused");
    assert!(!ws.join("d").exists(), "the setgid mkdir was refused");
    // And the copy runs as whoever runs it on the host: no privilege to gain.
    let out = std::process::Command::new("/usr/bin/stat")
        .args(["-c", "%A"])
        .arg(ws.join("x"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "-rwxr-xr-x");
}

/// The same on Docker (the minimal image: busybox, no python or install): the chmod
/// family and a setgid mkdir are refused, and what reaches the host carries no
/// S_ISUID/S_ISGID, whoever owns it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_a_setuid_shell_made_by_bash_is_not_setuid_on_the_host() {
    if !backend_ready(Backend::Docker) {
        return;
    }
    let ws = Workspace::new();
    let text = run_bash_on(
        Backend::Docker,
        ws.path(),
        "cp /bin/busybox x; chmod 6755 x; cp /bin/busybox y; chmod u+s y; chmod g+s y; \
         cp -p x z; mkdir -m 2755 d; mkdir e; chmod 2755 e; ls -ln",
    )
    .await;
    assert!(text.contains("Operation not permitted"), "{text}");
    // busybox's `mkdir -m` is a mkdir then a chmod, and `cp -p` a copy then a chmod: the
    // entry may be there, never its bits.
    for name in ["x", "y", "z", "d", "e"] {
        let path = ws.join(name);
        if matches!(name, "z" | "d") && !path.exists() {
            continue;
        }
        let (mode, _) = mode_and_owner(&path);
        assert_eq!(mode & 0o6000, 0, "{name}: {mode:o} on the host\n{text}");
    }
    assert!(ws.join("x").is_file() && ws.join("e").is_dir(), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_cannot_write_through_a_hard_link_to_a_file_outside() {
    hard_link_to_a_file_outside_is_not_written_through(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_bash_cannot_write_through_a_hard_link_to_a_file_outside() {
    if backend_ready(Backend::Docker) {
        hard_link_to_a_file_outside_is_not_written_through(Backend::Docker).await;
    }
}

async fn hard_link_to_a_file_outside_is_not_written_through(backend: Backend) {
    // The outside file lives next to the workspace (same filesystem, the test's own dir).
    let outside = Workspace::new();
    let ws = Workspace::new();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "original\n").unwrap();
    std::fs::create_dir_all(ws.join("node_modules/pkg")).unwrap();
    std::fs::hard_link(&secret, ws.join("link")).unwrap();
    std::fs::hard_link(&secret, ws.join("node_modules/pkg/index.js")).unwrap();
    // Two names of one file, both inside: an ordinary file, stays writable.
    std::fs::write(ws.join("a"), "a\n").unwrap();
    std::fs::hard_link(ws.join("a"), ws.join("b")).unwrap();
    let text = run_bash_on(
        backend,
        ws.path(),
        "echo pwned > link; echo pwned >> node_modules/pkg/index.js; \
         sed -i s/original/pwned/ link; truncate -s 0 link; \
         python3 -c \"open('link', 'r+').write('pwned')\"; \
         echo new > a; cat b",
    )
    .await;
    assert!(text.contains("Read-only file system"), "{text}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "original\n");
    assert_eq!(
        std::fs::metadata(&secret).unwrap().nlink(),
        3,
        "links intact"
    );
    assert_eq!(std::fs::read_to_string(ws.join("b")).unwrap(), "new\n");
    assert!(text.contains("new"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_past_the_hard_link_cap_is_refused_with_the_remedy() {
    past_the_hard_link_cap_the_start_is_refused(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_a_workspace_past_the_hard_link_cap_is_refused_with_the_remedy() {
    if backend_ready(Backend::Docker) {
        past_the_hard_link_cap_the_start_is_refused(Backend::Docker).await;
    }
}

async fn past_the_hard_link_cap_the_start_is_refused(backend: Backend) {
    let outside = Workspace::new();
    let ws = Workspace::new();
    let cap = sandbox_agent::hostside::hardlinks::DEFAULT_CAP;
    std::fs::create_dir(ws.join("store")).unwrap();
    for i in 0..=cap {
        let src = outside.join(&format!("f{i}"));
        std::fs::write(&src, "x").unwrap();
        std::fs::hard_link(&src, ws.join(&format!("store/f{i:05}"))).unwrap();
    }
    let model = ScriptedModel::start(vec![Turn::text("never asked")])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = run_command(
        &model,
        home.path(),
        ws.path(),
        &["--sandbox", backend.name()],
    );
    cmd.args(["-p", "go"]);
    let out = Output::of(cmd).await;
    assert_ne!(out.code, 0, "{out:?}");
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains(&format!(
            "{} files in the workspace are hard links",
            cap + 1
        )),
        "{all}"
    );
    assert!(all.contains("store/f00000"), "{all}");
    assert!(all.contains("package-import-method copy"), "{all}");
    assert!(
        model.requests().is_empty(),
        "no model call before the refusal"
    );
}
