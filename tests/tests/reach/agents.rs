//! Sub-agents: the Agent tool runs a `.claude/agents` definition with its own system
//! prompt and tools, on the session's sandbox; its report is the parent's tool result, its
//! messages go to stream-json with `parent_tool_use_id` and to the transcript as a
//! sidechain, SubagentStop hooks fire; two run in parallel; an interrupt ends them all.
//!
//! The scripted model routes each sub-agent's requests by a marker in its prompt (its
//! first message), so parallel conversations get their own script.

use std::path::Path;
use std::time::Duration;

use cordon_tests::Workspace;
use cordon_tests::agent::{Output, run_command, tool_results};
use cordon_tests::scripted_model::{Reply, ScriptedModel, Turn};
use serde_json::{Value, json};

use super::tool_names;

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews code for bugs\ntools: Read, Grep\n---\nYou are REVIEWER-SYSTEM: read the code and report.\n";

/// A workspace with the reviewer definition, a source file and a SubagentStop hook that
/// logs its input to `stops.jsonl`.
fn project() -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.join(".claude/agents")).unwrap();
    std::fs::write(ws.join(".claude/agents/reviewer.md"), REVIEWER).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn answer() -> u32 { 42 }\n").unwrap();
    let log = ws.join("stops.jsonl");
    let hooks = json!({"SubagentStop": [{"hooks": [{"type": "command",
        "command": format!("cat >> {}; echo >> {}", log.display(), log.display())}]}]});
    std::fs::write(
        ws.join(".claude/settings.json"),
        serde_json::to_vec(&json!({ "hooks": hooks })).unwrap(),
    )
    .unwrap();
    ws
}

