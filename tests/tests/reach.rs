//! What Claude Code users' repositories describe, run end to end with the real `cordon`
//! binary, the local sandbox and the scripted model: MCP servers (`.mcp.json`; their
//! tool lists deferred behind ToolSearch or changing while they run), custom
//! slash commands (`.claude/commands`), skills (`.claude/skills`), sub-agents
//! (`.claude/agents`) and the task list.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "reach/agents.rs"]
mod agents;
#[path = "reach/background.rs"]
mod background;
#[path = "reach/commands.rs"]
mod commands;
#[path = "reach/images.rs"]
mod images;
#[path = "reach/mcp.rs"]
mod mcp;
#[path = "reach/mcp_lists.rs"]
mod mcp_lists;

use cordon_tests::Workspace;
use cordon_tests::agent::{Output, run_command, tool_names};
use cordon_tests::scripted_model::ScriptedModel;

/// `cordon run -p "use the tools"` in `ws` with `args` and `env`, JSON output.
async fn run(model: &ScriptedModel, ws: &Workspace, args: &[&str], env: &[(&str, &str)]) -> Output {
    run_prompt(model, ws, args, env, "use the tools").await
}

async fn run_prompt(
    model: &ScriptedModel,
    ws: &Workspace,
    args: &[&str],
    env: &[(&str, &str)],
    prompt: &str,
) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = run_command(model, home.path(), ws.path(), &["--output-format", "json"]);
    cmd.args(args).args(["-p", prompt]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Output::of(cmd).await
}
