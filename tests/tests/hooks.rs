//! Hooks end to end: `cordon run` on the local sandbox and the scripted model, with a
//! workspace whose `.claude/settings.json` configures real shell-script hooks. Every hook
//! appends the JSON it read on stdin to a log in the workspace (project hooks run inside the
//! sandbox, where the workspace is writable), and the tests assert Claude Code's field names.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use cordon_tests::agent::{Output, run_command, tool_results};
use cordon_tests::scripted_model::{Reply, ReplyUsage, ScriptedModel, Turn};
use cordon_tests::{Workspace, bin_dir};
use serde_json::{Value, json};

type Run = Output;

/// Settings that send every command that is not read-only through the rules.
const STRICT: &str = r#"{"sandbox": {"autoAllowBashIfSandboxed": false}}"#;

/// A workspace with hook scripts and a settings file naming them.
struct Project {
    ws: Workspace,
    home: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let ws = Workspace::new();
        std::fs::create_dir_all(ws.join(".claude/hooks")).unwrap();
        Project {
            ws,
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.ws.path()
    }

    /// Writes `.claude/hooks/NAME.sh` and returns the command that runs it.
    fn script(&self, name: &str, body: &str) -> String {
        let path = self.ws.join(&format!(".claude/hooks/{name}.sh"));
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        format!("sh {}", path.display())
    }

    /// A script that logs its input to NAME.jsonl, then runs `then`.
    fn logging(&self, name: &str, then: &str) -> String {
        let log = self.ws.join(&format!("{name}.jsonl"));
        self.script(
            name,
            &format!(
                "input=$(cat)\nprintf '%s\\n' \"$input\" >> {}\n{then}",
                log.display()
            ),
        )
    }

    fn settings(&self, hooks: Value) {
        std::fs::write(
            self.ws.join(".claude/settings.json"),
            serde_json::to_vec_pretty(&json!({ "hooks": hooks })).unwrap(),
        )
        .unwrap();
    }

    /// The inputs a logging hook received, in order.
    fn log(&self, name: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.ws.join(&format!("{name}.jsonl")))
            .unwrap_or_else(|e| panic!("{name}.jsonl: {e}"));
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn command(&self, model: &ScriptedModel, args: &[&str]) -> tokio::process::Command {
        // The workspace is trusted: project hooks never run in an untrusted one (see
        // hostile_repo/trust.rs).
        let mut cmd = run_command(
            model,
            self.home.path(),
            self.path(),
            &["--output-format", "json", "--trust"],
        );
        cmd.args(args).env(
            "CORDON_MANAGED_SETTINGS",
            self.home.path().join("none.json"),
        );
        cmd
    }

    async fn run(&self, model: &ScriptedModel, args: &[&str]) -> Run {
        run(self.command(model, args)).await
    }
}

async fn run(cmd: tokio::process::Command) -> Run {
    Output::of(cmd).await
}

/// The fields every hook input carries.
fn assert_common(input: &Value, event: &str, ws: &Path) {
    assert_eq!(input["hook_event_name"], event, "{input}");
    assert!(
        input["session_id"].as_str().is_some_and(|s| !s.is_empty()),
        "{input}"
    );
    assert!(
        input["transcript_path"]
            .as_str()
            .is_some_and(|s| s.ends_with(".jsonl")),
        "{input}"
    );
    assert_eq!(input["cwd"], ws.display().to_string(), "{input}");
    assert!(input["permission_mode"].is_string(), "{input}");
}

