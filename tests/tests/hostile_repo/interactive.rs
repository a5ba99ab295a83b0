//! The interactive session's own writes on the host: "allow always" edits
//! `.claude/settings.local.json`, which the repository controls. A link planted there (git
//! checks links out as links) must not make Cordon write the file it points to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cordon_tests::Workspace;
use cordon_tests::pty::{cordon_on_terminal, key};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_does_not_write_through_a_planted_settings_link() {
    let ws = Workspace::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.json");
    std::fs::write(&victim, "{}").unwrap();
    std::fs::create_dir(ws.join(".claude")).unwrap();
    std::os::unix::fs::symlink(&victim, ws.join(".claude/settings.local.json")).unwrap();
    let target = ws.join("out.txt").display().to_string();
    let write = json!({"file_path": target, "content": "x\n"});
    let model = ScriptedModel::start(vec![
        Turn::tool_use("w1", "Write", write.clone()),
        Turn::tool_use("w2", "Write", write),
        Turn::text("Wrote twice."),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut pty = cordon_on_terminal(&model, home.path(), ws.path(), &[]);
    pty.line("write out.txt twice");
    pty.wait_for("[y] yes once");
    pty.send("a");
    // Refused, and said so; the rule still holds for this session.
    pty.wait_for("applies for this session only");
    let rest = pty.wait_for("Wrote twice.");
    assert!(!rest.contains("Allow Write("), "{rest}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "{}");
    assert!(
        std::fs::symlink_metadata(ws.join(".claude/settings.local.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    pty.send(key::CTRL_C);
    pty.send(key::CTRL_C);
    assert!(pty.wait_exit().success());
}
