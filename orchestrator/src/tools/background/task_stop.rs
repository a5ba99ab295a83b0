//! TaskStop: ends a background shell, its whole process tree (Claude Code's current name
//! and fields; `shell_id`, from its older KillShell, is accepted too). The result comes
//! once the agent reported the command gone.

use serde_json::{Value, json};

use crate::tools::{Tool, ToolContext, ToolOutput};

pub const NAME: &str = "TaskStop";
/// Claude Code's earlier name for it.
pub const OLD_NAME: &str = "KillShell";

const DESCRIPTION: &str = "Stops a background command (one started by Bash with \
run_in_background) by its `task_id`: the command and every process it started are killed. \
Output it printed before and not yet read stays readable with TaskOutput.";

#[derive(Debug, Default)]
pub struct TaskStopTool;

#[tonic::async_trait]
impl Tool for TaskStopTool {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "task_id": {"type": "string", "minLength": 1,
                    "description": "The id of the background task to stop"},
                "shell_id": {"type": "string", "minLength": 1,
                    "description": "Deprecated: use task_id"}
            },
            // task_id, or its older name: the call checks that one is there.
            "required": [],
            "additionalProperties": false
        })
    }

    /// Permission: it changes no file and ends only what a Bash call of this session
    /// started in the background, a call that needed its own permission; Claude Code asks
    /// for neither. So it counts as read-only (allowed in every mode, plan mode too).
    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let id = match super::task_id(&input, "shell_id", NAME) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        match ctx.background().stop(ctx, id).await {
            Ok(shell) => ToolOutput::ok(
                json!({
                    "message": format!("Stopped task {} ({})", shell.id, shell.command),
                    "task_id": shell.id,
                    "task_type": "local_bash",
                    "command": shell.command,
                })
                .to_string(),
            ),
            Err(e) => ToolOutput::error(format!("TaskStop: {e}")),
        }
    }
}
