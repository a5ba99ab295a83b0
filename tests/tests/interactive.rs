//! The interactive session end to end: the real `cordon` binary on a pseudo-terminal, the
//! local sandbox, and the scripted model. A user types prompts, answers permission
//! questions with one key, changes the mode with Shift-Tab, interrupts with Ctrl-C and
//! resumes the session; the tests check the screen, the workspace, the settings file and
//! what the model was sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use cordon_tests::agent::tool_results;
use cordon_tests::pty::{Pty, cordon_on_terminal, key};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Workspace, host_processes_matching};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The scripted model with `turns`, a home for Cordon's state, and a session on a
/// terminal in `ws` started with `args`.
async fn start(ws: &Workspace, turns: Vec<Turn>, args: &[&str]) -> (ScriptedModel, TempDir, Pty) {
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let pty = cordon_on_terminal(&model, home.path(), ws.path(), args);
    (model, home, pty)
}

/// Ends the session with /exit; it must exit 0.
fn exit(mut pty: Pty) -> String {
    pty.line("/exit");
    let status = pty.wait_exit();
    assert!(status.success(), "{status}: {}", pty.screen());
    pty.screen()
}

fn write_call(id: &str, path: &Path, content: &str) -> Turn {
    Turn::tool_use(
        id,
        "Write",
        json!({"file_path": path.display().to_string(), "content": content}),
    )
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_answered_y_runs_the_call_once() {
    let ws = Workspace::new();
    let target = ws.join("hello.txt");
    let (model, _home, mut pty) = start(
        &ws,
        vec![
            write_call("w1", &target, "hello from y\n"),
            Turn::text("Wrote the file."),
        ],
        &[],
    )
    .await;
    pty.line("write hello.txt");
    let question = pty.wait_for("[y] yes once");
    assert!(question.contains("Allow Write("), "{question}");
    let call_line = question.find("● Write(").expect("the call is shown");
    assert!(
        call_line < question.find("Allow Write(").unwrap(),
        "{question}"
    );
    assert!(question.contains("+hello from y"), "the diff: {question}");
    pty.send("y");
    pty.wait_for("allowed once");
    pty.wait_for("Wrote the file.");
    pty.wait_for("[default] > ");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello from y\n");
    let results = tool_results(&model.requests()[1].body);
    assert!(!results[0].2, "the Write succeeded: {results:?}");
    // Once: no rule was written.
    assert!(!ws.join(".claude/settings.local.json").exists());
    exit(pty);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_writes_a_local_rule_and_the_same_call_no_longer_asks() {
    let ws = Workspace::new();
    let target = ws.join("notes.txt");
    let (model, _home, mut pty) = start(
        &ws,
        vec![
            write_call("w1", &target, "one\n"),
            write_call("w2", &target, "one\n"),
            Turn::text("Both writes done."),
        ],
        &[],
    )
    .await;
    pty.line("write notes twice");
    pty.wait_for("[y] yes once");
    pty.send("a");
    pty.wait_for("added allow rule Edit(/notes.txt)");
    let rest = pty.wait_for("Both writes done.");
    assert_eq!(count(&rest, "Allow Write("), 0, "asked again: {rest}");
    pty.wait_for("[default] > ");
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(ws.join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        settings,
        json!({"permissions": {"allow": ["Edit(/notes.txt)"]}})
    );
    for request in &model.requests()[1..3] {
        let results = tool_results(&request.body);
        assert!(!results[0].2, "{results:?}");
    }
    // /permissions lists it with its source.
    pty.line("/permissions");
    let listing = pty.wait_for("remove local rule");
    assert!(listing.contains("allow Edit(/notes.txt)"), "{listing}");
    assert!(listing.contains("settings.local.json"), "{listing}");
    pty.line("");
    exit(pty);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_tells_the_model_why_and_runs_nothing() {
    let ws = Workspace::new();
    let target = ws.join("secret.txt");
    let (model, _home, mut pty) = start(
        &ws,
        vec![
            write_call("w1", &target, "nope\n"),
            Turn::text("Understood, I will not write it."),
        ],
        &[],
    )
    .await;
    pty.line("write the secret");
    pty.wait_for("[y] yes once");
    pty.send("n");
    pty.wait_for("why? > ");
    pty.line("keep secrets out of the repo");
    pty.wait_for("Understood, I will not write it.");
    assert!(!target.exists());
    let results = tool_results(&model.requests()[1].body);
    assert_eq!(results[0].0, "w1");
    assert!(results[0].2, "a denial is an error result: {results:?}");
    assert!(
        results[0].1.contains("keep secrets out of the repo"),
        "{results:?}"
    );
    exit(pty);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_kills_a_long_command_and_the_session_goes_on() {
    let ws = Workspace::new();
    let started = ws.join("started");
    let marker = format!("sleep 7{}", std::process::id());
    let command = format!("touch {} && {marker}", started.display());
    let (model, _home, mut pty) = start(
        &ws,
        vec![
            Turn::tool_use("b1", "Bash", json!({"command": command})),
            Turn::text("Back after the interrupt."),
        ],
        &["--allowedTools", "Bash(touch *)", "Bash(sleep *)"],
    )
    .await;
    pty.line("run the long thing");
    // Interrupt once the command really runs.
    let deadline = std::time::Instant::now() + cordon_tests::pty::SCREEN_DEADLINE;
    while !started.exists() {
        assert!(std::time::Instant::now() < deadline, "{}", pty.screen());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    pty.send(key::CTRL_C);
    pty.wait_for("interrupted by the user");
    pty.wait_for("[default] > ");
    assert!(
        host_processes_matching(&marker).is_empty(),
        "the command still runs"
    );
    // The conversation is still valid: the next prompt goes out with a result for b1.
    pty.line("are you there?");
    pty.wait_for("Back after the interrupt.");
    let last = model.requests().last().unwrap().body.clone();
    let messages = last["messages"].as_array().unwrap();
    let has_result = messages.iter().any(|m| {
        m["content"].as_array().is_some_and(|blocks| {
            blocks
                .iter()
                .any(|b| b["type"] == "tool_result" && b["tool_use_id"] == "b1")
        })
    });
    assert!(has_result, "{last}");
    exit(pty);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shift_tab_to_accept_edits_shows_in_the_status_and_edits_stop_asking() {
    let ws = Workspace::new();
    let target = ws.join("auto.txt");
    std::fs::write(&target, "draft\n").unwrap();
    let file = target.display().to_string();
    let (_model, _home, mut pty) = start(
        &ws,
        vec![
            Turn::tool_use("r1", "Read", json!({"file_path": file})),
            Turn::tool_use(
                "e1",
                "Edit",
                json!({"file_path": file, "old_string": "draft", "new_string": "accepted"}),
            ),
            Turn::text("Edited without asking."),
        ],
        &[],
    )
    .await;
    assert!(pty.screen().ends_with("[default] > "), "{}", pty.screen());
    pty.send(key::SHIFT_TAB);
    pty.wait_for("[acceptEdits] > ");
    pty.line("edit auto.txt");
    let turn = pty.wait_for("Edited without asking.");
    assert_eq!(count(&turn, "Allow Edit("), 0, "{turn}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "accepted\n");
    pty.wait_for("[acceptEdits] > ");
    // Two more: plan, then back to default (bypassPermissions is not in the cycle).
    pty.send(key::SHIFT_TAB);
    pty.wait_for("[plan] > ");
    pty.send(key::SHIFT_TAB);
    pty.wait_for("[default] > ");
    exit(pty);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_restores_the_files_to_a_picked_checkpoint() {
    let ws = Workspace::new();
    let kept = ws.join("kept.txt");
    std::fs::write(&kept, "original\n").unwrap();
    let created = ws.join("created.txt");
    let (model, _home, mut pty) = start(
        &ws,
        vec![
            write_call("w1", &created, "new\n"),
            Turn::text("Created it."),
        ],
        &["--permission-mode", "acceptEdits"],
    )
    .await;
    pty.line("create a file");
    pty.wait_for("Created it.");
    assert!(created.exists());
    // /context answers without a model call.
    pty.line("/context");
    pty.wait_for("Context window:");
    pty.wait_for("[acceptEdits] > ");
    assert_eq!(model.requests().len(), 2);
    pty.line("/rewind");
    let listing = pty.wait_for("Enter cancels");
    assert!(listing.contains("1. "), "{listing}");
    assert!(listing.contains("create a file"), "{listing}");
    pty.line("1");
    pty.wait_for("files rewound to before prompt 1");
    assert!(!created.exists(), "the file the turn created is gone");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "original\n");
    exit(pty);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_interactively_with_its_conversation() {
    let ws = Workspace::new();
    let (model, home, mut pty) = start(&ws, vec![Turn::text("Noted: 42.")], &[]).await;
    let banner = pty.screen();
    let id = banner
        .split("session ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_string();
    pty.line("remember the number 42");
    pty.wait_for("Noted: 42.");
    exit(pty);

    model.push_turns([Turn::text("It was 42.")]);
    let mut pty = cordon_on_terminal(&model, home.path(), ws.path(), &["--resume", &id]);
    let screen = pty.screen();
    assert!(screen.contains(&format!("session {id}")), "{screen}");
    assert!(screen.contains("resumed: 2 earlier messages"), "{screen}");
    pty.line("which number?");
    pty.wait_for("It was 42.");
    let last = model.requests().last().unwrap().body.clone();
    let texts = last["messages"].to_string();
    assert!(texts.contains("remember the number 42"), "{texts}");
    assert!(texts.contains("Noted: 42."), "{texts}");
    // History: Up recalls the last line typed in this session.
    pty.send(key::UP);
    pty.wait_for("which number?");
    // Ctrl-C twice at the prompt exits.
    pty.send(key::CTRL_C);
    pty.send(key::CTRL_C);
    pty.send(key::CTRL_C);
    let status = pty.wait_exit();
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_from_shift_tab_ends_when_the_user_approves_the_plan() {
    let ws = Workspace::new();
    let (model, _home, mut pty) = start(
        &ws,
        vec![
            Turn::tool_use(
                "p1",
                "ExitPlanMode",
                json!({"plan": "1. add the flag\n2. test it"}),
            ),
            Turn::text("Plan approved; starting."),
        ],
        &[],
    )
    .await;
    pty.send(key::SHIFT_TAB);
    pty.send(key::SHIFT_TAB);
    pty.wait_for("[plan] > ");
    pty.line("plan the flag");
    let question = pty.wait_for("[y] yes once");
    assert!(question.contains("Allow ExitPlanMode("), "{question}");
    assert!(
        question.contains("2. test it"),
        "the plan is shown: {question}"
    );
    pty.send("y");
    pty.wait_for("Plan approved; starting.");
    pty.wait_for("[default] > ");
    let results = tool_results(&model.requests()[1].body);
    assert!(!results[0].2, "{results:?}");
    exit(pty);
}

/// `cordon trust --status` for `ws` with Cordon's state in `home`: success when trusted.
fn trust_status(ws: &Workspace, home: &TempDir) -> std::process::ExitStatus {
    std::process::Command::new(cordon_tests::cordon_bin())
        .args(["trust", "--status"])
        .arg(ws.path())
        .env("CORDON_HOME", home.path())
        .env("HOME", home.path())
        .output()
        .unwrap()
        .status
}

/// A repository whose own settings allow its writes to `notes.txt` and run a SessionStart
/// hook (in the sandbox) that leaves a marker; the marker's path.
fn widening_repository(ws: &Workspace) -> std::path::PathBuf {
    let marker = ws.join("session-start-marker");
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    let settings = json!({
        "permissions": {"allow": ["Edit(/notes.txt)"]},
        "hooks": {"SessionStart": [{"hooks": [
            {"type": "command", "command": format!("touch {}", marker.display())}]}]}
    });
    std::fs::write(ws.join(".claude/settings.json"), settings.to_string()).unwrap();
    marker
}

/// A session in an untrusted workspace whose settings widen: the question lists exactly
/// what trust would enable, before any model call; returns the session after the answer.
async fn answer_the_trust_question(
    ws: &Workspace,
    answer: &str,
    turns: Vec<Turn>,
) -> (ScriptedModel, TempDir, Pty) {
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let cmd = cordon_tests::pty::cordon_command(&model, home.path(), ws.path(), &[]);
    let mut pty = Pty::spawn(cmd);
    let question = pty.wait_for("[n] continue untrusted");
    for shown in [
        "is not trusted",
        "permissions.allow",
        "\"Edit(/notes.txt)\"",
        "hooks",
        "touch ",
        "session-start-marker",
    ] {
        assert!(question.contains(shown), "{shown}: {question}");
    }
    assert!(model.requests().is_empty(), "asked before any model call");
    pty.send(answer);
    pty.wait_for("Ctrl-C interrupts");
    pty.wait_for("] > ");
    (model, home, pty)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusting_at_the_first_question_loads_the_repository_settings_for_this_session() {
    let ws = Workspace::new();
    let marker = widening_repository(&ws);
    let target = ws.join("notes.txt");
    let (model, home, mut pty) = answer_the_trust_question(
        &ws,
        "y",
        vec![
            write_call("w1", &target, "trusted\n"),
            Turn::text("Wrote it."),
        ],
    )
    .await;
    assert!(pty.screen().contains("recorded:"), "{}", pty.screen());
    assert!(marker.exists(), "the SessionStart hook ran in the sandbox");
    pty.line("write notes");
    let rest = pty.wait_for("Wrote it.");
    assert_eq!(
        count(&rest, "Allow Write("),
        0,
        "the allow rule applies: {rest}"
    );
    pty.wait_for("[default] > ");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "trusted\n");
    assert!(!tool_results(&model.requests()[1].body)[0].2);
    exit(pty);
    // The trust was recorded: the next session does not ask.
    let status = trust_status(&ws, &home);
    assert!(status.success(), "cordon trust --status: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declining_the_first_question_keeps_the_repository_settings_ignored() {
    let ws = Workspace::new();
    let marker = widening_repository(&ws);
    let target = ws.join("notes.txt");
    let (model, home, mut pty) = answer_the_trust_question(
        &ws,
        "n",
        vec![
            write_call("w1", &target, "untrusted\n"),
            Turn::text("Not written."),
        ],
    )
    .await;
    assert!(pty.screen().contains("continuing untrusted"));
    assert!(!marker.exists(), "the SessionStart hook ran untrusted");
    pty.line("write notes");
    // The repository's allow rule does not count: the Write asks; it is denied.
    pty.wait_for("[y] yes once");
    pty.send("n");
    pty.wait_for("why?");
    pty.send(key::ENTER);
    pty.wait_for("Not written.");
    pty.wait_for("[default] > ");
    assert!(!target.exists());
    assert!(tool_results(&model.requests()[1].body)[0].2, "denied");
    // /trust records it for the next session, and says so.
    pty.line("/trust");
    pty.wait_for("apply from the next");
    pty.wait_for("] > ");
    assert!(!marker.exists(), "not reloaded mid-session");
    exit(pty);
    let status = trust_status(&ws, &home);
    assert!(status.success(), "trusted by /trust: {status}");
}

/// A user who types on as soon as the question is answered, before the session's prompt
/// is up: the line reaches the prompt whole (it once sat unread in the terminal, and the
/// session hung, when the question's own key reader was dropped at that moment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_typed_right_after_the_answer_reach_the_sessions_prompt() {
    let ws = Workspace::new();
    widening_repository(&ws);
    let model = ScriptedModel::start(vec![Turn::text("Heard you.")])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let cmd = cordon_tests::pty::cordon_command(&model, home.path(), ws.path(), &[]);
    let mut pty = Pty::spawn(cmd);
    pty.wait_for("[n] continue untrusted");
    pty.send("n");
    // Printed after the answer was read and before the session starts reading keys.
    pty.wait_for("continuing untrusted");
    pty.line("typed ahead");
    pty.wait_for("Heard you.");
    pty.wait_for("[default] > ");
    let sent = model.requests()[0].body.to_string();
    assert!(
        sent.contains("typed ahead"),
        "the line reached the model: {sent}"
    );
    exit(pty);
}

/// Keys typed before the trust question is on the screen (a prompt begun at once, whose
/// first letter is `y`) do not answer it: it waits for a key typed once it is seen, and
/// the early keys are dropped, not sent to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_typed_before_the_trust_question_do_not_answer_it() {
    let ws = Workspace::new();
    let marker = widening_repository(&ws);
    let model = ScriptedModel::start(vec![Turn::text("Heard you.")])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let cmd = cordon_tests::pty::cordon_command(&model, home.path(), ws.path(), &[]);
    // On the terminal before cordon starts: a whole line, and the start of the next.
    let mut pty = Pty::spawn_typed_ahead(cmd, "yes do it\ryes");
    pty.wait_for("[n] continue untrusted");
    pty.send("n");
    pty.wait_for("continuing untrusted");
    pty.line("typed after");
    pty.wait_for("Heard you.");
    pty.wait_for("[default] > ");
    let sent = model.requests()[0].body.to_string();
    assert!(sent.contains("typed after"), "{sent}");
    assert!(
        !sent.contains("yes do it"),
        "the early keys were dropped: {sent}"
    );
    exit(pty);
    assert!(!marker.exists(), "the workspace was not trusted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_and_permissions_removal_keep_a_trusted_workspace_trusted() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    let settings = json!({"permissions": {"deny": ["Read(/secret.txt)"]}});
    std::fs::write(ws.join(".claude/settings.json"), settings.to_string()).unwrap();
    let target = ws.join("notes.txt");
    let model = ScriptedModel::start(vec![
        write_call("w1", &target, "kept\n"),
        Turn::text("Done."),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let trusted = std::process::Command::new(cordon_tests::cordon_bin())
        .arg("trust")
        .arg(ws.path())
        .env("CORDON_HOME", home.path())
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(trusted.status.success(), "{trusted:?}");
    let mut pty = cordon_on_terminal(&model, home.path(), ws.path(), &[]);
    pty.line("write notes");
    pty.wait_for("[y] yes once");
    pty.send("a");
    pty.wait_for("added allow rule Edit(/notes.txt)");
    pty.wait_for("(the workspace stays trusted)");
    pty.wait_for("Done.");
    pty.wait_for("[default] > ");
    assert!(
        trust_status(&ws, &home).success(),
        "trusted after allow-always"
    );
    // Deny first: the project's rule is 1, the local allow rule 2.
    pty.line("/permissions");
    let listing = pty.wait_for("remove local rule");
    assert!(listing.contains("  2. allow Edit(/notes.txt)"), "{listing}");
    pty.line("2");
    pty.wait_for("removed Edit(/notes.txt)");
    pty.wait_for("(the workspace stays trusted)");
    pty.wait_for("] > ");
    assert!(
        trust_status(&ws, &home).success(),
        "trusted after the removal"
    );
    let local: Value = serde_json::from_str(
        &std::fs::read_to_string(ws.join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(local, json!({"permissions": {"allow": []}}));
    exit(pty);
}

/// `/compact` typed at the prompt: the model is asked for a summary, the screen says the
/// conversation was compacted, and the next prompt goes out after the summary alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_at_the_prompt_summarises_the_conversation() {
    let ws = Workspace::new();
    let turns = vec![
        Turn::text("Noted: the colour is teal."),
        Turn::text("SUMMARY: the user said the colour is teal."),
        Turn::text("After compaction."),
    ];
    let (model, _home, mut pty) = start(&ws, turns, &[]).await;
    pty.line("remember the colour teal");
    pty.wait_for("Noted: the colour is teal.");
    pty.wait_for("[default] > ");
    pty.line("/compact");
    pty.wait_for("compacted the conversation");
    pty.wait_for("[default] > ");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one summary request");
    let asked = requests[1].body["messages"].to_string();
    assert!(
        asked.contains("replaced by a summary"),
        "not a summary request: {asked}"
    );
    assert!(asked.contains("remember the colour teal"), "{asked}");
    pty.line("what next?");
    pty.wait_for("After compaction.");
    let next = model.requests()[2].body["messages"].clone();
    let first = next[0].to_string();
    assert!(
        first.contains("SUMMARY: the user said the colour is teal."),
        "{next}"
    );
    assert!(
        !next.to_string().contains("Noted: the colour is teal."),
        "the old turns were sent again: {next}"
    );
    exit(pty);
}

/// Ctrl-C at an empty prompt says how to exit; a second one exits (status 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_at_an_empty_prompt_exits() {
    let ws = Workspace::new();
    let (model, _home, mut pty) = start(&ws, vec![], &[]).await;
    pty.send(key::CTRL_C);
    pty.wait_for("press Ctrl-C again to exit");
    pty.send(key::CTRL_C);
    let status = pty.wait_exit();
    assert!(status.success(), "{status}: {}", pty.screen());
    assert!(model.requests().is_empty(), "nothing reached the model");
}
