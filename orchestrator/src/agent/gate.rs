//! The seams where policy plugs into the loop.
//!
//! - [`ToolGate`]: consulted before every tool call (may allow with a rewritten input, or
//!   deny with a message for the model) and after it (may change what the model sees).
//!   Permission rules, PreToolUse/PostToolUse hooks and a client's can_use_tool callback
//!   compose into one gate.
//! - [`LoopObserver`]: told about the run's moments (a prompt is submitted, a turn starts,
//!   the model wants to stop, the conversation is about to be compacted) and may steer
//!   them: block a prompt, add context, keep the model going, snapshot the workspace.
//!
//! The defaults ([`RulesGate`], [`NoObserver`]) are the plain permission rules and no
//! hooks.

use std::sync::Arc;

use serde_json::Value;

use crate::permissions::{Decision, Engine, ToolKind, Verdict};
use crate::tools::ToolOutput;

/// One tool call, as a gate sees it.
#[derive(Debug, Clone)]
pub struct ToolCallInfo {
    pub tool_use_id: String,
    pub name: String,
    pub input: Value,
    /// The tool only reads (it never changes files or runs commands).
    pub read_only: bool,
    /// What the tool does, as far as the permission rules care.
    pub kind: ToolKind,
}

/// What a gate decided about a call.
#[derive(Debug, Clone, PartialEq)]
pub enum GateVerdict {
    /// Run the tool with `input` (the original or a rewritten one).
    Allow { input: Value, reason: String },
    /// Do not run it; `message` goes to the model as an is_error result.
    Deny { message: String, reason: String },
}

#[tonic::async_trait]
pub trait ToolGate: Send + Sync {
    /// Before the call runs.
    async fn before(&self, call: &ToolCallInfo) -> GateVerdict;
    /// After it ran: may replace or extend what the model sees.
    async fn after(&self, _call: &ToolCallInfo, output: ToolOutput) -> ToolOutput {
        output
    }
    /// Whether a tool is offered to the model at all.
    fn offers(&self, _tool: &str) -> bool {
        true
    }
    /// The same gate judging calls in `mode` (a sub-agent's own `permissionMode`), or why
    /// it cannot. A wrapping gate wraps the inner gate's.
    fn in_mode(
        &self,
        _mode: crate::permissions::PermissionMode,
    ) -> Result<Arc<dyn ToolGate>, String> {
        Err("this session's permission gate cannot judge a sub-agent in a mode of its own".into())
    }
}

/// The plain permission rules as a gate, for a run nobody can answer questions in: an
/// "ask" is a denial that says which rule asked and how to allow the call.
#[derive(Debug, Clone)]
pub struct RulesGate(pub Arc<Engine>);

#[tonic::async_trait]
impl ToolGate for RulesGate {
    fn in_mode(
        &self,
        mode: crate::permissions::PermissionMode,
    ) -> Result<Arc<dyn ToolGate>, String> {
        let engine = self.0.with_mode(mode).map_err(|e| e.to_string())?;
        Ok(Arc::new(RulesGate(Arc::new(engine))))
    }

    async fn before(&self, call: &ToolCallInfo) -> GateVerdict {
        let verdict = self
            .0
            .decide_as(&call.name, call.kind, &call.input, call.read_only);
        match verdict.decision {
            Decision::Allow => GateVerdict::Allow {
                input: call.input.clone(),
                reason: verdict.reason,
            },
            Decision::Deny => GateVerdict::Deny {
                message: format!("Permission denied: {}", verdict.reason),
                reason: verdict.reason,
            },
            Decision::Ask => GateVerdict::Deny {
                message: needs_approval_message(&call.name, &call.input, &verdict),
                reason: verdict.reason,
            },
        }
    }

    fn offers(&self, tool: &str) -> bool {
        self.0.offers(tool)
    }
}

/// The denial text for an "ask" nobody can answer: why it asked (the rule and its file, or
/// the mode) and how the user can allow the call.
pub fn needs_approval_message(tool: &str, input: &Value, verdict: &Verdict) -> String {
    let asked_by = match &verdict.rule {
        Some(origin) => format!(" (rule {origin})"),
        None => String::new(),
    };
    let narrower = match tool {
        "Bash" => {
            let first = input
                .get("command")
                .and_then(Value::as_str)
                .and_then(|c| c.split_whitespace().next())
                .filter(|w| {
                    w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                })
                .unwrap_or("npm");
            format!("\"Bash({first} *)\"")
        }
        "Edit" | "Write" => "\"Edit(src/**)\"".to_string(),
        other => other.to_string(),
    };
    format!(
        "Permission to use {tool} needs approval and nobody can approve it in this run: {reason}{asked_by}. \
         The user can allow it with --allowedTools {tool} (or a narrower rule such as {narrower}), \
         in permissions.allow of .claude/settings.json, or with another --permission-mode \
         (acceptEdits for file edits, bypassPermissions for everything).",
        reason = verdict.reason,
    )
}