/// `cordon run` in `ws` with its state in `home`, a private HOME and no managed settings.
fn command(
    model: &ScriptedModel,
    ws: &Workspace,
    home: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut cmd = run_command(model, home, ws.path(), args);
    cmd.env("HOME", home)
        .env("CORDON_MANAGED_SETTINGS", home.join("none.json"));
    cmd
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The session's transcript records (the only transcript under `home`).
fn transcript(home: &Path) -> Vec<Value> {
    let dir = home.join("sessions");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap_or_else(|| panic!("no transcript in {}", dir.display()));
    lines(&std::fs::read_to_string(file).unwrap())
}

fn agent_call(id: &str, prompt: &str, kind: Option<&str>) -> (String, String, Value) {
    let mut input = json!({"description": "look at the code", "prompt": prompt});
    if let Some(kind) = kind {
        input["subagent_type"] = json!(kind);
    }
    (id.to_string(), "Agent".to_string(), input)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_subagent_reads_a_file_and_reports_to_its_parent() {
    let ws = project();
    let home = tempfile::tempdir().unwrap();
    let file = ws.join("src/lib.rs").display().to_string();
    let (id, name, input) = agent_call("agent1", "SUB-A: review src/lib.rs", Some("reviewer"));
    let model = ScriptedModel::start(vec![
        Turn::tool_use(id, name, input),
        Turn::text("the reviewer is happy"),
    ])
    .await
    .unwrap();
    model.route(
        "SUB-A",
        [
            Turn::tool_use("r1", "Read", json!({"file_path": file})),
            Turn::text("REPORT: answer() returns 42"),
        ],
    );
    let args = ["--output-format", "stream-json", "--verbose", "--trust"];
    let mut cmd = command(&model, &ws, home.path(), &args);
    cmd.args(["-p", "review the code"]);
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");

    // The parent is offered Agent (not its old name), describing the reviewer.
    let parent = &requests[0].body;
    let names = tool_names(parent);
    assert!(names.iter().any(|n| n == "Agent") && !names.iter().any(|n| n == "Task"));
    let agent = parent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .unwrap();
    let described = agent["description"].as_str().unwrap();
    assert!(
        described.contains("- reviewer: Reviews code for bugs (Tools: Read, Grep)"),
        "{described}"
    );

    // The sub-agent's requests: its own system prompt, only its tools, its own context.
    let sub: Vec<&Value> = requests
        .iter()
        .map(|r| &r.body)
        .filter(|b| b["messages"][0].to_string().contains("SUB-A"))
        .collect();
    assert_eq!(sub.len(), 2);
    assert!(sub[0]["system"].to_string().contains("REVIEWER-SYSTEM"));
    assert!(!parent["system"].to_string().contains("REVIEWER-SYSTEM"));
    assert_eq!(tool_names(sub[0]), ["Read", "Grep"]);
    assert_eq!(sub[0]["messages"].as_array().unwrap().len(), 1);
    let read = tool_results(sub[1]);
    assert!(!read[0].2 && read[0].1.contains("42"), "{read:?}");

    // Only the report comes back to the parent, as the Agent call's result.
    let last = &requests[3].body;
    assert_eq!(
        tool_results(last),
        [(
            "agent1".to_string(),
            "REPORT: answer() returns 42".to_string(),
            false
        )]
    );
    assert!(
        !last.to_string().contains("r1"),
        "the sub-agent's calls leaked"
    );

    // stream-json: the sub-agent's messages carry the Agent call's id; the parent's none.
    let records = lines(&out.stdout);
    let of = |parent: Value| {
        records
            .iter()
            .filter(|r| r["type"] == "assistant" || r["type"] == "user")
            .filter(|r| r["parent_tool_use_id"] == parent)
            .count()
    };
    assert_eq!(of(json!("agent1")), 4, "{}", out.stdout);
    assert_eq!(of(Value::Null), 4, "{}", out.stdout);
    assert_eq!(records.last().unwrap()["result"], "the reviewer is happy");

    // The transcript holds the sidechain, marked and linked to the Agent call.
    let recs = transcript(home.path());
    let side: Vec<&Value> = recs.iter().filter(|r| r["isSidechain"] == true).collect();
    assert!(
        side.iter().all(|r| r["parent_tool_use_id"] == "agent1"),
        "{side:#?}"
    );
    let kinds: Vec<&str> = side.iter().map(|r| r["type"].as_str().unwrap()).collect();
    for kind in ["user", "assistant", "tool_call", "result"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
    let main_turns = recs
        .iter()
        .filter(|r| r["isSidechain"].is_null() && (r["type"] == "user" || r["type"] == "assistant"))
        .count();
    assert_eq!(main_turns, 4);

    // SubagentStop fired once, for the reviewer, inside the sandbox.
    let stops = std::fs::read_to_string(ws.join("stops.jsonl")).unwrap();
    let stops = lines(&stops);
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert_eq!(stops[0]["hook_event_name"], "SubagentStop");
    assert_eq!(stops[0]["agent_type"], "reviewer");
    assert_eq!(stops[0]["stop_hook_active"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subagents_run_in_parallel_in_one_turn() {
    let ws = project();
    let home = tempfile::tempdir().unwrap();
    let flag = ws.join("b-was-here").display().to_string();
    // A waits for a file that only B creates: run one after the other, A would time out.
    let wait = format!(
        "for i in $(seq 600); do [ -e {flag} ] && break; sleep 0.1; done; [ -e {flag} ] && echo saw-b"
    );
    let (a_id, a_name, a_input) = agent_call("agentA", "SUB-A: wait for B", None);
    let (b_id, b_name, b_input) = agent_call("agentB", "SUB-B: signal A", None);
    let both = Reply::default()
        .with_tool_use(a_id, a_name, a_input)
        .with_tool_use(b_id, b_name, b_input);
    let model = ScriptedModel::start(vec![Turn::Reply(both), Turn::text("both done")])
        .await
        .unwrap();
    model.route(
        "SUB-A",
        [
            Turn::tool_use("a1", "Bash", json!({"command": wait})),
            Turn::text("A: saw B"),
        ],
    );
    model.route(
        "SUB-B",
        [
            Turn::tool_use("b1", "Bash", json!({"command": format!("touch {flag}")})),
            Turn::text("B: signalled"),
        ],
    );
    let args = [
        "--output-format",
        "json",
        "--trust",
        "--allowedTools",
        "Bash",
    ];
    let mut cmd = command(&model, &ws, home.path(), &args);
    cmd.args(["-p", "do both"]);
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    let a_bash = requests
        .iter()
        .map(|r| &r.body)
        .find(|b| {
            b["messages"][0].to_string().contains("SUB-A")
                && b["messages"].as_array().unwrap().len() == 3
        })
        .unwrap();
    let waited = tool_results(a_bash);
    assert!(waited[0].1.contains("saw-b"), "{waited:?}");
    let last = &requests.last().unwrap().body;
    assert_eq!(
        tool_results(last),
        [
            ("agentA".to_string(), "A: saw B".to_string(), false),
            ("agentB".to_string(), "B: signalled".to_string(), false),
        ]
    );
    assert_eq!(out.json()["result"], "both done");
    // Each sub-agent's sidechain is its own.
    let recs = transcript(home.path());
    for id in ["agentA", "agentB"] {
        assert!(
            recs.iter()
                .any(|r| r["parent_tool_use_id"] == id && r["type"] == "result"),
            "{id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_during_a_subagent_ends_it_and_the_parent() {
    let ws = project();
    let home = tempfile::tempdir().unwrap();
    let started = ws.join("started").display().to_string();
    let (id, name, input) = agent_call("agent1", "SUB-A: wait a long time", None);
    let model = ScriptedModel::start(vec![
        Turn::tool_use(id, name, input),
        Turn::text("the parent must not get here"),
    ])
    .await
    .unwrap();
    model.route(
        "SUB-A",
        [
            Turn::tool_use(
                "s1",
                "Bash",
                json!({"command": format!("touch {started}; sleep 600")}),
            ),
            Turn::text("the sub-agent must not get here"),
        ],
    );
    let args = [
        "--output-format",
        "json",
        "--trust",
        "--allowedTools",
        "Bash",
    ];
    let mut cmd = command(&model, &ws, home.path(), &args);
    cmd.args(["-p", "start it"]);
    let child = cmd.spawn().unwrap();
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    let mut waited = 0;
    while !ws.join("started").exists() {
        assert!(waited < 1200, "the sub-agent's command never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    // SAFETY: `pid` is the cordon process this test spawned and still holds.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("cordon did not stop after the interrupt")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["subtype"], "interrupted", "{stdout}");
    // Neither loop asked the model again.
    assert_eq!(model.requests().len(), 2);
    let recs = transcript(home.path());
    let ended = |side: bool| {
        recs.iter()
            .filter(|r| r["type"] == "result" && (r["isSidechain"] == true) == side)
            .map(|r| r["subtype"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ended(true), ["interrupted"]);
    assert_eq!(ended(false), ["interrupted"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_workspace_s_agents_are_not_offered() {
    let ws = project();
    let home = tempfile::tempdir().unwrap();
    let model = ScriptedModel::start(vec![Turn::text("ok")]).await.unwrap();
    let mut cmd = command(&model, &ws, home.path(), &["--output-format", "json"]);
    cmd.args(["-p", "hello"]);
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let body = &model.requests()[0].body;
    let agent = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .unwrap()
        .to_string();
    assert!(
        agent.contains("general-purpose") && !agent.contains("reviewer"),
        "{agent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_four_subagents_run_at_once() {
    let ws = project();
    let home = tempfile::tempdir().unwrap();
    let dir = ws.join("running").display().to_string();
    let mut reply = Reply::default();
    for n in 1..=5 {
        let (id, name, input) = agent_call(&format!("agent{n}"), &format!("SUB-{n}: go"), None);
        reply = reply.with_tool_use(id, name, input);
    }
    let model = ScriptedModel::start(vec![Turn::Reply(reply), Turn::text("all done")])
        .await
        .unwrap();
    // The first four wait until four are running (so four do run at once), then mark
    // themselves done; the fifth, started only when a slot is free, finds one done.
    for n in 1..=4 {
        let command = format!(
            "mkdir -p {dir}; touch {dir}/{n}; for i in $(seq 600); do \
             [ $(ls {dir} | wc -l) -ge 4 ] && break; sleep 0.1; done; \
             echo four=$(ls {dir} | wc -l); touch {dir}.done-{n}"
        );
        model.route(
            format!("SUB-{n}"),
            [
                Turn::tool_use(format!("c{n}"), "Bash", json!({"command": command})),
                Turn::text(format!("agent {n} done")),
            ],
        );
    }
    let fifth = format!("ls {dir}.done-* >/dev/null 2>&1 && echo a-slot-was-freed");
    model.route(
        "SUB-5",
        [
            Turn::tool_use("c5", "Bash", json!({"command": fifth})),
            Turn::text("agent 5 done"),
        ],
    );
    let args = [
        "--output-format",
        "json",
        "--trust",
        "--allowedTools",
        "Bash",
    ];
    let mut cmd = command(&model, &ws, home.path(), &args);
    cmd.args(["-p", "run five"]);
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    let bash_result = |n: usize| {
        let body = requests
            .iter()
            .map(|r| &r.body)
            .find(|b| {
                b["messages"][0].to_string().contains(&format!("SUB-{n}"))
                    && b["messages"].as_array().unwrap().len() == 3
            })
            .unwrap();
        tool_results(body)[0].1.clone()
    };
    for n in 1..=4 {
        assert!(bash_result(n).contains("four=4"), "{}", bash_result(n));
    }
    assert!(
        bash_result(5).contains("a-slot-was-freed"),
        "{}",
        bash_result(5)
    );
    let results = tool_results(&requests.last().unwrap().body);
    assert_eq!(results.len(), 5);
    assert!(
        results.iter().all(|(_, _, is_error)| !is_error),
        "{results:?}"
    );
}

/// A client's `set_model` (stream-json control request) switches the session's model; a
/// sub-agent whose definition names no model starts on the model the session has then,
/// one that names its own keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_without_a_model_follows_the_sessions_set_model() {
    use tokio::io::AsyncWriteExt;
    let ws = project();
    std::fs::write(
        ws.join(".claude/agents/pinned.md"),
        "---\nname: pinned\ndescription: Pinned to haiku\nmodel: haiku\n---\nPINNED\n",
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let (a, name, input_a) = agent_call("agent-a", "SUB-FOLLOW: look", None);
    let (b, _, input_b) = agent_call("agent-b", "SUB-PINNED: look", Some("pinned"));
    let model = ScriptedModel::start(vec![
        Turn::Reply(Reply::tool_use(a, name.clone(), input_a)),
        Turn::Reply(Reply::tool_use(b, name, input_b)),
        Turn::text("both reported"),
    ])
    .await
    .unwrap();
    model.route("SUB-FOLLOW", [Turn::text("followed")]);
    model.route("SUB-PINNED", [Turn::text("pinned")]);
    let args = [
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--trust",
    ];
    let mut cmd = command(&model, &ws, home.path(), &args);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = [
        json!({"type": "control_request", "request_id": "m1",
            "request": {"subtype": "set_model", "model": "claude-switched-1"}}),
        json!({"type": "user", "message": {"role": "user", "content": "delegate"}}),
    ];
    for line in input {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    // Ends the session once its turn is done.
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("cordon hung")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = model.requests();
    let model_of = |marker: &str| -> Vec<String> {
        requests
            .iter()
            .filter(|r| r.body["messages"][0].to_string().contains(marker))
            .map(|r| r.body["model"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        model_of("SUB-FOLLOW"),
        ["claude-switched-1"],
        "{requests:#?}"
    );
    assert_eq!(model_of("SUB-PINNED"), ["claude-haiku-4-5"]);
    assert_eq!(
        requests[0].body["model"], "claude-switched-1",
        "the parent switched too"
    );
}
