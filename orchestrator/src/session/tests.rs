use std::io::Write;

use serde_json::json;

use super::*;
use crate::model::{ContentBlock, Message, Role, Usage};
use crate::session::transcript::INTERRUPTED_TOOL_RESULT;

fn assistant_with_tool(id: &str) -> RecordBody {
    RecordBody::Assistant {
        message: Message::assistant(vec![
            ContentBlock::text("let me look"),
            ContentBlock::ToolUse {
                id: id.into(),
                name: "Bash".into(),
                input: json!({"command": "ls"}),
            },
        ]),
        stop_reason: Some("tool_use".into()),
        usage: Usage::default(),
    }
}

#[test]
fn records_chain_by_parent_and_survive_reload() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let (info, mut t) = store.create(std::path::Path::new("/w"), "m").unwrap();
    let a = t
        .append(RecordBody::User {
            message: Message::user_text("hi"),
        })
        .unwrap();
    let b = t.append(assistant_with_tool("t1")).unwrap();
    t.sync().unwrap();
    assert_eq!(b.parent_uuid.as_deref(), Some(a.uuid.as_str()));
    let loaded = Loaded::read(&info.transcript).unwrap();
    assert_eq!(loaded.records.len(), 3);
    assert_eq!(loaded.session_id, info.id);
}

#[test]
fn a_dangling_tool_use_is_closed_with_an_error_result() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let (info, mut t) = store.create(std::path::Path::new("/w"), "m").unwrap();
    t.append(RecordBody::User {
        message: Message::user_text("hi"),
    })
    .unwrap();
    t.append(assistant_with_tool("t1")).unwrap();
    t.sync().unwrap();
    drop(t);
    let (_, loaded, _) = store.resume(&info.id).unwrap();
    let (messages, closed) = loaded.conversation();
    assert_eq!(closed, vec!["t1".to_string()]);
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[2].role, Role::User);
    assert_eq!(
        messages[2].content,
        vec![ContentBlock::tool_result(
            "t1",
            INTERRUPTED_TOOL_RESULT,
            true
        )]
    );
}

#[test]
fn a_torn_last_line_is_dropped_and_appending_continues_cleanly() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let (info, mut t) = store.create(std::path::Path::new("/w"), "m").unwrap();
    t.append(RecordBody::User {
        message: Message::user_text("hi"),
    })
    .unwrap();
    t.sync().unwrap();
    drop(t);
    // A crash in the middle of writing the next record.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&info.transcript)
        .unwrap();
    f.write_all(br#"{"uuid":"x","session_id":"#).unwrap();
    drop(f);
    let (_, loaded, mut t) = store.resume(&info.id).unwrap();
    assert!(loaded.torn_tail);
    assert_eq!(loaded.records.len(), 2);
    t.append(RecordBody::User {
        message: Message::user_text("again"),
    })
    .unwrap();
    t.sync().unwrap();
    let again = Loaded::read(&info.transcript).unwrap();
    assert!(!again.torn_tail);
    assert_eq!(again.records.len(), 3);
}

#[test]
fn a_corrupt_middle_line_is_reported_not_ignored() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let (info, t) = store.create(std::path::Path::new("/w"), "m").unwrap();
    drop(t);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&info.transcript)
        .unwrap();
    f.write_all(b"not json\n{\"also\":\"bad\"}\n").unwrap();
    let err = Loaded::read(&info.transcript).unwrap_err();
    assert!(
        matches!(err, TranscriptError::Corrupt { line: 2, .. }),
        "{err}"
    );
}

