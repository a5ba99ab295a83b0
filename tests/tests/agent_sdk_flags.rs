//! The Agent SDK's options against Cordon, with the pinned Python claude-agent-sdk as the
//! judge: each test starts the scripted model for one scenario of tests/sdk/test_flags.py
//! (which checks what the client saw), then checks here what the model was sent: the
//! system prompt, the tools, thinking and effort, the beta header, the model after an
//! overload, the conversation of a fork. No flag may be reported as not applied.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::path::Path;

use cordon_tests::Workspace;
use cordon_tests::agent::tool_names;
use cordon_tests::scripted_model::{RecordedRequest, Reply, ReplyUsage, ScriptedModel, Turn};
use serde_json::{Value, json};

/// Runs `scenario` of test_flags.py against `turns`; returns the model's requests to
/// /v1/messages. `arg` reaches the script as SDK_ARG.
async fn scenario(
    scenario: &str,
    turns: Vec<Turn>,
    ws: &Workspace,
    arg: Option<&Path>,
) -> Option<Vec<RecordedRequest>> {
    let python = cordon_tests::sdk::sdk_python()?;
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut env: Vec<(&str, &OsStr)> = Vec::new();
    if let Some(arg) = arg {
        env.push(("SDK_ARG", arg.as_os_str()));
    }
    let run = cordon_tests::sdk::run_script_with_args(
        &python,
        "test_flags.py",
        &[scenario],
        ws.path(),
        &model,
        home.path(),
        &env,
    )
    .await;
    run.assert_success(&format!("test_flags.py {scenario}"));
    assert!(
        !run.stderr.contains("not applied"),
        "a flag was reported as not applied:\n{}",
        run.stderr
    );
    let requests = model
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/messages"))
        .collect();
    model.shutdown().await;
    Some(requests)
}

