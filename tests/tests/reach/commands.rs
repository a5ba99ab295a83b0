//! Custom slash commands as the prompt of a headless run, a skill loaded through the
//! Skill tool, and TodoWrite.

use cordon_tests::Workspace;
use cordon_tests::agent::tool_results;
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use serde_json::json;

use super::{run_prompt, tool_names};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_command_is_the_prompt_and_a_skill_and_the_task_list_work() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.join(".claude/commands")).unwrap();
    std::fs::write(
        ws.join(".claude/commands/fix-issue.md"),
        "---\ndescription: Fix a numbered issue\n---\nFix issue #$ARGUMENTS and report.\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.join(".claude/skills/release")).unwrap();
    std::fs::write(
        ws.join(".claude/skills/release/SKILL.md"),
        "---\nname: release\ndescription: Cut a release\n---\nBump the version, then tag.\n",
    )
    .unwrap();
    let todos = json!({"todos": [
        {"content": "Fix it", "status": "in_progress", "activeForm": "Fixing it"},
        {"content": "Report", "status": "pending", "activeForm": "Reporting"}
    ]});
    let model = ScriptedModel::start(vec![
        Turn::tool_use("s1", "Skill", json!({"skill": "release"})),
        Turn::tool_use("t1", "TodoWrite", todos),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let out = run_prompt(&model, &ws, &[], &[], "/fix-issue 42").await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    let first = &requests[0].body;
    let prompt = first["messages"][0].to_string();
    assert!(prompt.contains("Fix issue #42 and report."), "{prompt}");
    let skill = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Skill")
        .unwrap();
    assert!(
        skill["description"]
            .as_str()
            .unwrap()
            .contains("release: Cut a release"),
        "{skill}"
    );
    assert!(tool_names(first).iter().any(|n| n == "TodoWrite"));
    let loaded = tool_results(&requests[1].body);
    assert!(
        !loaded[0].2 && loaded[0].1.contains("Bump the version, then tag."),
        "{loaded:?}"
    );
    let todo = tool_results(&requests[2].body);
    assert!(
        !todo[0].2 && todo[0].1.contains("task list was updated"),
        "{todo:?}"
    );
}
