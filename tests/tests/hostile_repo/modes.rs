//! The four permission modes as Claude Code users run them headless, on one small coding
//! task the scripted model drives end to end: Read a shell library, Edit its bug away, Bash
//! with a redirect (`> out.txt`), Bash running the test. Each test checks the workspace
//! afterwards and the session transcript (every call's permission decision and outcome).
//! State (CORDON_HOME, managed and user settings) lives in temp dirs.

use std::collections::BTreeMap;

use cordon_tests::Workspace;
use cordon_tests::agent::{Output, run_command, tool_results};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use serde_json::{Value, json};

use crate::trust::strict;

const LIB: &str = "add() { echo $(($1 - $2)); }\n";
const TEST: &str = "echo ran > test-ran.txt\n. ./lib.sh\n[ \"$(add 2 3)\" = 5 ] && echo 'tests passed' || \
                    { echo 'tests failed'; exit 1; }\n";
/// The tool calls, in order (one per model turn).
const IDS: [&str; 4] = ["read", "edit", "redirect", "test"];

/// What one run of the task left: each call's tool result (text, is_error) and transcript
/// records (decision, its reason, and the tool_call's is_error when it ran), by id.
struct Task {
    ws: Workspace,
    results: BTreeMap<String, (String, bool)>,
    decisions: BTreeMap<String, (String, String)>,
    ran: BTreeMap<String, bool>,
}

impl Task {
    fn result(&self, id: &str) -> &(String, bool) {
        &self.results[id]
    }

    fn decision(&self, id: &str) -> &str {
        &self.decisions[id].0
    }

    /// The workspace as a finished task leaves it: the bug fixed, out.txt written.
    fn assert_done(&self) {
        for id in IDS {
            assert!(!self.result(id).1, "{id}: {:?}", self.result(id));
            assert_eq!(self.decision(id), "allow", "{id}: {:?}", self.decisions[id]);
            assert_eq!(self.ran.get(id), Some(&false), "{id} did not run cleanly");
        }
        let lib = std::fs::read_to_string(self.ws.join("lib.sh")).unwrap();
        assert!(lib.contains("$1 + $2"), "{lib}");
        let out = std::fs::read_to_string(self.ws.join("out.txt")).unwrap();
        assert_eq!(out, "fixed add\n");
        assert!(
            self.result("test").0.contains("tests passed"),
            "{:?}",
            self.result("test")
        );
    }
}