fn system_texts(body: &Value) -> Vec<String> {
    body["system"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .map(|b| b["text"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_prompt_replaces_appends_and_reads_from_a_file() {
    let ws = Workspace::new();
    let scratch = tempfile::tempdir().unwrap();
    let turns = ["arr", "oui", "filed", "minimal"].map(Turn::text).to_vec();
    let Some(requests) = scenario("system_prompts", turns, &ws, Some(scratch.path())).await else {
        return;
    };
    assert_eq!(requests.len(), 4);
    let custom = system_texts(&requests[0].body);
    assert_eq!(custom, ["You are a pirate."], "only the caller's prompt");
    let appended = system_texts(&requests[1].body);
    assert_eq!(appended[0], cordon::agent::prompt::SYSTEM_PROMPT);
    assert!(appended[1].starts_with("<env>"), "{appended:?}");
    assert_eq!(appended[2], "Answer in French.");
    assert_eq!(
        system_texts(&requests[2].body),
        ["You are a file-borne prompt."]
    );
    // No system_prompt: the SDK's minimal prompt (the environment, not Cordon's guidance).
    let minimal = system_texts(&requests[3].body);
    assert_eq!(minimal.len(), 1, "{minimal:?}");
    assert!(minimal[0].starts_with("<env>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_choose_the_built_ins_offered() {
    let ws = Workspace::new();
    let turns = vec![Turn::text("two"), Turn::text("none")];
    let Some(requests) = scenario("tools", turns, &ws, None).await else {
        return;
    };
    let mut offered = tool_names(&requests[0].body);
    offered.sort();
    assert_eq!(offered, ["Grep", "Read"]);
    assert!(
        tool_names(&requests[1].body).is_empty(),
        "{:?}",
        requests[1].body["tools"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_messages_stream_the_apis_events() {
    let ws = Workspace::new();
    let turns = vec![
        Turn::text("hello there, streamed in pieces"),
        Turn::text("hello there, streamed in pieces"),
    ];
    let Some(requests) = scenario("partial_messages", turns, &ws, None).await else {
        return;
    };
    assert_eq!(requests.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_schema_validates_retries_and_returns_structured_output() {
    let ws = Workspace::new();
    let mut turns = vec![
        // A value that does not match (a negative population), then one that does.
        Turn::tool_use(
            "s1",
            "StructuredOutput",
            json!({"city": "Paris", "population": -1}),
        ),
        Turn::tool_use(
            "s2",
            "StructuredOutput",
            json!({"city": "Paris", "population": 2_100_000}),
        ),
        Turn::text("Paris it is."),
    ];
    // The second session's model never calls the tool: reminded until the retries run out.
    turns.extend((0..=cordon::agent::structured::MAX_RETRIES).map(|_| Turn::text("Paris.")));
    let Some(requests) = scenario("json_schema", turns, &ws, None).await else {
        return;
    };
    let first = &requests[0].body;
    let tool = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "StructuredOutput")
        .expect("the StructuredOutput tool is offered");
    assert_eq!(
        tool["input_schema"]["required"],
        json!(["city", "population"])
    );
    assert!(
        system_texts(first)
            .iter()
            .any(|t| t.contains("StructuredOutput")),
        "the model is told how to answer"
    );
    let rejected = cordon_tests::agent::last_tool_results(&requests[1].body);
    assert_eq!(rejected[0]["is_error"], true);
    let why = cordon_tests::agent::result_text(&rejected[0]);
    assert!(why.contains("population"), "{why}");
    let accepted = cordon_tests::agent::last_tool_results(&requests[2].body);
    assert_ne!(accepted[0]["is_error"], true);
    // The second session: its first call, then one reminder per retry.
    let second = &requests[3..];
    assert_eq!(
        second.len(),
        1 + cordon::agent::structured::MAX_RETRIES as usize
    );
    let last = second.last().unwrap().body["messages"].to_string();
    assert!(last.contains(cordon::agent::structured::REMINDER));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_budget_usd_ends_the_run_once_spent() {
    let ws = Workspace::new();
    std::fs::write(ws.join("notes.txt"), "notes\n").unwrap();
    let notes = ws.join("notes.txt").display().to_string();
    // 10k input tokens of claude-sonnet-4-5 at $3/M = $0.03, plus 3k output at $15/M.
    let costly = ReplyUsage {
        input_tokens: 10_000,
        output_tokens: 3_000,
        ..Default::default()
    };
    let turns = vec![
        Turn::Reply(Reply::tool_use("r1", "Read", json!({"file_path": notes})).usage(costly)),
        // The roomy session.
        Turn::Reply(Reply::tool_use("r3", "Read", json!({"file_path": notes})).usage(costly)),
        Turn::text("read"),
    ];
    let Some(requests) = scenario("max_budget", turns, &ws, None).await else {
        return;
    };
    // $0.075 after the first call passed $0.05: the second call never started.
    assert_eq!(
        requests.len(),
        3,
        "one call under the budget, two in the roomy session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_id_names_the_session_and_a_fork_carries_the_conversation() {
    let ws = Workspace::new();
    let turns = vec![
        Turn::text("noted"),
        Turn::text("tangerine"),
        Turn::text("still here"),
    ];
    let Some(requests) = scenario("sessions", turns, &ws, None).await else {
        return;
    };
    let fork = requests[1].body["messages"].to_string();
    assert!(
        fork.contains("tangerine") && fork.contains("noted"),
        "the fork carries the first session's turns: {fork}"
    );
    let original = requests[2].body["messages"].to_string();
    assert!(
        !original.contains("What was the word?"),
        "the fork's turn stays out of the original: {original}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_effort_and_betas_reach_the_api() {
    let ws = Workspace::new();
    let turns = vec![Turn::text("thought"), Turn::text("adapted")];
    let Some(requests) = scenario("thinking", turns, &ws, None).await else {
        return;
    };
    let body = &requests[0].body;
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 20000})
    );
    assert!(body["max_tokens"].as_u64().unwrap() > 20_000, "{body}");
    assert_eq!(
        body["output_config"],
        json!({"effort": "high", "task_budget": {"type": "tokens", "total": 50000}})
    );
    assert_eq!(
        requests[0].header("anthropic-beta"),
        Some("context-1m-2025-08-07,task-budgets-2026-03-13")
    );
    assert_eq!(
        requests[1].body["thinking"],
        json!({"type": "adaptive", "display": "summarized"})
    );
    assert!(requests[1].body.get("output_config").is_none());
    assert_eq!(requests[1].header("anthropic-beta"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_model_answers_when_the_model_is_overloaded() {
    let ws = Workspace::new();
    let mut turns: Vec<Turn> = (0..cordon::model::client::OVERLOADS_BEFORE_FALLBACK)
        .map(|_| Turn::overloaded())
        .collect();
    turns.push(Turn::text("from the fallback"));
    let Some(requests) = scenario("fallback", turns, &ws, None).await else {
        return;
    };
    let models: Vec<&str> = requests
        .iter()
        .map(|r| r.body["model"].as_str().unwrap())
        .collect();
    let n = cordon::model::client::OVERLOADS_BEFORE_FALLBACK as usize;
    assert_eq!(models.len(), n + 1, "{models:?}");
    assert!(
        models[..n].iter().all(|m| *m != "claude-haiku-4-5"),
        "{models:?}"
    );
    assert_eq!(models[n], "claude-haiku-4-5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_dir_mounts_a_directory_and_refuses_a_system_one() {
    let ws = Workspace::new();
    // Made as a workspace is (a directory the host checks accept; not under /tmp).
    let extra = Workspace::new();
    let report = extra.join("report.txt").display().to_string();
    let turns = vec![
        Turn::tool_use(
            "w1",
            "Write",
            json!({"file_path": report, "content": "outside the workspace\n"}),
        ),
        Turn::text("written"),
    ];
    let Some(requests) = scenario("add_dir", turns, &ws, Some(extra.path())).await else {
        return;
    };
    let wrote = cordon_tests::agent::last_tool_results(&requests[1].body);
    assert_ne!(wrote[0]["is_error"], true, "{wrote:?}");
    assert_eq!(
        requests.len(),
        2,
        "the refused session never called the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_config_starts_servers_and_strict_keeps_only_them() {
    let ws = Workspace::new();
    let python = cordon_tests::mcp_python();
    let turns = vec![
        Turn::tool_use(
            "t1",
            "mcp__time__get_current_time",
            json!({"timezone": "UTC"}),
        ),
        Turn::text("it is time"),
        Turn::text("loose"),
        Turn::text("strict"),
    ];
    let Some(requests) = scenario("mcp_config", turns, &ws, Some(&python)).await else {
        return;
    };
    assert!(tool_names(&requests[0].body).contains(&"mcp__time__get_current_time".to_string()));
    let answered = cordon_tests::agent::last_tool_results(&requests[1].body);
    assert_ne!(answered[0]["is_error"], true, "{answered:?}");
    assert!(cordon_tests::agent::result_text(&answered[0]).contains("UTC"));
    let strict = tool_names(&requests[3].body);
    assert!(
        !strict.iter().any(|t| t.starts_with("mcp__other__")),
        "{strict:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setting_sources_choose_the_files_and_memory_read() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    std::fs::write(
        ws.join(".claude/settings.json"),
        r#"{"permissions": {"deny": ["Grep"]}}"#,
    )
    .unwrap();
    std::fs::write(ws.join("CLAUDE.md"), "PROJECT MEMORY: use tabs.\n").unwrap();
    let turns = vec![Turn::text("all"), Turn::text("user only")];
    let Some(requests) = scenario("setting_sources", turns, &ws, None).await else {
        return;
    };
    let all = system_texts(&requests[0].body).join("\n");
    assert!(all.contains("PROJECT MEMORY"), "{all}");
    let user_only = system_texts(&requests[1].body).join("\n");
    assert!(!user_only.contains("PROJECT MEMORY"), "{user_only}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn include_hook_events_reports_each_hook_run() {
    let ws = Workspace::new();
    let turns = vec![Turn::text("heard"), Turn::text("quiet")];
    let Some(requests) = scenario("hook_events", turns, &ws, None).await else {
        return;
    };
    // The hook's stdout is the prompt's added context, with the events asked for or not.
    for request in &requests {
        assert!(request.body["messages"].to_string().contains("hooked"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_session_at_forks_from_an_earlier_answer() {
    let ws = Workspace::new();
    let turns = vec![
        Turn::text("first"),
        Turn::text("second"),
        Turn::text("third"),
    ];
    let Some(requests) = scenario("resume_at", turns, &ws, None).await else {
        return;
    };
    assert_eq!(requests.len(), 3, "the refused fork never called the model");
    let fork = requests[2].body["messages"].to_string();
    assert!(fork.contains("\"one\"") && fork.contains("first"), "{fork}");
    assert!(
        !fork.contains("\"two\"") && !fork.contains("second"),
        "{fork}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newer_models_are_priced_from_the_table() {
    let ws = Workspace::new();
    let usage = |input_tokens, output_tokens| ReplyUsage {
        input_tokens,
        output_tokens,
        ..Default::default()
    };
    let turns = vec![
        Turn::Reply(Reply::text("opus").usage(usage(10_000, 3_000))),
        // Over Haiku 5.5's 100,000-token prompt tier.
        Turn::Reply(Reply::text("haiku").usage(usage(150_000, 1_000))),
    ];
    let Some(requests) = scenario("prices", turns, &ws, None).await else {
        return;
    };
    let models: Vec<&str> = requests
        .iter()
        .map(|r| r.body["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["claude-opus-5-5", "claude-haiku-5-5"]);
}

/// Writes `text` at `rel` under `root`, making the folders on the way.
fn put(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_dir_brings_commands_skills_agents_hooks_and_mcp_servers() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Workspace::new();
    let plugin = Workspace::new();
    let root = plugin.path().canonicalize().unwrap();
    // Readable by the sandbox's user (a test run as root maps it to another uid).
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    put(
        &root,
        ".claude-plugin/plugin.json",
        r#"{"name": "toolkit", "version": "1.0.0"}"#,
    );
    put(
        &root,
        "commands/greet.md",
        "---\ndescription: Greets someone\n---\nSay hello to $ARGUMENTS from ${CLAUDE_PLUGIN_ROOT}.\n",
    );
    put(
        &root,
        "agents/checker.md",
        "---\nname: checker\ndescription: Checks things\ntools: Read\n---\nYou are the CHECKER agent.\n",
    );
    put(
        &root,
        "skills/lint/SKILL.md",
        "---\nname: lint\ndescription: Lints the toolkit way\n---\nRun ${CLAUDE_PLUGIN_ROOT}/bin/lint.\n",
    );
    // The hook runs in the sandbox and reads a file of the plugin's.
    put(
        &root,
        "hooks/hooks.json",
        r#"{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
            "command": "echo PLUGIN-HOOK root=$CLAUDE_PLUGIN_ROOT; cat ${CLAUDE_PLUGIN_ROOT}/hooks/note.txt"}]}]}}"#,
    );
    put(&root, "hooks/note.txt", "NOTE-FROM-THE-PLUGIN\n");
    // The MCP server is a script of the plugin's, started in the sandbox.
    let python = cordon_tests::mcp_python();
    put(
        &root,
        "bin/clock",
        &format!(
            "#!/bin/sh\nexec {} -m mcp_server_time --local-timezone UTC\n",
            python.display()
        ),
    );
    std::fs::set_permissions(
        root.join("bin/clock"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    put(
        &root,
        ".mcp.json",
        r#"{"mcpServers": {"clock": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/clock"}}}"#,
    );
    let python_sdk = cordon_tests::sdk::sdk_python();
    if python_sdk.is_none() {
        return;
    }
    let model = ScriptedModel::start(vec![
        Turn::tool_use("k1", "Skill", json!({"skill": "toolkit:lint"})),
        Turn::tool_use(
            "t1",
            "mcp__plugin_toolkit_clock__get_current_time",
            json!({"timezone": "UTC"}),
        ),
        Turn::tool_use(
            "a1",
            "Agent",
            json!({"subagent_type": "toolkit:checker", "description": "check", "prompt": "CHECK-MARKER: check it"}),
        ),
        Turn::text("plugged"),
    ])
    .await
    .unwrap();
    model.route("CHECK-MARKER", [Turn::text("all checked")]);
    let home = tempfile::tempdir().unwrap();
    let run = cordon_tests::sdk::run_script_with_args(
        &python_sdk.unwrap(),
        "test_flags.py",
        &["plugins"],
        ws.path(),
        &model,
        home.path(),
        &[("SDK_ARG", root.as_os_str())],
    )
    .await;
    run.assert_success("test_flags.py plugins");
    let bodies = cordon_tests::agent::message_bodies(&model);
    let (sub, main): (Vec<&Value>, Vec<&Value>) = bodies.iter().partition(|b| {
        b["messages"][0]["content"]
            .to_string()
            .contains("CHECK-MARKER")
    });
    assert_eq!(main.len(), 4, "{main:#?}");
    let root_text = root.display().to_string();
    let prompt = main[0]["messages"].to_string();
    assert!(
        prompt.contains(&format!("Say hello to Bob from {root_text}.")),
        "the command ran as its body, the root expanded: {prompt}"
    );
    assert!(
        prompt.contains(&format!("PLUGIN-HOOK root={root_text}")),
        "the hook got the root: {prompt}"
    );
    assert!(
        prompt.contains("NOTE-FROM-THE-PLUGIN"),
        "the hook read the plugin's file: {prompt}"
    );
    let description = |name: &str| -> String {
        main[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not offered: {:?}", tool_names(main[0])))["description"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(description("Skill").contains("- toolkit:lint: Lints the toolkit way"));
    assert!(description("Agent").contains("- toolkit:checker: Checks things (Tools: Read)"));
    let skill = cordon_tests::agent::last_tool_results(main[1]);
    assert!(
        cordon_tests::agent::result_text(&skill[0]).contains(&format!("Run {root_text}/bin/lint.")),
        "{skill:?}"
    );
    let clock = cordon_tests::agent::last_tool_results(main[2]);
    assert_ne!(clock[0]["is_error"], true, "{clock:?}");
    assert!(
        cordon_tests::agent::result_text(&clock[0]).contains("UTC"),
        "{clock:?}"
    );
    assert_eq!(sub.len(), 1, "{sub:#?}");
    assert!(
        sub[0]["system"]
            .to_string()
            .contains("You are the CHECKER agent.")
    );
    assert_eq!(tool_names(sub[0]), ["Read"]);
    let report = cordon_tests::agent::last_tool_results(main[3]);
    assert!(cordon_tests::agent::result_text(&report[0]).contains("all checked"));
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_store_mirrors_the_transcript_and_resumes_from_it() {
    let ws = Workspace::new();
    let scratch = tempfile::tempdir().unwrap();
    let turns = vec![Turn::text("noted"), Turn::text("kiwi it was")];
    let Some(requests) = scenario("session_store", turns, &ws, Some(scratch.path())).await else {
        return;
    };
    assert_eq!(requests.len(), 2);
    // The second Cordon had no sessions of its own: the conversation came from the store.
    let resumed = requests[1].body["messages"].to_string();
    assert!(
        resumed.contains("kiwi") && resumed.contains("noted"),
        "{resumed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_definition_fields_shape_the_sub_agent() {
    let ws = Workspace::new();
    put(
        ws.path(),
        ".claude/skills/style/SKILL.md",
        "---\nname: style\ndescription: House style\n---\nSTYLE-BODY: use tabs.\n",
    );
    let notes = ws.join("notes.md").display().to_string();
    let python = cordon_tests::sdk::sdk_python();
    let Some(python) = python else {
        return;
    };
    let model = ScriptedModel::start(vec![
        Turn::tool_use(
            "a1",
            "Agent",
            json!({"subagent_type": "scribe", "description": "notes", "prompt": "SCRIBE-TASK: note it"}),
        ),
        Turn::tool_use(
            "a2",
            "Agent",
            json!({"subagent_type": "brief", "description": "brief", "prompt": "BRIEF-TASK: look"}),
        ),
        Turn::text("noted"),
    ])
    .await
    .unwrap();
    model.route(
        "SCRIBE-TASK",
        [
            Turn::tool_use(
                "w1",
                "Write",
                json!({"file_path": notes, "content": "tabs, always\n"}),
            ),
            Turn::text("scribed"),
        ],
    );
    model.route(
        "BRIEF-TASK",
        [
            Turn::tool_use("r1", "Read", json!({"file_path": notes})),
            Turn::text("a second call maxTurns forbids"),
        ],
    );
    let home = tempfile::tempdir().unwrap();
    let run = cordon_tests::sdk::run_script_with_args(
        &python,
        "test_flags.py",
        &["agent_fields"],
        ws.path(),
        &model,
        home.path(),
        &[],
    )
    .await;
    run.assert_success("test_flags.py agent_fields");
    let bodies = cordon_tests::agent::message_bodies(&model);
    let routed = |marker: &str| -> Vec<&Value> {
        bodies
            .iter()
            .filter(|b| b["messages"][0]["content"].to_string().contains(marker))
            .collect()
    };
    let scribe = routed("SCRIBE-TASK");
    assert_eq!(scribe.len(), 2, "{scribe:#?}");
    assert_eq!(scribe[0]["output_config"]["effort"], "low");
    assert!(scribe[0]["system"].to_string().contains("SCRIBE-PROMPT"));
    let first = scribe[0]["messages"][0]["content"].to_string();
    assert!(
        first.contains("STYLE-BODY: use tabs."),
        "the skill opens the task: {first}"
    );
    let mut tools = tool_names(scribe[0]);
    tools.sort();
    assert_eq!(tools, ["Read", "Write"]);
    let wrote = cordon_tests::agent::last_tool_results(scribe[1]);
    assert_ne!(
        wrote[0]["is_error"], true,
        "acceptEdits let the Write run: {wrote:?}"
    );
    // maxTurns 1: one model call, then the sub-agent ends unfinished.
    assert_eq!(routed("BRIEF-TASK").len(), 1);
    let main: Vec<&Value> = bodies
        .iter()
        .filter(|b| !b["messages"][0]["content"].to_string().contains("-TASK"))
        .collect();
    let brief = cordon_tests::agent::last_tool_results(main[2]);
    assert_eq!(brief[0]["tool_use_id"], "a2");
    assert_eq!(brief[0]["is_error"], true, "{brief:?}");
    model.shutdown().await;
}