/// What to do with a submitted prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptVerdict {
    /// Go on; `context` (if any) is added to the prompt for the model.
    Continue { context: Option<String> },
    /// Do not send it; the run ends with this reason.
    Block { reason: String },
}

/// What to do when the model ends its turn.
#[derive(Debug, Clone, PartialEq)]
pub enum StopVerdict {
    /// Let the run end.
    Stop,
    /// Keep going: `reason` is sent to the model as the next user message.
    Continue { reason: String },
}

#[tonic::async_trait]
pub trait LoopObserver: Send + Sync {
    /// A user prompt is about to be sent.
    async fn user_prompt(&self, _prompt: &str) -> PromptVerdict {
        PromptVerdict::Continue { context: None }
    }
    /// The prompt was written to the transcript as the user message `user_message_uuid`
    /// (checkpoints are recorded against it, so a rewind can name the message).
    async fn prompt_recorded(&self, _user_message_uuid: &str) {}
    /// A model turn was written to the transcript as the record `uuid` (before it is
    /// reported: a client sees that uuid, and may resume a fork at it).
    async fn assistant_recorded(&self, _uuid: &str) {}
    /// A model turn is about to start (`turn` counts from 1 within the run); tools of the
    /// previous turn have finished. Checkpoints are taken here.
    async fn turn_start(&self, _turn: u32) {}
    /// The model ended its turn with `text`.
    async fn stop(&self, _text: &str) -> StopVerdict {
        StopVerdict::Stop
    }
    /// The conversation is about to be compacted (`manual` when asked for).
    async fn pre_compact(&self, _manual: bool) {}
}

/// No hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl LoopObserver for NoObserver {}

/// The answer to a permission question.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptAnswer {
    /// Run the call, with this input (the original or one the user edited).
    Allow { input: Value },
    /// Do not run it; `message` goes to the model. `interrupt` also stops the run.
    Deny { message: String, interrupt: bool },
}

/// Whoever can answer "may this call run?" when the rules say to ask: a client over the
/// stream-json control protocol (the Agent SDK's can_use_tool), a terminal UI. A headless
/// run has none, and an unanswerable question is a denial that says how to allow the call.
#[tonic::async_trait]
pub trait PermissionPrompter: Send + Sync {
    /// `reason` says why the rules asked (which rule, or the mode).
    async fn ask(&self, call: &ToolCallInfo, reason: &str) -> PromptAnswer;
}

/// Several observers as one, called in order: a prompt blocked by one is blocked; added
/// contexts are joined; the model keeps going when any observer says so (their reasons
/// joined).
#[derive(Clone, Default)]
pub struct Observers(pub Vec<Arc<dyn LoopObserver>>);

#[tonic::async_trait]
impl LoopObserver for Observers {
    async fn user_prompt(&self, prompt: &str) -> PromptVerdict {
        let mut contexts = Vec::new();
        for o in &self.0 {
            match o.user_prompt(prompt).await {
                PromptVerdict::Block { reason } => return PromptVerdict::Block { reason },
                PromptVerdict::Continue { context } => contexts.extend(context),
            }
        }
        PromptVerdict::Continue {
            context: (!contexts.is_empty()).then(|| contexts.join("\n\n")),
        }
    }

    async fn prompt_recorded(&self, user_message_uuid: &str) {
        for o in &self.0 {
            o.prompt_recorded(user_message_uuid).await;
        }
    }

    async fn assistant_recorded(&self, uuid: &str) {
        for o in &self.0 {
            o.assistant_recorded(uuid).await;
        }
    }

    async fn turn_start(&self, turn: u32) {
        for o in &self.0 {
            o.turn_start(turn).await;
        }
    }

    async fn stop(&self, text: &str) -> StopVerdict {
        let mut reasons = Vec::new();
        for o in &self.0 {
            if let StopVerdict::Continue { reason } = o.stop(text).await {
                reasons.push(reason);
            }
        }
        if reasons.is_empty() {
            StopVerdict::Stop
        } else {
            StopVerdict::Continue {
                reason: reasons.join("\n\n"),
            }
        }
    }

    async fn pre_compact(&self, manual: bool) {
        for o in &self.0 {
            o.pre_compact(manual).await;
        }
    }
}