/// Runs the task with `args` (and `managed` settings when given).
async fn run_task(args: &[&str], managed: Option<Value>) -> Task {
    let ws = Workspace::new();
    std::fs::write(ws.join("lib.sh"), LIB).unwrap();
    std::fs::write(ws.join("test.sh"), TEST).unwrap();
    let lib = ws.join("lib.sh");
    let model = ScriptedModel::start(vec![
        Turn::tool_use("read", "Read", json!({"file_path": lib})),
        Turn::tool_use(
            "edit",
            "Edit",
            json!({"file_path": lib, "old_string": "$1 - $2", "new_string": "$1 + $2"}),
        ),
        Turn::tool_use(
            "redirect",
            "Bash",
            json!({"command": "echo 'fixed add' > out.txt"}),
        ),
        Turn::tool_use("test", "Bash", json!({"command": "sh test.sh"})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let managed_path = home.path().join("managed-settings.json");
    if let Some(m) = managed {
        std::fs::write(&managed_path, m.to_string()).unwrap();
    }
    let mut cmd = run_command(&model, home.path(), ws.path(), &["--output-format", "json"]);
    cmd.arg("fix add and run the tests")
        .args(args)
        .env("CORDON_MANAGED_SETTINGS", &managed_path)
        .env(
            "CORDON_USER_SETTINGS",
            home.path().join("user-settings.json"),
        );
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    assert_eq!(requests.len(), 5, "one request per turn");
    let mut results = BTreeMap::new();
    for req in &requests[1..] {
        for (id, text, is_error) in tool_results(&req.body) {
            results.insert(id, (text, is_error));
        }
    }
    let session = out.json()["session_id"].as_str().unwrap().to_string();
    let transcript = std::fs::read_to_string(
        home.path()
            .join("sessions")
            .join(format!("{session}.jsonl")),
    )
    .unwrap();
    let mut decisions = BTreeMap::new();
    let mut ran = BTreeMap::new();
    for rec in transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        let id = rec["tool_use_id"].as_str().unwrap_or_default().to_string();
        match rec["type"].as_str() {
            Some("decision") => {
                let d = (
                    rec["decision"].as_str().unwrap(),
                    rec["reason"].as_str().unwrap(),
                );
                decisions.insert(id, (d.0.to_string(), d.1.to_string()));
            }
            Some("tool_call") => {
                ran.insert(id, rec["is_error"].as_bool().unwrap());
            }
            _ => {}
        }
    }
    Task {
        ws,
        results,
        decisions,
        ran,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_in_bypass_permissions_mode() {
    let task = run_task(&["--permission-mode", "bypassPermissions"], None).await;
    task.assert_done();
}

/// acceptEdits allows the Edit; `--allowedTools Bash` (a bare tool allow) allows every
/// command, the redirect included. Under strict managed settings, so that the allow rule
/// is what lets the Bash calls run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_in_accept_edits_mode_with_bash_allowed() {
    let args = ["--permission-mode", "acceptEdits", "--allowedTools", "Bash"];
    let task = run_task(&args, Some(strict())).await;
    task.assert_done();
    // The redirect is a file edit, which acceptEdits allows; the test run needs the rule.
    let reason = &task.decisions["test"].1;
    assert!(reason.contains("rule Bash"), "{reason}");
}

/// Default mode with the sandbox auto-allow (`sandbox.autoAllowBashIfSandboxed`, on by
/// default): the Edit is allowed by `--allowedTools Edit`, and both Bash calls run without
/// a rule because they run sandboxed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_in_default_mode_with_sandbox_auto_allow() {
    let task = run_task(&["--allowedTools", "Edit"], None).await;
    task.assert_done();
    let reason = &task.decisions["test"].1;
    assert!(reason.contains("sandbox"), "{reason}");
}

/// A Bash call the strict mode refuses: denied (nobody can approve it headless) with a
/// message saying how to allow it, and it did not run.
fn assert_refused(task: &Task, id: &str) {
    let (text, is_error) = task.result(id);
    assert!(is_error, "{id} ran: {text}");
    assert!(text.contains("needs approval"), "{id}: {text}");
    assert!(text.contains("--allowedTools Bash"), "{id}: {text}");
    assert_eq!(task.decision(id), "deny", "{id}");
    assert!(task.ran.get(id).is_none_or(|&e| e), "{id} ran cleanly");
}

/// Default strict (`autoAllowBashIfSandboxed: false` in managed settings), headless, with
/// the same `--allowedTools Edit`: the Read, the Edit and the redirect (a file edit the
/// Edit rule allows) run; running the test is not read-only and no rule allows it, so it
/// is refused, and the file it would have written does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_in_default_strict_mode() {
    let task = run_task(&["--allowedTools", "Edit"], Some(strict())).await;
    for id in ["read", "edit", "redirect"] {
        assert!(!task.result(id).1, "{id}: {:?}", task.result(id));
        assert_eq!(task.decision(id), "allow");
    }
    let lib = std::fs::read_to_string(task.ws.join("lib.sh")).unwrap();
    assert!(lib.contains("$1 + $2"), "{lib}");
    assert!(task.ws.join("out.txt").exists());
    assert_refused(&task, "test");
    assert!(
        !task.ws.join("test-ran.txt").exists(),
        "the refused test ran"
    );
}

/// Default strict with no rule at all: the Edit and both Bash calls are refused, and the
/// workspace is as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_in_default_strict_mode_without_rules() {
    let task = run_task(&[], Some(strict())).await;
    assert!(!task.result("read").1, "{:?}", task.result("read"));
    assert!(task.result("edit").1, "{:?}", task.result("edit"));
    assert_refused(&task, "redirect");
    assert_refused(&task, "test");
    assert_eq!(
        std::fs::read_to_string(task.ws.join("lib.sh")).unwrap(),
        LIB
    );
    assert!(
        !task.ws.join("out.txt").exists(),
        "the refused redirect wrote"
    );
    assert!(
        !task.ws.join("test-ran.txt").exists(),
        "the refused test ran"
    );
}
