//! [`TerminalPrompter`]: the ask path answered at the terminal. The gate calls it (inside
//! the running turn); it hands the question to the session loop, which owns the screen
//! and the keys, and waits for the answer. Calls a rule added with "allow always" covers
//! run without asking again.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::always::SessionRules;
use crate::agent::gate::{PermissionPrompter, PromptAnswer, ToolCallInfo};
use crate::permissions::Engine;

/// One open question, for the session loop to show and answer.
#[derive(Debug)]
pub struct Question {
    pub call: ToolCallInfo,
    /// Why the rules asked.
    pub why: String,
    pub reply: oneshot::Sender<PromptAnswer>,
}

/// Asks the user at the terminal.
pub struct TerminalPrompter {
    questions: mpsc::UnboundedSender<Question>,
    engine: Arc<Engine>,
    rules: Arc<SessionRules>,
    /// The settings file "allow always" writes to (the rules' source).
    local_settings: PathBuf,
    /// An interrupt while a question is open denies the call and stops the run.
    interrupts: watch::Receiver<u64>,
}

impl TerminalPrompter {
    pub fn new(
        questions: mpsc::UnboundedSender<Question>,
        engine: Arc<Engine>,
        rules: Arc<SessionRules>,
        local_settings: PathBuf,
        interrupts: watch::Receiver<u64>,
    ) -> Self {
        Self {
            questions,
            engine,
            rules,
            local_settings,
            interrupts,
        }
    }
}

fn interrupted() -> PromptAnswer {
    PromptAnswer::Deny {
        message: "interrupted by the user while asking for permission".into(),
        interrupt: true,
    }
}

#[tonic::async_trait]
impl PermissionPrompter for TerminalPrompter {
    async fn ask(&self, call: &ToolCallInfo, reason: &str) -> PromptAnswer {
        if self.rules.covers(&self.engine, call, &self.local_settings) {
            return PromptAnswer::Allow {
                input: call.input.clone(),
            };
        }
        // Interrupts from now on count (marked before the question can be seen).
        let mut interrupts = self.interrupts.clone();
        interrupts.borrow_and_update();
        let (reply, answer) = oneshot::channel();
        let question = Question {
            call: call.clone(),
            why: reason.to_string(),
            reply,
        };
        if self.questions.send(question).is_err() {
            // Nobody is at the terminal any more: never run an unanswered call.
            return PromptAnswer::Deny {
                message: format!(
                    "Permission to use {} was not granted: the session is closing",
                    call.name
                ),
                interrupt: true,
            };
        }
        tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| interrupted()),
            _ = interrupts.changed() => interrupted(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::{EngineConfig, PermissionMode};
    use serde_json::json;

    fn setup() -> (
        TerminalPrompter,
        mpsc::UnboundedReceiver<Question>,
        Arc<SessionRules>,
        watch::Sender<u64>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let engine = Arc::new(Engine::new(EngineConfig::new(
            PermissionMode::Default,
            "/w",
        )));
        let rules = SessionRules::new();
        let (itx, irx) = watch::channel(0);
        let p = TerminalPrompter::new(
            tx,
            engine,
            rules.clone(),
            "/w/.claude/settings.local.json".into(),
            irx,
        );
        (p, rx, rules, itx)
    }

    fn call() -> ToolCallInfo {
        ToolCallInfo {
            tool_use_id: "t".into(),
            name: "Bash".into(),
            input: json!({"command": "make"}),
            read_only: false,
            kind: crate::permissions::ToolKind::Exec,
        }
    }

    #[tokio::test]
    async fn the_question_goes_to_the_session_and_its_answer_back() {
        let (p, mut rx, rules, _itx) = setup();
        let asking = tokio::spawn(async move { p.ask(&call(), "mode default asks").await });
        let q = rx.recv().await.unwrap();
        assert_eq!(q.call.name, "Bash");
        assert_eq!(q.why, "mode default asks");
        q.reply
            .send(PromptAnswer::Deny {
                message: "no".into(),
                interrupt: false,
            })
            .unwrap();
        assert!(matches!(
            asking.await.unwrap(),
            PromptAnswer::Deny {
                interrupt: false,
                ..
            }
        ));
        // A session rule covering the call: no question at all.
        rules.add("Bash(make)");
        let (p2, mut rx2, rules2, _i2) = setup();
        rules2.add("Bash(make)");
        assert!(matches!(
            p2.ask(&call(), "").await,
            PromptAnswer::Allow { .. }
        ));
        assert!(rx2.try_recv().is_err());
    }

    #[tokio::test]
    async fn an_interrupt_or_a_closed_session_denies() {
        let (p, mut rx, _rules, itx) = setup();
        let asking = tokio::spawn(async move { p.ask(&call(), "").await });
        let _open = rx.recv().await.unwrap();
        itx.send_modify(|g| *g += 1);
        assert!(matches!(
            asking.await.unwrap(),
            PromptAnswer::Deny {
                interrupt: true,
                ..
            }
        ));
        let (p, rx, _rules, _itx) = setup();
        drop(rx);
        assert!(matches!(
            p.ask(&call(), "").await,
            PromptAnswer::Deny { .. }
        ));
    }
}