#[test]
fn continue_finds_the_latest_session_of_the_workspace_and_fork_copies_turns() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let (first, _) = store.create(std::path::Path::new("/w"), "m").unwrap();
    let (_, _) = store.create(std::path::Path::new("/other"), "m").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let (second, mut t) = store.create(std::path::Path::new("/w"), "m").unwrap();
    t.append(RecordBody::User {
        message: Message::user_text("hello"),
    })
    .unwrap();
    t.sync().unwrap();
    assert_eq!(
        store.latest_in(std::path::Path::new("/w")).unwrap().id,
        second.id
    );
    // Timestamps have millisecond precision: let the clock move past `second`'s.
    std::thread::sleep(std::time::Duration::from_millis(5));
    store.touch(&first.id).unwrap();
    assert_eq!(
        store.latest_in(std::path::Path::new("/w")).unwrap().id,
        first.id
    );
    assert!(matches!(
        store.latest_in(std::path::Path::new("/none")),
        Err(StoreError::NoneInWorkspace(_))
    ));

    let (forked, _) = store.fork(&second.id).unwrap();
    let loaded = Loaded::read(&forked.transcript).unwrap();
    let (messages, _) = loaded.conversation();
    assert_eq!(messages, vec![Message::user_text("hello")]);
    assert_ne!(forked.id, second.id);
}

#[test]
fn compaction_replaces_earlier_turns_with_the_summary() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let (info, mut t) = store.create(std::path::Path::new("/w"), "m").unwrap();
    t.append(RecordBody::User {
        message: Message::user_text("old question"),
    })
    .unwrap();
    t.append(RecordBody::Compaction {
        summary: "summary of before".into(),
        tokens_before: 1000,
    })
    .unwrap();
    t.append(RecordBody::User {
        message: Message::user_text("new question"),
    })
    .unwrap();
    t.sync().unwrap();
    let (messages, _) = Loaded::read(&info.transcript).unwrap().conversation();
    assert_eq!(messages.len(), 1, "summary and next user turn merge");
    assert_eq!(
        messages[0].content,
        vec![
            ContentBlock::text("summary of before"),
            ContentBlock::text("new question")
        ]
    );
}

#[test]
fn a_sidechain_joins_the_transcript_but_not_the_conversation() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let (info, mut t) = store.create(std::path::Path::new("/w"), "m").unwrap();
    t.append(RecordBody::User {
        message: Message::user_text("hi"),
    })
    .unwrap();
    let parent = t.append(assistant_with_tool("agent1")).unwrap();
    let mut side = Transcript::open_sidechain(&info.transcript, &info.id, "agent1").unwrap();
    let first = side
        .append(RecordBody::User {
            message: Message::user_text("the sub-agent's task"),
        })
        .unwrap();
    side.append(RecordBody::Assistant {
        message: Message::assistant(vec![ContentBlock::text("report")]),
        stop_reason: Some("end_turn".into()),
        usage: Usage::default(),
    })
    .unwrap();
    side.sync().unwrap();
    let results = t
        .append(RecordBody::User {
            message: Message::user(vec![ContentBlock::tool_result("agent1", "report", false)]),
        })
        .unwrap();
    t.sync().unwrap();
    // The parent's chain skips the sidechain; the sidechain starts its own.
    assert_eq!(results.parent_uuid.as_deref(), Some(parent.uuid.as_str()));
    assert_eq!(first.parent_uuid, None);
    let raw = std::fs::read_to_string(&info.transcript).unwrap();
    let side_line: serde_json::Value = serde_json::from_str(raw.lines().nth(3).unwrap()).unwrap();
    assert_eq!(side_line["isSidechain"], true);
    assert_eq!(side_line["parent_tool_use_id"], "agent1");
    let loaded = Loaded::read(&info.transcript).unwrap();
    let (messages, closed) = loaded.conversation();
    assert!(closed.is_empty());
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(!format!("{messages:?}").contains("the sub-agent's task"));
    // Resuming appends after the parent's last record, not the sidechain's.
    let reopened = Transcript::reopen(&loaded).unwrap();
    drop(reopened);
    let (_, fork) = store.fork(&info.id).unwrap();
    let forked = Loaded::read(fork.path()).unwrap();
    assert!(forked.records.iter().all(|r| !r.is_sidechain));
}
