//! TodoWrite: the model's task list for the session (Claude Code's name and fields). Each
//! call replaces the whole list; the list lives in session state ([`TodoList`]), where the
//! interactive view and clients read it, and the call itself appears in stream-json output
//! as the tool_use block it is. Nothing touches the sandbox.

use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput};

const DESCRIPTION: &str = "Keeps a structured task list for the current session: use it for \
work with several steps, to plan them and show progress. Each call replaces the whole list. \
Each item has `content` (what to do, imperative), `activeForm` (the same in the present \
continuous, shown while it runs) and `status`: pending, in_progress or completed. Keep \
exactly one item in_progress while working, and mark items completed as soon as they are \
done. Skip it for single, trivial tasks.";

/// One item of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    todos: Vec<Todo>,
}

/// The session's task list, shared with whoever shows it.
#[derive(Debug, Clone, Default)]
pub struct TodoList(Arc<Mutex<Vec<Todo>>>);

impl TodoList {
    pub fn get(&self) -> Vec<Todo> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, todos: Vec<Todo>) {
        // Replaced in one step: a poisoned lock still holds a whole list.
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = todos;
    }
}

/// The tool, writing to a session's list.
#[derive(Debug, Clone, Default)]
pub struct TodoWriteTool {
    list: TodoList,
}

impl TodoWriteTool {
    pub fn new(list: TodoList) -> Self {
        Self { list }
    }
}

#[tonic::async_trait]
impl Tool for TodoWriteTool {
    fn name(&self) -> &'static str {
        "TodoWrite"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {"type": "array", "description": "The whole updated list",
                    "items": {"type": "object", "properties": {
                        "content": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        "activeForm": {"type": "string", "minLength": 1}
                    }, "required": ["content", "status", "activeForm"], "additionalProperties": false}}
            },
            "required": ["todos"],
            "additionalProperties": false
        })
    }

    /// It only changes session state, never a file or a process.
    fn is_read_only(&self) -> bool {
        true
    }

    fn uses_sandbox(&self) -> bool {
        false
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> ToolOutput {
        // The typed decode checks the items (the schema validator checks the top level).
        let input: Input = match serde_json::from_value(input) {
            Ok(i) => i,
            Err(e) => return ToolOutput::error(format!("TodoWrite: invalid `todos`: {e}")),
        };
        let active = input
            .todos
            .iter()
            .filter(|t| t.status == TodoStatus::InProgress)
            .count();
        self.list.set(input.todos);
        let mut text = "The task list was updated; keep it current as you work.".to_string();
        if active > 1 {
            text.push_str(&format!(
                " Note: {active} items are in_progress; keep exactly one in progress."
            ));
        }
        ToolOutput::ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_decode_strictly() {
        let ok: Input = serde_json::from_value(json!({"todos": [
            {"content": "Run tests", "status": "in_progress", "activeForm": "Running tests"}
        ]}))
        .unwrap();
        assert_eq!(ok.todos[0].status, TodoStatus::InProgress);
        let bad = serde_json::from_value::<Input>(
            json!({"todos": [{"content": "x", "status": "doing", "activeForm": "y"}]}),
        );
        assert!(bad.is_err());
        let extra = serde_json::from_value::<Input>(
            json!({"todos": [{"content": "x", "status": "pending", "activeForm": "y", "id": 1}]}),
        );
        assert!(extra.is_err());
    }
}
