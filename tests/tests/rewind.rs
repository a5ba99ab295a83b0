//! Checkpoints and `cordon rewind` end to end: a scripted session changes the workspace
//! through Bash (rm, sed -i, mv, a new file), and rewinding to a user message puts the
//! files back as they were before that message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use cordon_tests::Workspace;
use cordon_tests::agent::{Output, cordon_command};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use serde_json::json;

type Out = Output;

async fn cordon(model: &ScriptedModel, home: &Path, args: &[&str]) -> Out {
    Output::of(cordon_command(model, home, args)).await
}

fn bash(id: &str, command: &str) -> Turn {
    Turn::tool_use(id, "Bash", json!({ "command": command }))
}

fn read(ws: &Workspace, rel: &str) -> Option<String> {
    std::fs::read_to_string(ws.join(rel)).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_rm_sed_and_mv_are_rewound_per_user_message() {
    let ws = Workspace::new();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    std::fs::write(ws.join("b.txt"), "x\n").unwrap();
    std::fs::write(ws.join("c.txt"), "c\n").unwrap();
    let model = ScriptedModel::start(vec![
        bash("b1", "rm a.txt"),
        bash("b2", "sed -i s/x/y/ b.txt"),
        bash("b3", "mv c.txt d.txt"),
        bash("b4", "echo e > e.txt"),
        Turn::text("changed things"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let base = [
        "run",
        "--workspace",
        ws_arg,
        "--output-format",
        "json",
        "--permission-mode",
        "bypassPermissions",
    ];
    let first = cordon(
        &model,
        home.path(),
        &[&base[..], &["change things"]].concat(),
    )
    .await;
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let session = first.json()["session_id"].as_str().unwrap().to_string();
    assert!(!ws.join("a.txt").exists());
    assert_eq!(read(&ws, "b.txt").as_deref(), Some("y\n"));
    assert!(ws.join("d.txt").exists() && ws.join("e.txt").exists());

    // A second prompt in the same session, with changes of its own.
    model.push_turns([
        bash("b5", "echo later > f.txt && echo z > b.txt"),
        Turn::text("more"),
    ]);
    let second = cordon(
        &model,
        home.path(),
        &[&base[..], &["--resume", &session, "more changes"]].concat(),
    )
    .await;
    assert_eq!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    assert_eq!(read(&ws, "b.txt").as_deref(), Some("z\n"));

    // One checkpoint per prompt, each naming its user message and prompt.
    let list = cordon(
        &model,
        home.path(),
        &["rewind", "--session", &session, "--list", "--json"],
    )
    .await;
    assert_eq!(list.code, 0, "{}", list.stderr);
    let list = list.json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0]["prompt"], "change things");
    assert_eq!(list[1]["prompt"], "more changes");
    let first_uuid = list[0]["user_message_uuid"].as_str().unwrap().to_string();
    let second_uuid = list[1]["user_message_uuid"].as_str().unwrap().to_string();
    let text = cordon(&model, home.path(), &["rewind", "--session", &session]).await;
    assert!(text.stdout.contains(&first_uuid), "{}", text.stdout);

    // Rewinding to the second message undoes only the second prompt's changes.
    let out = cordon(
        &model,
        home.path(),
        &[
            "rewind",
            "--session",
            &session,
            "--to",
            &second_uuid,
            "--json",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.json()["removed"], json!(["f.txt"]));
    assert_eq!(out.json()["restored"], json!(["b.txt"]));
    assert!(!ws.join("f.txt").exists());
    assert_eq!(read(&ws, "b.txt").as_deref(), Some("y\n"));
    assert!(!ws.join("a.txt").exists());

    // Rewinding to the first message undoes rm, sed -i, mv and the new file; with
    // --conversation, a new session stops before that message.
    let out = cordon(
        &model,
        home.path(),
        &[
            "rewind",
            "--session",
            &session,
            "--to",
            &first_uuid,
            "--conversation",
            "--json",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(read(&ws, "a.txt").as_deref(), Some("a\n"));
    assert_eq!(read(&ws, "b.txt").as_deref(), Some("x\n"));
    assert_eq!(read(&ws, "c.txt").as_deref(), Some("c\n"));
    assert!(!ws.join("d.txt").exists());
    assert!(!ws.join("e.txt").exists());
    let new_session = out.json()["new_session_id"].as_str().unwrap().to_string();
    assert_ne!(new_session, session);

    // The rewound conversation holds nothing from the first prompt on.
    model.push_turns([Turn::text("fresh start")]);
    let resumed = cordon(
        &model,
        home.path(),
        &[&base[..], &["--resume", &new_session, "again"]].concat(),
    )
    .await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let last = model.requests().last().unwrap().body.clone();
    let messages = last["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].to_string().contains("again"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_refuses_unknown_messages_and_needs_a_session() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = cordon(&model, home.path(), &["rewind", "--list"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    let ws = Workspace::new();
    model.push_turns([Turn::text("hi")]);
    let run = cordon(
        &model,
        home.path(),
        &[
            "run",
            "--workspace",
            ws.path().to_str().unwrap(),
            "--output-format",
            "json",
            "hello",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let session = run.json()["session_id"].as_str().unwrap().to_string();
    let out = cordon(
        &model,
        home.path(),
        &["rewind", "--session", &session, "--to", "no-such-message"],
    )
    .await;
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("no checkpoint"), "{}", out.stderr);
}
