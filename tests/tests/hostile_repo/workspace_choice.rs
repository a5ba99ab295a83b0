//! Workspaces no session may have (issue 8, item 5), end to end: `/` is refused by
//! `cordon run` and `cordon sandbox` on both backends with a clear message and nothing
//! written (no placeholder at `/`, no session recorded, the command never ran); `/tmp`
//! as a workspace is refused clearly or works, and leaves no placeholder and no ACL on
//! `/tmp` either way. The commands a regression would run are harmless: the model only
//! answers, and the sandboxed command writes one file in the test's own temp dir.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cordon_tests::agent::{Output, run_command};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, backend_ready, cordon_bin, repo_root};

/// The names a backend could make placeholders of in a workspace's top directory: the
/// protected paths' first components, and the git dir.
fn placeholder_names() -> Vec<String> {
    let policy = std::fs::read_to_string(repo_root().join("policies/protected-paths.json"));
    let policy: serde_json::Value = serde_json::from_str(&policy.unwrap()).unwrap();
    let mut names: Vec<String> = policy["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["path"]
                .as_str()
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .into()
        })
        .collect();
    names.push(".git".into());
    names.sort();
    names.dedup();
    names
}

/// Which of the placeholder names exist in `dir` (links not followed).
fn present(dir: &Path) -> Vec<String> {
    placeholder_names()
        .into_iter()
        .filter(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
        .collect()
}

/// `dir`'s extended ACL entries, as getfacl prints them (none: empty).
fn acl_of(dir: &Path) -> String {
    let out = Command::new("getfacl")
        .args(["-p", "-n", "--skip-base"])
        .arg(dir)
        .output()
        .expect("getfacl (Debian package acl)");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The test's own HOME and CORDON_HOME, under the test workspaces' root (not in /tmp).
struct State {
    _dir: tempfile::TempDir,
    home: PathBuf,
    data: PathBuf,
    marker: PathBuf,
}

impl State {
    fn new() -> State {
        let root = cordon_tests::bin_dir().join("test-workspaces");
        std::fs::create_dir_all(&root).unwrap();
        let dir = tempfile::Builder::new()
            .prefix("choice-")
            .tempdir_in(root)
            .unwrap();
        let base = dir.path().canonicalize().unwrap();
        let home = base.join("home");
        std::fs::create_dir(&home).unwrap();
        State {
            _dir: dir,
            home,
            data: base.join("cordon-home"),
            marker: base.join("ran"),
        }
    }

    /// Sessions recorded in CORDON_HOME (none if it was never made).
    fn sessions(&self) -> usize {
        std::fs::read_dir(self.data.join("sessions")).map_or(0, Iterator::count)
    }

    /// `cordon run --workspace ws` on `backend`, the model only answering; the output
    /// and how many model calls were made.
    async fn run(&self, backend: Backend, ws: &Path) -> (Output, usize) {
        let model = ScriptedModel::start(vec![Turn::text("answered")])
            .await
            .unwrap();
        let mut cmd = run_command(&model, &self.data, ws, &["--sandbox", backend.name()]);
        cmd.env("HOME", &self.home).args(["-p", "hello"]);
        let out = Output::of(cmd).await;
        (out, model.requests().len())
    }

    /// `cordon sandbox --workspace ws` on `backend`, writing the marker if it runs.
    fn sandbox(&self, backend: Backend, ws: &Path) -> std::process::Output {
        let script = format!("echo ran > {}", self.marker.display());
        Command::new(cordon_bin())
            .args(["sandbox", "--backend", backend.name(), "--workspace"])
            .arg(ws)
            .args(["--", "sh", "-c", &script])
            .env("HOME", &self.home)
            .env("CORDON_HOME", &self.data)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

/// Refused with this message, and nothing ran.
fn assert_refused(code: Option<i32>, stderr: &str, message: &str) {
    assert_ne!(code, Some(0), "accepted: {stderr}");
    assert!(stderr.contains(message), "no {message:?}: {stderr}");
}

async fn root_is_refused(backend: Backend) {
    let state = State::new();
    let before = present(Path::new("/"));
    let message = "refusing the workspace /: a session could change every file";
    let (out, calls) = state.run(backend, Path::new("/")).await;
    assert_refused(Some(out.code), &out.stderr, message);
    assert_eq!(calls, 0, "the model was called");
    let out = state.sandbox(backend, Path::new("/"));
    assert_refused(
        out.status.code(),
        &String::from_utf8_lossy(&out.stderr),
        message,
    );
    assert!(!state.marker.exists(), "the sandboxed command ran");
    assert_eq!(state.sessions(), 0, "a session was recorded");
    assert_eq!(present(Path::new("/")), before, "placeholders made at /");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_as_a_workspace_is_refused_with_nothing_written() {
    root_is_refused(Backend::Local).await;
}

/// The refusal comes before the backend is reached, so this needs no Docker engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_root_as_a_workspace_is_refused_with_nothing_written() {
    root_is_refused(Backend::Docker).await;
}

/// `/tmp` (every local user may write there; on Docker also the container's own /tmp):
/// refused with a message naming it and why, or a session that works; either way
/// nothing of the sandbox is left on `/tmp`.
async fn tmp_is_refused_clearly_or_works(backend: Backend) {
    if !backend_ready(backend) {
        return;
    }
    let state = State::new();
    let tmp = Path::new("/tmp");
    let (names, acl) = (present(tmp), acl_of(tmp));
    let (out, calls) = state.run(backend, tmp).await;
    if out.code == 0 {
        assert_eq!(out.stdout.trim(), "answered", "{}", out.stderr);
    } else {
        assert_refused(Some(out.code), &out.stderr, "refusing the workspace /tmp: ");
        assert!(out.stderr.contains("every local user"), "{}", out.stderr);
        assert_eq!(calls, 0, "the model was called");
        assert!(!out.stderr.contains("Duplicate mount"), "{}", out.stderr);
    }
    let sandboxed = state.sandbox(backend, tmp);
    let stderr = String::from_utf8_lossy(&sandboxed.stderr);
    if sandboxed.status.success() {
        assert!(state.marker.exists(), "it worked, so the command ran");
    } else {
        assert_refused(
            sandboxed.status.code(),
            &stderr,
            "refusing the workspace /tmp: ",
        );
        assert!(!state.marker.exists(), "the sandboxed command ran");
    }
    assert_eq!(present(tmp), names, "placeholders left on /tmp");
    assert_eq!(acl_of(tmp), acl, "ACL entries left on /tmp");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmp_as_a_workspace_is_refused_clearly_or_works() {
    tmp_is_refused_clearly_or_works(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_tmp_as_a_workspace_is_refused_clearly_or_works() {
    tmp_is_refused_clearly_or_works(Backend::Docker).await;
}