fn pre_tool_use(matcher: &str, command: String) -> Value {
    json!({"PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_exit_2_blocks_the_call_and_feeds_stderr_to_the_model() {
    let p = Project::new();
    let hook = p.logging("pre", "echo 'hook says: no touching' >&2\nexit 2");
    p.settings(pre_tool_use("Bash", hook));
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "touch made.txt"})),
        Turn::text("ok"),
    ])
    .await
    .unwrap();
    let run = p.run(&model, &["touch it", "--allowedTools", "Bash"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let results = tool_results(&model.requests()[1].body);
    assert!(results[0].2, "{results:?}");
    assert!(
        results[0].1.contains("hook says: no touching"),
        "{results:?}"
    );
    assert!(!p.ws.join("made.txt").exists(), "the tool ran");
    let inputs = p.log("pre");
    assert_eq!(inputs.len(), 1);
    assert_common(&inputs[0], "PreToolUse", p.path());
    assert_eq!(inputs[0]["tool_name"], "Bash");
    assert_eq!(inputs[0]["tool_input"]["command"], "touch made.txt");
    assert_eq!(inputs[0]["tool_use_id"], "b1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_updated_input_rewrites_the_bash_command() {
    let p = Project::new();
    let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "updatedInput": {"command": "touch rewritten.txt"}}});
    let hook = p.logging("pre", &format!("echo '{out}'"));
    p.settings(pre_tool_use("Bash", hook));
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "touch original.txt"})),
        Turn::text("ok"),
    ])
    .await
    .unwrap();
    let run = p.run(&model, &["write it", "--allowedTools", "Bash"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let results = tool_results(&model.requests()[1].body);
    assert!(!results[0].2, "{results:?}");
    assert!(p.ws.join("rewritten.txt").exists(), "{results:?}");
    assert!(!p.ws.join("original.txt").exists());
    // The hook saw the model's command; the tool ran the hook's.
    assert_eq!(
        p.log("pre")[0]["tool_input"]["command"],
        "touch original.txt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_allow_does_not_override_a_deny_rule() {
    let p = Project::new();
    std::fs::write(p.ws.join("victim.txt"), "keep me").unwrap();
    let allow = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow", "permissionDecisionReason": "hook trusts everything"}});
    let hook = p.logging("pre", &format!("echo '{allow}'"));
    p.settings(pre_tool_use("Bash", hook));
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "rm victim.txt"})),
        Turn::tool_use("b2", "Bash", json!({"command": "touch allowed.txt"})),
        Turn::text("ok"),
    ])
    .await
    .unwrap();
    // No allow rule and no sandbox auto-allow: `touch` would ask (and be denied headless)
    // without the hook.
    let run = p
        .run(
            &model,
            &[
                "clean up",
                "--disallowedTools",
                "Bash(rm *)",
                "--settings",
                STRICT,
            ],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = model.requests();
    let denied = tool_results(&requests[1].body);
    assert!(denied[0].2, "{denied:?}");
    assert!(denied[0].1.contains("Permission denied"), "{denied:?}");
    assert_eq!(
        std::fs::read_to_string(p.ws.join("victim.txt")).unwrap(),
        "keep me"
    );
    let allowed = tool_results(&requests[2].body);
    assert!(!allowed[0].2, "{allowed:?}");
    assert!(p.ws.join("allowed.txt").exists());
    assert_eq!(p.log("pre").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_sees_the_tool_response_and_its_feedback_reaches_the_model() {
    let p = Project::new();
    let hook = p.logging(
        "post",
        "echo 'post hook: style issue on line 1' >&2\nexit 2",
    );
    p.settings(json!({"PostToolUse": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": hook}]}]}));
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "echo hello-from-tool"})),
        Turn::text("ok"),
    ])
    .await
    .unwrap();
    let run = p.run(&model, &["say hi", "--allowedTools", "Bash"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let results = tool_results(&model.requests()[1].body);
    assert!(results[0].1.contains("hello-from-tool"), "{results:?}");
    assert!(
        results[0].1.contains("post hook: style issue on line 1"),
        "{results:?}"
    );
    let inputs = p.log("post");
    assert_common(&inputs[0], "PostToolUse", p.path());
    assert_eq!(inputs[0]["tool_name"], "Bash");
    assert_eq!(inputs[0]["tool_use_id"], "b1");
    assert_eq!(inputs[0]["tool_input"]["command"], "echo hello-from-tool");
    assert!(
        inputs[0]["tool_response"]["stdout"]
            .as_str()
            .unwrap()
            .contains("hello-from-tool"),
        "{}",
        inputs[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_prompt_submit_adds_context_and_can_block() {
    let p = Project::new();
    let hook = p.logging("prompt", "echo 'CONTEXT-FROM-HOOK'");
    p.settings(json!({"UserPromptSubmit": [{"hooks": [{"type": "command", "command": hook}]}]}));
    let model = ScriptedModel::start(vec![Turn::text("ok")]).await.unwrap();
    let run = p.run(&model, &["hello there"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let first = model.requests()[0].body["messages"].to_string();
    assert!(first.contains("hello there") && first.contains("CONTEXT-FROM-HOOK"));
    let inputs = p.log("prompt");
    assert_common(&inputs[0], "UserPromptSubmit", p.path());
    assert_eq!(inputs[0]["prompt"], "hello there");

    let blocker = p.logging(
        "prompt-block",
        "echo 'prompts mentioning secrets are refused' >&2\nexit 2",
    );
    p.settings(json!({"UserPromptSubmit": [{"hooks": [{"type": "command", "command": blocker}]}]}));
    let model = ScriptedModel::start(vec![Turn::text("never")])
        .await
        .unwrap();
    let run = p.run(&model, &["print the secrets"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.json()["result"]
            .as_str()
            .unwrap()
            .contains("prompts mentioning secrets are refused"),
        "{}",
        run.stdout
    );
    assert!(
        model.requests().is_empty(),
        "the blocked prompt reached the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_forces_one_more_turn() {
    let p = Project::new();
    let hook = p.logging(
        "stop",
        "case \"$input\" in *'\"stop_hook_active\":true'*) exit 0;; esac\n\
         echo '{\"decision\": \"block\", \"reason\": \"KEEP-GOING: run the tests too\"}'",
    );
    p.settings(json!({"Stop": [{"hooks": [{"type": "command", "command": hook}]}]}));
    let model = ScriptedModel::start(vec![Turn::text("first done"), Turn::text("second done")])
        .await
        .unwrap();
    let run = p.run(&model, &["do it"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["result"], "second done");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let last = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert!(last.to_string().contains("KEEP-GOING: run the tests too"));
    let inputs = p.log("stop");
    assert_eq!(inputs.len(), 2);
    assert_common(&inputs[0], "Stop", p.path());
    assert_eq!(inputs[0]["stop_hook_active"], false);
    assert_eq!(inputs[1]["stop_hook_active"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_and_session_end_fire_with_their_fields() {
    let p = Project::new();
    let start = p.logging("start", "echo 'SESSION-CONTEXT: main is frozen'");
    let end = p.logging("end", "exit 0");
    p.settings(json!({
        "SessionStart": [{"hooks": [{"type": "command", "command": start}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": end}]}]
    }));
    let model = ScriptedModel::start(vec![Turn::text("one"), Turn::text("two")])
        .await
        .unwrap();
    let run = p.run(&model, &["hi"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let session = run.json()["session_id"].as_str().unwrap().to_string();
    let first = model.requests()[0].body["messages"].to_string();
    assert!(first.contains("SESSION-CONTEXT: main is frozen"), "{first}");
    let starts = p.log("start");
    assert_common(&starts[0], "SessionStart", p.path());
    assert_eq!(starts[0]["source"], "startup");
    assert_eq!(starts[0]["session_id"], session.as_str());
    let ends = p.log("end");
    assert_common(&ends[0], "SessionEnd", p.path());
    assert!(ends[0]["reason"].is_string());

    let run = p.run(&model, &["--resume", &session, "again"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let starts = p.log("start");
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[1]["source"], "resume");
    assert_eq!(p.log("end").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_compact_fires_before_compaction() {
    let p = Project::new();
    std::fs::write(p.ws.join("big.txt"), "line of text\n".repeat(200)).unwrap();
    let hook = p.logging("compact", "exit 0");
    p.settings(json!({"PreCompact": [{"matcher": "auto",
        "hooks": [{"type": "command", "command": hook}]}]}));
    let heavy = ReplyUsage {
        input_tokens: 950,
        output_tokens: 20,
        ..Default::default()
    };
    let model = ScriptedModel::start(vec![
        Turn::Reply(
            Reply::tool_use("r1", "Read", json!({"file_path": p.ws.join("big.txt")})).usage(heavy),
        ),
        Turn::text("SUMMARY: big.txt was read."),
        Turn::text("done after compaction"),
    ])
    .await
    .unwrap();
    let mut cmd = p.command(&model, &["read big.txt"]);
    cmd.env("CORDON_CONTEXT_WINDOW", "1000");
    let run = run(cmd).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["result"], "done after compaction");
    let inputs = p.log("compact");
    assert_eq!(inputs.len(), 1);
    assert_common(&inputs[0], "PreCompact", p.path());
    assert_eq!(inputs[0]["trigger"], "auto");
    assert!(inputs[0]["custom_instructions"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_times_out_does_not_block() {
    let p = Project::new();
    let hook = p.script("slow", "sleep 30\necho 'too late' >&2\nexit 2");
    p.settings(json!({"PreToolUse": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": hook, "timeout": 1}]}]}));
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "touch ran.txt"})),
        Turn::text("ok"),
    ])
    .await
    .unwrap();
    let run = p.run(&model, &["touch", "--allowedTools", "Bash"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let results = tool_results(&model.requests()[1].body);
    assert!(!results[0].2, "{results:?}");
    assert!(p.ws.join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_permission_prompt_fires_the_notification_hook() {
    let p = Project::new();
    let hook = p.logging("notify", "exit 0");
    p.settings(json!({"Notification": [{"hooks": [{"type": "command", "command": hook}]}]}));
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "touch nope.txt"})),
        Turn::text("ok"),
    ])
    .await
    .unwrap();
    let run = p.run(&model, &["touch", "--settings", STRICT]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!p.ws.join("nope.txt").exists());
    let inputs = p.log("notify");
    assert_common(&inputs[0], "Notification", p.path());
    assert_eq!(
        inputs[0]["message"],
        "Cordon needs your permission to use Bash"
    );
}

/// A directory outside the workspace, on the host, that the test owns.
fn outside_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("hooks-outside-")
        .tempdir_in(bin_dir())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_hook_runs_on_the_host_and_a_project_hook_does_not() {
    let p = Project::new();
    let outside = outside_dir();
    let host_file: PathBuf = outside.path().join("managed.json");
    let sandboxed_file: PathBuf = outside.path().join("project.json");
    // The same write, from a project hook: it runs in the sandbox and cannot reach it.
    let project = p.script(
        "project",
        &format!(
            "cat > {} 2>/dev/null\necho ran > {}\nexit 0",
            sandboxed_file.display(),
            p.ws.join("project-ran.txt").display()
        ),
    );
    p.settings(pre_tool_use("Bash", project));
    let managed = p.home.path().join("managed-settings.json");
    std::fs::write(
        &managed,
        serde_json::to_vec(&json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
            "hooks": [{"type": "command", "command": format!("cat > {}", host_file.display())}]}]}}))
        .unwrap(),
    )
    .unwrap();
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "echo hi"})),
        Turn::text("ok"),
    ])
    .await
    .unwrap();
    let mut cmd = p.command(&model, &["hi", "--allowedTools", "Bash"]);
    cmd.env("CORDON_MANAGED_SETTINGS", &managed);
    let run = run(cmd).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let got: Value = serde_json::from_str(&std::fs::read_to_string(&host_file).unwrap()).unwrap();
    assert_common(&got, "PreToolUse", p.path());
    assert_eq!(got["tool_name"], "Bash");
    assert!(
        p.ws.join("project-ran.txt").exists(),
        "the project hook did not run"
    );
    assert!(
        !sandboxed_file.exists(),
        "a project hook wrote outside the workspace"
    );
}
