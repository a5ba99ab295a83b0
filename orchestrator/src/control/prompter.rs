//! [`SdkPrompter`]: the ask path answered by the client's `can_use_tool` callback.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::channel::{ControlError, Controller};
use crate::agent::gate::{PermissionPrompter, PromptAnswer, ToolCallInfo};

/// Asks the client (the Agent SDK's `can_use_tool`) whether a call may run.
pub struct SdkPrompter {
    controller: Arc<Controller>,
    /// The session's interrupt signal: an interrupt while the question is open denies the
    /// call (and stops the run) instead of waiting for an answer that no longer matters.
    interrupts: Option<watch::Receiver<u64>>,
}

impl SdkPrompter {
    pub fn new(controller: Arc<Controller>) -> Self {
        Self {
            controller,
            interrupts: None,
        }
    }

    pub fn with_interrupts(mut self, interrupts: watch::Receiver<u64>) -> Self {
        self.interrupts = Some(interrupts);
        self
    }
}

/// The can_use_tool request for `call`.
pub fn can_use_tool_request(call: &ToolCallInfo, reason: &str) -> Value {
    json!({
        "subtype": "can_use_tool",
        "tool_name": call.name,
        "input": call.input,
        "permission_suggestions": [],
        "tool_use_id": call.tool_use_id,
        "decision_reason": reason,
    })
}

/// Reads the client's answer. Anything but a clear allow is a denial: an unanswerable or
/// garbled question must never run the call.
pub fn answer_from(result: Result<Value, ControlError>, call: &ToolCallInfo) -> PromptAnswer {
    let value = match result {
        Ok(v) => v,
        Err(e) => {
            return PromptAnswer::Deny {
                message: format!("Permission to use {} was not granted: {e}", call.name),
                interrupt: false,
            };
        }
    };
    match value.get("behavior").and_then(Value::as_str) {
        Some("allow") => {
            // The client may edit the input (the user changed the command, say). Only an
            // object is a tool input; anything else keeps the original.
            let input = match value.get("updatedInput") {
                Some(v @ Value::Object(_)) => v.clone(),
                _ => call.input.clone(),
            };
            PromptAnswer::Allow { input }
        }
        Some("deny") => PromptAnswer::Deny {
            message: value
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| format!("The user denied permission to use {}", call.name)),
            interrupt: value
                .get("interrupt")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        },
        _ => PromptAnswer::Deny {
            message: format!(
                "Permission to use {} was not granted: the client's answer was not understood",
                call.name
            ),
            interrupt: false,
        },
    }
}

#[tonic::async_trait]
impl PermissionPrompter for SdkPrompter {
    async fn ask(&self, call: &ToolCallInfo, reason: &str) -> PromptAnswer {
        let request = self.controller.request(can_use_tool_request(call, reason));
        let Some(mut interrupts) = self.interrupts.clone() else {
            return answer_from(request.await, call);
        };
        interrupts.borrow_and_update();
        tokio::select! {
            result = request => answer_from(result, call),
            _ = interrupts.changed() => PromptAnswer::Deny {
                message: "interrupted by the user while asking for permission".into(),
                interrupt: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> ToolCallInfo {
        ToolCallInfo {
            tool_use_id: "t1".into(),
            name: "Write".into(),
            input: json!({"file_path": "/w/a", "content": "x"}),
            read_only: false,
            kind: crate::permissions::ToolKind::Edit,
        }
    }

    #[test]
    fn allow_with_and_without_updated_input() {
        let updated = json!({"file_path": "/w/a", "content": "y"});
        assert_eq!(
            answer_from(
                Ok(json!({"behavior": "allow", "updatedInput": updated})),
                &call()
            ),
            PromptAnswer::Allow { input: updated }
        );
        assert_eq!(
            answer_from(
                Ok(json!({"behavior": "allow", "updatedInput": "junk"})),
                &call()
            ),
            PromptAnswer::Allow {
                input: call().input
            }
        );
    }

    #[test]
    fn deny_errors_and_garbage_all_deny() {
        assert_eq!(
            answer_from(
                Ok(json!({"behavior": "deny", "message": "no", "interrupt": true})),
                &call()
            ),
            PromptAnswer::Deny {
                message: "no".into(),
                interrupt: true
            }
        );
        for result in [
            Ok(json!({"behavior": "maybe"})),
            Ok(json!({})),
            Err(ControlError::Closed),
            Err(ControlError::Client("callback raised".into())),
        ] {
            assert!(matches!(
                answer_from(result, &call()),
                PromptAnswer::Deny {
                    interrupt: false,
                    ..
                }
            ));
        }
    }

    #[tokio::test]
    async fn asks_over_the_control_channel() {
        let (controller, mut rx) = Controller::new();
        let prompter = SdkPrompter::new(controller.clone());
        let asking = tokio::spawn(async move { prompter.ask(&call(), "mode default asks").await });
        let sent = rx.recv().await.unwrap();
        assert_eq!(sent["request"]["subtype"], "can_use_tool");
        assert_eq!(sent["request"]["tool_name"], "Write");
        assert_eq!(sent["request"]["input"]["content"], "x");
        assert_eq!(sent["request"]["tool_use_id"], "t1");
        let id = sent["request_id"].as_str().unwrap();
        controller.resolve(id, Ok(json!({"behavior": "deny", "message": "nope"})));
        assert_eq!(
            asking.await.unwrap(),
            PromptAnswer::Deny {
                message: "nope".into(),
                interrupt: false
            }
        );
    }

    #[tokio::test]
    async fn an_interrupt_ends_an_open_question() {
        let (controller, _rx) = Controller::new();
        let (tx, rx) = watch::channel(0u64);
        let prompter = SdkPrompter::new(controller).with_interrupts(rx);
        let asking = tokio::spawn(async move { prompter.ask(&call(), "").await });
        tokio::task::yield_now().await;
        // Keep interrupting until the asker is waiting (no timing assumptions).
        let answer = loop {
            tx.send_modify(|g| *g += 1);
            tokio::task::yield_now().await;
            if asking.is_finished() {
                break asking.await.unwrap();
            }
        };
        assert!(matches!(
            answer,
            PromptAnswer::Deny {
                interrupt: true,
                ..
            }
        ));
    }
}
