//! The model's tools end to end against the real sandbox agent binary, spawned on the host
//! in serve mode with a socket in a temp dir (build it first: `cargo build -p sandbox-agent`;
//! a workspace `cargo test` builds it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed test step panics with its message

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cordon::tools::{Interrupter, ToolContext, ToolOutput, ToolRegistry};
use sandbox_agent::client::AgentClient;
use sandbox_agent::config::AgentConfig;
use serde_json::{Value, json};

/// An agent serving one temp workspace, killed on drop, and a tool context talking to it.
struct Session {
    child: Child,
    ws: PathBuf,
    ctx: ToolContext,
    interrupter: Interrupter,
    tools: ToolRegistry,
    _dir: tempfile::TempDir,
}

/// target/debug/sandbox-agent, next to this test's deps/ directory.
fn agent_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("sandbox-agent");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p sandbox-agent` first",
        bin.display()
    );
    bin
}

impl Session {
    async fn start() -> Session {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        let socket = dir.path().join("agent.sock");
        let config = AgentConfig {
            socket_path: socket.clone(),
            workspace: ws.clone(),
            tmp_dir: tmp,
            extra_writable: vec![],
            extra_readable: Vec::new(),
            command_env: Vec::new(),
            protected_paths: vec![],
            network: false,
            egress: None,
            best_effort: false,
            rlimits: Default::default(),
            disk_budget_bytes: None,
            exec_cgroup: None,
            require_outside_peer: false,
        };
        let child = Command::new(agent_binary())
            .arg("--config")
            .arg(serde_json::to_string(&config).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = KillOnDrop(Some(child));
        let client = connect(&socket).await;
        let child = child.0.take().unwrap();
        let (ctx, interrupter) = ToolContext::new(client, &ws);
        Session {
            child,
            ws,
            ctx,
            interrupter,
            tools: ToolRegistry::default_tools(),
            _dir: dir,
        }
    }

    async fn call(&self, tool: &str, input: Value) -> ToolOutput {
        self.tools.call(tool, &self.ctx, input).await
    }

    /// A path in the workspace, as the string the model would send.
    fn path(&self, rel: &str) -> String {
        self.ws.join(rel).display().to_string()
    }

    fn file(&self, rel: &str, content: &str) -> String {
        let p = self.ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p.display().to_string()
    }
}

/// Kills the agent if the session never finishes starting.
struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Connects once the agent listens: the socket file can appear just before `listen`.
async fn connect(socket: &std::path::Path) -> AgentClient {
    let mut last = None;
    for _ in 0..100 {
        match AgentClient::connect_unix_waiting(socket, Duration::from_secs(10)).await {
            Ok(client) => return client,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("cannot connect to the agent: {last:?}");
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ok(out: &ToolOutput) -> &str {
    assert!(!out.is_error, "unexpected error: {}", out.content);
    &out.content
}

fn err(out: &ToolOutput) -> &str {
    assert!(out.is_error, "expected an error, got: {}", out.content);
    &out.content
}

// ------------------------------------------------------------------ Read

#[tokio::test]
async fn read_returns_numbered_lines_and_says_when_partial() {
    let s = Session::start().await;
    let f = s.file("a.txt", "one\ntwo\nthree\nfour\nfive\n");
    let whole = s.call("Read", json!({"file_path": f})).await;
    assert_eq!(
        ok(&whole),
        "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n     5\tfive\n"
    );
    let part = s
        .call("Read", json!({"file_path": f, "offset": 2, "limit": 2}))
        .await;
    assert_eq!(
        ok(&part),
        "     2\ttwo\n     3\tthree\n[showing lines 2-3 of 5; use offset/limit to see more]"
    );
}

#[tokio::test]
async fn read_explains_empty_missing_relative_and_binary() {
    let s = Session::start().await;
    let empty = s.file("empty.txt", "");
    assert!(ok(&s.call("Read", json!({"file_path": empty})).await).contains("empty"));
    let missing = s
        .call("Read", json!({"file_path": s.path("nope.txt")}))
        .await;
    assert!(err(&missing).starts_with("Read: "), "{}", missing.content);
    let relative = s.call("Read", json!({"file_path": "a.txt"})).await;
    assert!(
        err(&relative).contains(&s.path("a.txt")),
        "{}",
        relative.content
    );
    let bin = s.ws.join("b.bin");
    std::fs::write(&bin, [0u8, 1, 2, 3, 0, 255]).unwrap();
    let out = s
        .call("Read", json!({"file_path": bin.display().to_string()}))
        .await;
    assert!(ok(&out).contains("binary file"), "{}", out.content);
}

// ------------------------------------------------------------------ Edit

#[tokio::test]
async fn edit_without_a_read_is_refused_and_writes_nothing() {
    let s = Session::start().await;
    let f = s.file("a.rs", "fn main() {}\n");
    let input = json!({"file_path": f, "old_string": "main", "new_string": "start"});
    let out = s.call("Edit", input).await;
    assert!(err(&out).contains("read the file first"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "fn main() {}\n");
}

#[tokio::test]
async fn edit_after_a_read_works_and_chains() {
    let s = Session::start().await;
    let f = s.file("a.rs", "fn main() {\n    let x = 1;\n}\n");
    ok(&s.call("Read", json!({"file_path": f})).await);
    let out = s
        .call(
            "Edit",
            json!({"file_path": f, "old_string": "x = 1", "new_string": "x = 2"}),
        )
        .await;
    assert!(ok(&out).contains("1 replacement"), "{}", out.content);
    assert!(out.content.contains("let x = 2;"), "{}", out.content);
    // The stamp follows our own edit: a second edit needs no new Read.
    let out = s
        .call(
            "Edit",
            json!({"file_path": f, "old_string": "x = 2", "new_string": "x = 3"}),
        )
        .await;
    ok(&out);
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "fn main() {\n    let x = 3;\n}\n"
    );
}

#[tokio::test]
async fn edit_of_a_file_changed_since_the_read_is_refused() {
    let s = Session::start().await;
    let f = s.file("a.rs", "alpha\n");
    ok(&s.call("Read", json!({"file_path": f})).await);
    std::fs::write(&f, "alpha beta\n").unwrap();
    let out = s
        .call(
            "Edit",
            json!({"file_path": f, "old_string": "alpha", "new_string": "gamma"}),
        )
        .await;
    assert!(err(&out).contains("changed since"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "alpha beta\n");
    // Reading again clears the way.
    ok(&s.call("Read", json!({"file_path": f})).await);
    ok(&s
        .call(
            "Edit",
            json!({"file_path": f, "old_string": "alpha", "new_string": "gamma"}),
        )
        .await);
}

#[tokio::test]
async fn edit_mismatches_are_actionable() {
    let s = Session::start().await;
    let f = s.file("a.txt", "x\nx\n");
    ok(&s.call("Read", json!({"file_path": f})).await);
    let out = s
        .call(
            "Edit",
            json!({"file_path": f, "old_string": "x", "new_string": "y"}),
        )
        .await;
    assert!(err(&out).contains("replace_all"), "{}", out.content);
    let out = s
        .call(
            "Edit",
            json!({"file_path": f, "old_string": "zzz", "new_string": "y"}),
        )
        .await;
    assert!(err(&out).contains("not found"), "{}", out.content);
    let out = s
        .call(
            "Edit",
            json!({"file_path": f, "old_string": "x", "new_string": "y", "replace_all": true}),
        )
        .await;
    assert!(ok(&out).contains("2 replacements"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "y\ny\n");
}

// ------------------------------------------------------------------ Write

#[tokio::test]
async fn write_creates_new_files_but_replaces_only_read_ones() {
    let s = Session::start().await;
    let new = s.path("sub/dir/new.txt");
    let out = s
        .call("Write", json!({"file_path": new, "content": "hi\n"}))
        .await;
    assert!(ok(&out).starts_with("Created"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "hi\n");
    // We wrote it, so we know what it holds: replacing it needs no Read.
    ok(&s
        .call("Write", json!({"file_path": new, "content": "again\n"}))
        .await);

    let existing = s.file("old.txt", "precious\n");
    let out = s
        .call("Write", json!({"file_path": existing, "content": "x"}))
        .await;
    assert!(
        err(&out).contains("read it with Read first"),
        "{}",
        out.content
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "precious\n");

    ok(&s.call("Read", json!({"file_path": existing})).await);
    std::fs::write(&existing, "changed\n").unwrap();
    let out = s
        .call("Write", json!({"file_path": existing, "content": "x"}))
        .await;
    assert!(err(&out).contains("changed since"), "{}", out.content);

    ok(&s.call("Read", json!({"file_path": existing})).await);
    let out = s
        .call("Write", json!({"file_path": existing, "content": "x"}))
        .await;
    assert!(ok(&out).starts_with("Replaced"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "x");
}

// ------------------------------------------------------------------ Bash

#[tokio::test]
async fn bash_reports_output_and_exit_codes() {
    let s = Session::start().await;
    let out = s
        .call(
            "Bash",
            json!({"command": "echo out; echo err >&2", "description": "x"}),
        )
        .await;
    let text = ok(&out);
    assert!(text.contains("out") && text.contains("err"), "{text}");
    let out = s
        .call("Bash", json!({"command": "echo failing; exit 3"}))
        .await;
    assert_eq!(err(&out), "failing\nExit code 3");
    let out = s.call("Bash", json!({"command": "true"})).await;
    assert_eq!(ok(&out), "(no output)");
}

#[tokio::test]
async fn bash_times_out_with_a_clear_error() {
    let s = Session::start().await;
    let out = s
        .call("Bash", json!({"command": "sleep 30", "timeout": 300}))
        .await;
    assert!(
        err(&out).contains("Command timed out after 0.3s"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn bash_working_directory_carries_over_but_exports_do_not() {
    let s = Session::start().await;
    ok(&s
        .call(
            "Bash",
            json!({"command": "mkdir -p sub && cd sub && export FOO=bar"}),
        )
        .await);
    let out = s
        .call("Bash", json!({"command": "pwd; echo \"foo=$FOO\""}))
        .await;
    let text = ok(&out);
    assert!(text.contains(&s.path("sub")), "{text}");
    assert!(text.contains("foo=\n") || text.ends_with("foo="), "{text}");
}

#[tokio::test]
async fn bash_long_output_is_cut_and_the_full_output_named() {
    let s = Session::start().await;
    let out = s.call("Bash", json!({"command": "seq 1 20000"})).await;
    let text = ok(&out);
    assert!(text.len() < 31_000, "{} chars", text.len());
    // The agent's marker or our own line names the file holding everything.
    let path = text
        .split(['\n', ' ', ']'])
        .rev()
        .find(|w| w.starts_with('/'))
        .unwrap_or_else(|| panic!("no full output path in: {}", &text[text.len() - 300..]));
    let full = std::fs::read_to_string(path).unwrap();
    assert!(
        full.ends_with("19999\n20000\n"),
        "{}",
        &full[full.len() - 50..]
    );
}

#[tokio::test]
async fn bash_is_cancelled_by_an_interrupt() {
    let s = Session::start().await;
    let marker = s.ws.join("started");
    let call = s.call(
        "Bash",
        json!({"command": "touch started; sleep 60", "timeout": 120000}),
    );
    let interrupt = async {
        while !marker.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        s.interrupter.interrupt();
    };
    let (out, ()) = tokio::join!(call, interrupt);
    assert!(err(&out).contains("interrupted"), "{}", out.content);
}

#[tokio::test]
async fn bash_in_background_runs_is_read_and_stopped_without_cgroups() {
    // This agent has no delegated cgroups: the /proc-scan kill path.
    let s = Session::start().await;
    let out = s
        .call(
            "Bash",
            json!({"command": "echo one; echo two >&2", "run_in_background": true}),
        )
        .await;
    assert!(
        !out.is_error && out.content.contains("bash_1"),
        "{}",
        out.content
    );
    let read = s
        .call("TaskOutput", json!({"task_id": "bash_1", "timeout": 60000}))
        .await;
    assert!(!read.is_error, "{}", read.content);
    assert!(
        read.content.contains("<status>completed</status>"),
        "{}",
        read.content
    );
    assert!(
        read.content.contains("<exit_code>0</exit_code>"),
        "{}",
        read.content
    );
    assert!(
        read.content.contains("one\ntwo"),
        "stderr joins stdout: {}",
        read.content
    );
    let again = s
        .call("BashOutput", json!({"bash_id": "bash_1", "block": false}))
        .await;
    assert!(
        again.content.contains("(no new output)"),
        "{}",
        again.content
    );
    let sleeper = s
        .call(
            "Bash",
            json!({"command": "sleep 600", "run_in_background": true}),
        )
        .await;
    assert!(sleeper.content.contains("bash_2"), "{}", sleeper.content);
    let stop = s.call("KillShell", json!({"shell_id": "bash_2"})).await;
    assert!(!stop.is_error, "{}", stop.content);
    let after = s
        .call("TaskOutput", json!({"task_id": "bash_2", "block": false}))
        .await;
    assert!(
        after.content.contains("<status>killed</status>"),
        "{}",
        after.content
    );
}

// ------------------------------------------------------------------ Glob and Grep

#[tokio::test]
async fn glob_lists_matches_or_says_none() {
    let s = Session::start().await;
    let a = s.file("src/a.rs", "fn main() {}\n");
    s.file("src/b.txt", "");
    let out = s
        .call("Glob", json!({"pattern": "**/*.rs", "path": s.path("")}))
        .await;
    assert_eq!(ok(&out), a);
    let out = s.call("Glob", json!({"pattern": "**/*.py"})).await;
    assert_eq!(ok(&out), "No files found");
}

#[tokio::test]
async fn grep_maps_modes_and_flags() {
    let s = Session::start().await;
    let a = s.file("a.rs", "fn main() {\n    println!(\"Hello\");\n}\n");
    s.file("b.py", "print('hello')\n");
    let out = s
        .call(
            "Grep",
            json!({"pattern": "hello", "-i": true, "path": s.path("")}),
        )
        .await;
    let files = ok(&out);
    assert!(files.contains(&a) && files.contains("b.py"), "{files}");
    let out = s
        .call(
            "Grep",
            json!({"pattern": "Hello", "output_mode": "content", "type": "rust"}),
        )
        .await;
    assert!(ok(&out).contains(":2:"), "{}", out.content);
    let out = s.call("Grep", json!({"pattern": "nothing here"})).await;
    assert_eq!(ok(&out), "No matches found");
    let out = s.call("Grep", json!({"pattern": "(unclosed"})).await;
    assert!(err(&out).starts_with("Grep: "), "{}", out.content);
}

// ------------------------------------------------------------------ failures

#[tokio::test]
async fn a_dead_agent_is_reported_not_crashed_on() {
    let mut s = Session::start().await;
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let out = s.call("Read", json!({"file_path": s.path("a.txt")})).await;
    assert!(
        err(&out).contains("the sandbox is not responding"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn invalid_input_never_reaches_the_agent() {
    let s = Session::start().await;
    let out = s
        .call("Edit", json!({"file_path": s.path("a"), "new_string": "x"}))
        .await;
    assert_eq!(err(&out), "Edit: missing required field `old_string`");
}
