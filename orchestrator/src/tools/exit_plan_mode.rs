//! ExitPlanMode: in plan mode, presents the plan for approval. Plan mode ends (the session
//! goes back to the default mode) only when a prompter (a client such as the Agent SDK's
//! can_use_tool) approves; a headless run has none, so the call is an error that shows the
//! plan and says it needs approval.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, str_field};
use crate::agent::gate::{PermissionPrompter, PromptAnswer, ToolCallInfo};
use crate::permissions::{Engine, PermissionMode};

const DESCRIPTION: &str = "Use when you are in plan mode and have finished planning: presents \
your plan to the user for approval. `plan` is the plan in Markdown, concise and complete. \
Once the user approves, plan mode ends and you may edit files and run commands. Only use it \
for tasks that need code changes, not for research.";

/// The tool, with what it needs to end plan mode.
#[derive(Clone, Default)]
pub struct ExitPlanModeTool {
    engine: Option<Arc<Engine>>,
    prompter: Option<Arc<dyn PermissionPrompter>>,
}

impl ExitPlanModeTool {
    pub fn new(engine: Option<Arc<Engine>>, prompter: Option<Arc<dyn PermissionPrompter>>) -> Self {
        Self { engine, prompter }
    }
}

#[tonic::async_trait]
impl Tool for ExitPlanModeTool {
    fn name(&self) -> &'static str {
        "ExitPlanMode"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "plan": {"type": "string", "minLength": 1,
                    "description": "The plan to present for approval (Markdown)"}
            },
            "required": ["plan"],
            "additionalProperties": false
        })
    }

    /// It changes no file and runs nothing (it is what plan mode allows).
    fn is_read_only(&self) -> bool {
        true
    }

    fn uses_sandbox(&self) -> bool {
        false
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> ToolOutput {
        let plan = str_field(&input, "plan");
        let Some(prompter) = &self.prompter else {
            return ToolOutput::error(format!(
                "The plan needs the user's approval, and nobody can approve it in this run; \
                 plan mode continues (no edits, read-only commands only). The plan:\n\n{plan}"
            ));
        };
        let call = ToolCallInfo {
            tool_use_id: String::new(),
            name: "ExitPlanMode".into(),
            input: input.clone(),
            read_only: true,
            kind: super::ToolKind::Other,
        };
        match prompter
            .ask(&call, "the plan needs approval to leave plan mode")
            .await
        {
            PromptAnswer::Allow { .. } => {
                if let Some(engine) = &self.engine {
                    engine.set_mode(PermissionMode::Default);
                }
                ToolOutput::ok(
                    "The user approved the plan. Plan mode has ended: you may now edit files and run commands.",
                )
            }
            PromptAnswer::Deny { message, .. } => ToolOutput::error(format!(
                "The user did not approve the plan; plan mode continues. {message}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_and_flags() {
        let t = ExitPlanModeTool::default();
        assert_eq!(t.name(), "ExitPlanMode");
        assert!(t.is_read_only());
        assert!(super::super::schema::validate(&t.input_schema(), &json!({"plan": "x"})).is_ok());
        assert!(super::super::schema::validate(&t.input_schema(), &json!({})).is_err());
    }
}
