//! `cordon run` end to end: the real binary, the local sandbox, and a scripted model that
//! streams exactly like the Messages API and records every request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use cordon_tests::agent::{Output, run_command, run_json_ok, tool_results};
use cordon_tests::scripted_model::{Reply, ReplyUsage, ScriptedModel, Turn};
use cordon_tests::{Workspace, host_processes_matching};
use serde_json::{Value, json};

type Run = Output;

async fn cordon_run(model: &ScriptedModel, home: &Path, ws: &Path, args: &[&str]) -> Run {
    Output::of(run_command(model, home, ws, args)).await
}

fn home() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_step_coding_task_edits_the_real_project() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
    let calc = ws.join("src/calc.py").display().to_string();
    let test_file = ws.join("tests/test_calc.py").display().to_string();
    let turns = vec![
        Turn::Reply(
            Reply::text("Let me look around.")
                .with_tool_use("g1", "Glob", json!({"pattern": "**/*.py"}))
                .with_tool_use(
                    "s1",
                    "Grep",
                    json!({"pattern": "def add", "output_mode": "content"}),
                ),
        ),
        Turn::tool_use("r1", "Read", json!({"file_path": calc})),
        Turn::tool_use(
            "e1",
            "Edit",
            json!({"file_path": calc, "old_string": "return a-b", "new_string": "return a + b"}),
        ),
        Turn::tool_use(
            "e2",
            "Edit",
            json!({"file_path": calc, "old_string": "return a - b", "new_string": "return a + b"}),
        ),
        Turn::tool_use(
            "w1",
            "Write",
            json!({"file_path": test_file, "content": "import sys\nsys.path.insert(0, 'src')\nfrom calc import add\nassert add(2, 3) == 5\nprint('tests passed')\n"}),
        ),
        Turn::tool_use(
            "b1",
            "Bash",
            json!({"command": "python3 tests/test_calc.py"}),
        ),
        Turn::tool_use(
            "s2",
            "Grep",
            json!({"pattern": "a \\+ b", "output_mode": "files_with_matches"}),
        ),
        Turn::text("Fixed add() and added a test; it passes."),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    let (_, result) = run_json_ok(
        &model,
        home.path(),
        ws.path(),
        &["--allowedTools", "Edit Write Bash", "-p"],
        "fix the add function",
    )
    .await;
    assert_eq!(result["type"], "result");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["result"], "Fixed add() and added a test; it passes.");
    assert_eq!(result["num_turns"], 8);

    // The project really changed.
    assert_eq!(
        std::fs::read_to_string(ws.join("src/calc.py")).unwrap(),
        "def add(a, b):\n    return a + b\n"
    );
    assert!(ws.join("tests/test_calc.py").exists());

    let requests = model.requests();
    assert_eq!(requests.len(), 8);
    for req in &requests {
        assert_eq!(req.header("x-api-key"), Some("test-key"));
        assert_eq!(req.body["stream"], true);
        let tools: Vec<&str> = req.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        for name in ["Read", "Write", "Edit", "Bash", "Glob", "Grep"] {
            assert!(tools.contains(&name), "{name} missing from {tools:?}");
        }
        assert!(
            req.body["system"]
                .to_string()
                .contains(&ws.path().display().to_string()),
            "env info names the cwd"
        );
    }
    // Both read-only calls of the first turn answered in one user turn, in order.
    let first = tool_results(&requests[1].body);
    assert_eq!(
        first.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        vec!["g1", "s1"]
    );
    assert!(first[0].1.contains("calc.py") && !first[0].2, "{first:?}");
    assert!(first[1].1.contains("def add"), "{first:?}");
    let read = tool_results(&requests[2].body);
    assert!(
        read[0].1.contains("return a - b") && read[0].1.contains('1'),
        "{read:?}"
    );
    let failed_edit = tool_results(&requests[3].body);
    assert!(
        failed_edit[0].2,
        "the edit with a wrong old_string must be an error: {failed_edit:?}"
    );
    assert!(!tool_results(&requests[4].body)[0].2);
    let bash = tool_results(&requests[6].body);
    assert!(bash[0].1.contains("tests passed") && !bash[0].2, "{bash:?}");
    let grep = tool_results(&requests[7].body);
    assert!(grep[0].1.contains("calc.py"), "{grep:?}");

    // The transcript holds every turn.
    let session = result["session_id"].as_str().unwrap();
    let transcript = std::fs::read_to_string(
        home.path()
            .join("sessions")
            .join(format!("{session}.jsonl")),
    )
    .unwrap();
    let kinds: Vec<String> = transcript
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("session_start"));
    assert_eq!(kinds.iter().filter(|k| *k == "assistant").count(), 8);
    assert_eq!(kinds.iter().filter(|k| *k == "tool_call").count(), 8);
    assert_eq!(kinds.last().map(String::as_str), Some("result"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_json_prints_init_messages_and_result() {
    let ws = Workspace::new();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let turns = vec![
        Turn::tool_use("r1", "Read", json!({"file_path": ws.join("a.txt")})),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    let run = cordon_run(
        &model,
        home.path(),
        ws.path(),
        &["--output-format", "stream-json", "go"],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        vec!["system", "user", "assistant", "user", "assistant", "result"]
    );
    assert_eq!(lines[0]["subtype"], "init");
    assert_eq!(lines[0]["cwd"], ws.path().display().to_string());
    // No domain allowed anywhere: the init record says the session has no network.
    assert_eq!(lines[0]["network"]["egress"], "none", "{}", lines[0]);
    assert_eq!(lines[2]["message"]["content"][0]["name"], "Read");
    assert_eq!(lines[3]["message"]["content"][0]["tool_use_id"], "r1");
    assert_eq!(lines[5]["result"], "done");
    let session = lines[0]["session_id"].as_str().unwrap();
    assert!(lines.iter().all(|l| l["session_id"] == session));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_model_failures_are_retried() {
    let ws = Workspace::new();
    let turns = vec![
        Turn::rate_limited_ms(50),
        Turn::overloaded(),
        Turn::server_error(),
        Turn::text("ok after retries"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    let (_, result) = run_json_ok(&model, home.path(), ws.path(), &[], "hi").await;
    assert_eq!(result["result"], "ok after retries");
    assert_eq!(model.requests().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_inside_a_tool_input_is_retried_whole() {
    let ws = Workspace::new();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let read = Reply::tool_use(
        "r1",
        "Read",
        json!({"file_path": ws.join("a.txt"), "offset": 1}),
    );
    let turns = vec![
        Turn::cut_in_tool_input(read.clone()),
        Turn::Reply(read),
        Turn::text("read it"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    let (_, result) = run_json_ok(&model, home.path(), ws.path(), &[], "read a.txt").await;
    assert_eq!(result["result"], "read it");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let results = tool_results(&requests[2].body);
    assert_eq!(
        results.len(),
        1,
        "exactly one result for the one completed tool call"
    );
    assert!(results[0].1.contains("alpha"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_turn_is_sent_back_to_continue_and_max_tokens_asks_to_go_on() {
    let ws = Workspace::new();
    let turns = vec![
        Turn::Reply(Reply::text("working on it").stop("pause_turn")),
        Turn::Reply(Reply::text("partial answ").stop("max_tokens")),
        Turn::text("er, complete"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    let (_, result) = run_json_ok(&model, home.path(), ws.path(), &[], "question").await;
    assert_eq!(result["result"], "er, complete");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let after_pause = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(
        after_pause.last().unwrap()["role"],
        "assistant",
        "a paused turn goes back as is"
    );
    let after_max = requests[2].body["messages"].as_array().unwrap();
    assert_eq!(after_max.last().unwrap()["role"], "user");
    assert!(after_max.last().unwrap().to_string().contains("cut off"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_not_allowed_are_denied_with_how_to_allow_them_and_max_turns_stops() {
    let ws = Workspace::new();
    let turns = vec![
        Turn::tool_use("b1", "Bash", json!({"command": "touch pwned"})),
        Turn::tool_use("b2", "Bash", json!({"command": "touch pwned"})),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    let run = cordon_run(
        &model,
        home.path(),
        ws.path(),
        &[
            "--output-format",
            "json",
            "--max-turns",
            "2",
            // Strict mode: a command that is not read-only needs a rule, not just the sandbox.
            "--settings",
            r#"{"sandbox": {"autoAllowBashIfSandboxed": false}}"#,
            "do it",
        ],
    )
    .await;
    assert_eq!(run.code, 1, "max turns is an error exit: {}", run.stdout);
    let result = run.json();
    assert_eq!(result["subtype"], "error_max_turns");
    assert_eq!(result["is_error"], true);
    assert!(!ws.join("pwned").exists());
    let denied = tool_results(&model.requests()[1].body);
    assert!(denied[0].2);
    assert!(denied[0].1.contains("--allowedTools Bash"), "{denied:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_is_compacted_near_the_window() {
    let ws = Workspace::new();
    std::fs::write(ws.join("big.txt"), "line of text\n".repeat(200)).unwrap();
    let heavy = ReplyUsage {
        input_tokens: 950,
        output_tokens: 20,
        ..Default::default()
    };
    let turns = vec![
        Turn::Reply(
            Reply::tool_use("r1", "Read", json!({"file_path": ws.join("big.txt")})).usage(heavy),
        ),
        Turn::text("SUMMARY: the user asked to read big.txt; it was read."),
        Turn::text("done after compaction"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    let mut cmd = run_command(
        &model,
        home.path(),
        ws.path(),
        &["--output-format", "json", "read big.txt"],
    );
    cmd.env("CORDON_CONTEXT_WINDOW", "1000");
    let run = Output::of(cmd).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["result"], "done after compaction");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    // The summarising call carries no tools and asks for a summary.
    assert!(requests[1].body.get("tools").is_none());
    assert!(requests[1].body["messages"].to_string().contains("summary"));
    // The next call starts from the summary and keeps the latest exchange verbatim.
    let messages = requests[2].body["messages"].as_array().unwrap();
    assert!(messages[0].to_string().contains("SUMMARY: the user asked"));
    assert_eq!(messages[1]["content"][0]["id"], "r1");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "r1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_loses_no_completed_turn_and_resume_continues_validly() {
    let ws = Workspace::new();
    let marker = format!("{}", 600000 + std::process::id() % 100000);
    let turns = vec![
        Turn::tool_use("b0", "Bash", json!({"command": "echo first > first.txt"})),
        Turn::tool_use("b1", "Bash", json!({"command": format!("sleep {marker}")})),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    let mut child = run_command(
        &model,
        home.path(),
        ws.path(),
        &[
            "start",
            "--output-format",
            "stream-json",
            "--allowedTools",
            "Bash",
            "Edit",
        ],
    )
    .spawn()
    .unwrap();
    // Wait until the long command runs inside the sandbox, then kill -9 the orchestrator.
    let start = Instant::now();
    while host_processes_matching(&format!("sleep {marker}")).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the tool never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().unwrap() as i32;
    // SAFETY: pid is our own child process.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = child.wait().await;
    // The sandbox dies with its orchestrator.
    let start = Instant::now();
    while !host_processes_matching(&format!("sleep {marker}")).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "sandbox outlived its orchestrator"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("first.txt")).unwrap(),
        "first\n"
    );

    model.push_turns([Turn::text("resumed fine")]);
    let (_, result) = run_json_ok(&model, home.path(), ws.path(), &["--continue"], "go on").await;
    assert_eq!(result["result"], "resumed fine");
    let last = model.requests().last().unwrap().body.clone();
    let messages = last["messages"].as_array().unwrap();
    // prompt, b0 call, b0 result, b1 call, then one user turn: b1's error result + "go on".
    assert_eq!(messages.len(), 5, "{messages:#?}");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "b0");
    assert_eq!(messages[3]["content"][0]["id"], "b1");
    let closing = &messages[4]["content"];
    assert_eq!(closing[0]["tool_use_id"], "b1");
    assert_eq!(closing[0]["is_error"], true);
    assert!(closing.to_string().contains("go on"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_blocks_go_back_unchanged_with_the_tool_results() {
    let ws = Workspace::new();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let turns = vec![
        Turn::Reply(
            Reply::default()
                .with_thinking("I should read a.txt first.", "sig-abc123")
                .with_redacted_thinking("opaque-redacted-bytes")
                .with_tool_use("r1", "Read", json!({"file_path": ws.join("a.txt")}))
                .stop("tool_use"),
        ),
        Turn::text("read it"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    run_json_ok(&model, home.path(), ws.path(), &[], "go").await;
    let second = &model.requests()[1].body;
    let assistant = &second["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "I should read a.txt first.", "signature": "sig-abc123"})
    );
    assert_eq!(
        assistant["content"][1],
        json!({"type": "redacted_thinking", "data": "opaque-redacted-bytes"})
    );
    assert_eq!(assistant["content"][2]["type"], "tool_use");
    assert_eq!(second["messages"][2]["content"][0]["tool_use_id"], "r1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_compact_and_the_context_report_act_on_a_resumed_session() {
    let ws = Workspace::new();
    let turns = vec![
        Turn::text("the answer is 42"),
        Turn::text("SUMMARY: asked a question; answered 42"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    run_json_ok(&model, home.path(), ws.path(), &[], "what is the answer?").await;

    let (_, context_result) =
        run_json_ok(&model, home.path(), ws.path(), &["--continue"], "/context").await;
    let report = context_result["result"].as_str().unwrap().to_string();
    for category in [
        "system prompt",
        "tool definitions",
        "user messages",
        "assistant messages",
        "tool results",
    ] {
        assert!(
            report.contains(category),
            "{category} missing from {report}"
        );
    }
    assert_eq!(model.requests().len(), 1, "/context makes no model call");

    let (_, compact_result) =
        run_json_ok(&model, home.path(), ws.path(), &["--continue"], "/compact").await;
    assert!(
        compact_result["result"]
            .as_str()
            .unwrap()
            .contains("compacted")
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].body.get("tools").is_none(),
        "the summary call offers no tools"
    );
    assert!(
        requests[1].body["messages"]
            .to_string()
            .contains("the answer is 42")
    );

    // The next turn starts from the summary.
    model.push_turns([Turn::text("still 42")]);
    run_json_ok(
        &model,
        home.path(),
        ws.path(),
        &["--continue"],
        "and again?",
    )
    .await;
    let messages = model.requests()[2].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    let text = messages[0].to_string();
    assert!(
        text.contains("SUMMARY: asked a question") && text.contains("and again?"),
        "{text}"
    );
}

/// The settings' `env` reaches the session's commands, as in Claude Code, once the
/// workspace is trusted (`--trust`); the agent's own marker variable cannot be overridden
/// through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_env_reaches_every_command() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    std::fs::write(
        ws.join(".claude/settings.json"),
        json!({"env": {"GREETING": "hello from settings", "PATH": "/usr/bin:/bin"}}).to_string(),
    )
    .unwrap();
    let turns = vec![
        Turn::tool_use(
            "b1",
            "Bash",
            json!({"command": "echo \"$GREETING\"; echo \"path=$PATH\""}),
        ),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = home();
    run_json_ok(
        &model,
        home.path(),
        ws.path(),
        &["--allowedTools", "Bash", "-p", "--trust"],
        "greet",
    )
    .await;
    let out = &tool_results(&model.requests()[1].body)[0];
    assert!(!out.2, "{out:?}");
    assert!(out.1.contains("hello from settings"), "{out:?}");
    assert!(out.1.contains("path=/usr/bin:/bin"), "{out:?}");
}
