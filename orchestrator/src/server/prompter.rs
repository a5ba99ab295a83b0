//! Permission questions over HTTP: an "ask" becomes a `permission_request` event with a
//! request id, and the tool call waits until a client answers with
//! `POST /v1/sessions/{id}/permissions/{request_id}` (or the session ends, which denies).
//! "Always" adds an allow rule for the rest of the session, as the terminal's answer does.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::agent::gate::{PermissionPrompter, PromptAnswer, ToolCallInfo};
use crate::interactive::always::{SessionRules, suggest};
use crate::permissions::Engine;

use super::events::EventLog;

/// A client's answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub decision: Decision,
    #[serde(default)]
    pub always: bool,
    pub message: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

struct Waiting {
    call: ToolCallInfo,
    reply: oneshot::Sender<PromptAnswer>,
}

/// The questions of one session that wait for an answer.
#[derive(Default)]
pub struct Pending {
    waiting: Mutex<HashMap<String, Waiting>>,
}

impl Pending {
    /// The tool a waiting question is about (for the answer's audit record).
    pub fn tool_of(&self, request_id: &str) -> Option<String> {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(request_id)
            .map(|w| w.call.name.clone())
    }

    /// Answers `request_id`; false when no such question waits.
    pub fn answer(
        &self,
        request_id: &str,
        answer: &Answer,
        rules: &SessionRules,
        engine: &Engine,
        workspace: &std::path::Path,
    ) -> bool {
        let Some(waiting) = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(request_id)
        else {
            return false;
        };
        let reply = match answer.decision {
            Decision::Allow => {
                if answer.always {
                    for rule in suggest(engine, &waiting.call, workspace, &rules_source())
                        .into_iter()
                        .take(1)
                    {
                        rules.add(&rule);
                    }
                }
                PromptAnswer::Allow {
                    input: waiting.call.input.clone(),
                }
            }
            Decision::Deny => PromptAnswer::Deny {
                message: answer
                    .message
                    .clone()
                    .unwrap_or_else(|| "The user denied this tool call.".into()),
                interrupt: false,
            },
        };
        waiting.reply.send(reply).is_ok()
    }

    /// Denies every waiting question (the session is ending).
    pub fn cancel_all(&self) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The ids of the questions waiting.
    pub fn ids(&self) -> Vec<String> {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }
}

/// Where rules added by "always" say they came from.
fn rules_source() -> PathBuf {
    PathBuf::from("(server: allowed always this session)")
}

/// The session's prompter.
pub struct HttpPrompter {
    pub pending: Arc<Pending>,
    pub events: Arc<EventLog>,
    pub rules: Arc<SessionRules>,
    pub engine: Arc<Engine>,
}

#[tonic::async_trait]
impl PermissionPrompter for HttpPrompter {
    async fn ask(&self, call: &ToolCallInfo, reason: &str) -> PromptAnswer {
        if self.rules.covers(&self.engine, call, &rules_source()) {
            return PromptAnswer::Allow {
                input: call.input.clone(),
            };
        }
        // Once round the runner's select first: the assistant message that asked for this
        // call is forwarded before the question (see `runner::forwarding`).
        tokio::task::yield_now().await;
        let request_id = uuid::Uuid::new_v4().to_string();
        let (reply, answer) = oneshot::channel();
        self.pending
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                request_id.clone(),
                Waiting {
                    call: call.clone(),
                    reply,
                },
            );
        self.events.emit(
            "permission_request",
            json!({
                "request_id": request_id,
                "tool_use_id": call.tool_use_id,
                "tool": call.name,
                "input": call.input,
                "reason": reason,
            }),
        );
        let answer = answer.await.unwrap_or(PromptAnswer::Deny {
            message: "The session ended before anyone answered the permission request.".into(),
            interrupt: true,
        });
        let decision: Value = match &answer {
            PromptAnswer::Allow { .. } => "allow".into(),
            PromptAnswer::Deny { .. } => "deny".into(),
        };
        self.events.emit(
            "permission_resolved",
            json!({"request_id": request_id, "decision": decision}),
        );
        answer
    }
}
