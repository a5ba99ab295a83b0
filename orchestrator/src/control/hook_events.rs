//! `--include-hook-events`: each command hook's start and end as the `system` records
//! Claude Code emits (`hook_started`, `hook_response` with the output, exit code and
//! outcome), sent to the client as they happen.

use serde_json::{Value, json};

use super::Controller;
use crate::hooks::output::{HookRun, RunStatus};
use crate::hooks::{HookEntry, HookEvents};

/// Sends the records through the session's connection.
pub struct SdkHookEvents {
    controller: std::sync::Arc<Controller>,
    session_id: String,
}

impl SdkHookEvents {
    pub fn new(controller: std::sync::Arc<Controller>, session_id: impl Into<String>) -> Self {
        Self {
            controller,
            session_id: session_id.into(),
        }
    }

    fn record(&self, subtype: &str, hook_id: &str, entry: &HookEntry) -> Value {
        let event = entry.event.as_str();
        let name = match entry.matcher.as_str() {
            "" | "*" => event.to_string(),
            matcher => format!("{event}:{matcher}"),
        };
        json!({
            "type": "system",
            "subtype": subtype,
            "hook_id": hook_id,
            "hook_name": name,
            "hook_event": event,
            "uuid": uuid::Uuid::new_v4().to_string(),
            "session_id": self.session_id,
        })
    }
}

impl HookEvents for SdkHookEvents {
    fn started(&self, hook_id: &str, entry: &HookEntry) {
        self.controller
            .send(self.record("hook_started", hook_id, entry));
    }

    fn responded(&self, hook_id: &str, entry: &HookEntry, run: &HookRun) {
        let mut record = self.record("hook_response", hook_id, entry);
        let (exit_code, outcome) = match &run.status {
            RunStatus::Exited(0) => (Some(0), "success"),
            RunStatus::Exited(code) => (Some(*code), "error"),
            RunStatus::TimedOut => (None, "cancelled"),
            RunStatus::Failed(_) => (None, "error"),
        };
        record["output"] = json!(format!("{}{}", run.stdout, run.stderr));
        record["stdout"] = json!(run.stdout);
        record["stderr"] = json!(run.stderr);
        record["exit_code"] = json!(exit_code);
        record["outcome"] = json!(outcome);
        self.controller.send(record);
    }
}
