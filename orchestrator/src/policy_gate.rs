//! [`PolicyGate`]: the one [`ToolGate`] a session runs with, composing, for each call:
//!
//! 1. PreToolUse hooks matching the tool, in order. A hook's deny (exit 2,
//!    `permissionDecision: "deny"`, `decision: "block"`) ends it there: the model gets the
//!    hook's reason. A hook's `updatedInput` replaces the input for the hooks after it and
//!    for the rules.
//! 2. The permission rules ([`Engine`]). A deny rule always wins: a hook's allow never
//!    overrides it (the repository's hooks must not widen the policy).
//! 3. A hook's allow skips an ask; otherwise the rules' allow runs the call, and an ask
//!    (from the rules or from a hook) goes to the [`PermissionPrompter`] when a client can
//!    answer, else is denied with how to allow it, and fires the Notification hooks.
//! 4. After the call: PostToolUse hooks see `tool_response`; a block (exit 2 or
//!    `decision: "block"`) and `additionalContext` are appended to what the model sees
//!    (the tool already ran, as in Claude Code). `suppressOutput` only concerns a
//!    transcript display and is ignored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::Value;

use crate::agent::gate::{GateVerdict, PermissionPrompter, PromptAnswer, ToolCallInfo, ToolGate};
use crate::hooks::{HookEvent, Hooks, PermissionDecision, input};
use crate::tools::ToolOutput;

use crate::permissions::PermissionMode;
pub use crate::permissions::{Decision, Engine, RuleOrigin, Verdict};

/// Most characters of a tool's output a PostToolUse hook is given.
const MAX_RESPONSE_FOR_HOOKS: usize = 256 * 1024;

/// Permission rules, hooks and the ask path, as one gate.
pub struct PolicyGate {
    engine: Arc<Engine>,
    hooks: Arc<Hooks>,
    prompter: RwLock<Option<Arc<dyn PermissionPrompter>>>,
    /// Per tool_use_id: the input the call ran with and context a PreToolUse hook added,
    /// for the PostToolUse step.
    pending: Mutex<HashMap<String, (Value, Option<String>)>>,
}

impl std::fmt::Debug for PolicyGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyGate")
            .field("hooks", &self.hooks)
            .finish_non_exhaustive()
    }
}

/// What the PreToolUse hooks decided, together.
struct PreHooks {
    input: Value,
    allow: Option<String>,
    ask: Option<String>,
    context: Vec<String>,
}

impl PolicyGate {
    pub fn new(
        engine: Arc<Engine>,
        hooks: Arc<Hooks>,
        prompter: Option<Arc<dyn PermissionPrompter>>,
    ) -> PolicyGate {
        PolicyGate {
            engine,
            hooks,
            prompter: RwLock::new(prompter),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Sets who answers permission questions (a client connected after the start).
    pub fn set_prompter(&self, prompter: Option<Arc<dyn PermissionPrompter>>) {
        *self
            .prompter
            .write()
            .unwrap_or_else(PoisonError::into_inner) = prompter;
    }

    fn prompter(&self) -> Option<Arc<dyn PermissionPrompter>> {
        self.prompter
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Runs the PreToolUse hooks in order; `Err` is the denial.
    async fn pre_hooks(&self, call: &ToolCallInfo) -> Result<PreHooks, GateVerdict> {
        let mut pre = PreHooks {
            input: call.input.clone(),
            allow: None,
            ask: None,
            context: Vec::new(),
        };
        for entry in self.hooks.matching(HookEvent::PreToolUse, Some(&call.name)) {
            let fields = input::pre_tool_use(&call.name, &pre.input, &call.tool_use_id);
            let out = self
                .hooks
                .run(&entry, fields, Some(&call.tool_use_id))
                .await;
            let who = entry.describe();
            if let Some(stop) = out.stop {
                return Err(deny(format!("{who} stopped this call: {stop}"), who));
            }
            let denied = out.block.clone().or_else(|| {
                (out.permission == Some(PermissionDecision::Deny)).then(|| {
                    out.permission_reason
                        .clone()
                        .unwrap_or_else(|| "no reason given".into())
                })
            });
            if let Some(reason) = denied {
                return Err(deny(
                    format!("{who} denied this call: {reason}"),
                    format!("denied by {who}"),
                ));
            }
            if let Some(updated) = out.updated_input {
                pre.input = updated;
            }
            let reason = out.permission_reason.unwrap_or_default();
            match out.permission {
                Some(PermissionDecision::Allow) => {
                    pre.allow = Some(format!("allowed by {who} {reason}").trim_end().into());
                }
                Some(PermissionDecision::Ask) => {
                    pre.ask = Some(
                        format!("{who} asks for approval {reason}")
                            .trim_end()
                            .into(),
                    );
                }
                _ => {}
            }
            pre.context.extend(out.context);
        }
        Ok(pre)
    }

    /// The ask path: a client answers, or the call is denied with how to allow it.
    async fn ask(&self, call: &ToolCallInfo, input: Value, why: String) -> GateVerdict {
        if let Some(prompter) = self.prompter() {
            let asked = ToolCallInfo {
                input: input.clone(),
                ..call.clone()
            };
            return match prompter.ask(&asked, &why).await {
                PromptAnswer::Allow { input } => GateVerdict::Allow {
                    input,
                    reason: format!("approved by the user ({why})"),
                },
                PromptAnswer::Deny { message, .. } => GateVerdict::Deny {
                    message,
                    reason: format!("refused by the user ({why})"),
                },
            };
        }
        let message = format!("Cordon needs your permission to use {}", call.name);
        self.hooks
            .fire(
                HookEvent::Notification,
                None,
                input::notification(&message, "permission_prompt"),
            )
            .await;
        deny(
            format!(
                "Permission to use {tool} needs approval ({why}), and no one can approve it in \
                 this headless run. The user can allow it with --allowedTools {tool} (or a \
                 narrower rule such as {example}) or a permissions.allow rule in \
                 .claude/settings.json (which counts once the workspace is trusted: `cordon \
                 trust`), or choose another --permission-mode.",
                tool = call.name,
                example = if call.name == "Bash" {
                    "\"Bash(npm test *)\""
                } else {
                    "\"Edit(src/**)\""
                },
            ),
            format!("ask without a prompter: {why}"),
        )
    }
}

fn deny(message: String, reason: String) -> GateVerdict {
    GateVerdict::Deny { message, reason }
}

/// "deny rule Bash(rm *) from /w/.claude/settings.json: ...".
fn explain(verdict: &Verdict) -> String {
    match &verdict.rule {
        Some(origin) => format!(
            "{} (rule {} from {})",
            verdict.reason, origin.rule, origin.source
        ),
        None => verdict.reason.clone(),
    }
}

#[tonic::async_trait]
impl ToolGate for PolicyGate {
    async fn before(&self, call: &ToolCallInfo) -> GateVerdict {
        let pre = match self.pre_hooks(call).await {
            Ok(pre) => pre,
            Err(denied) => return denied,
        };
        let verdict = self
            .engine
            .decide_as(&call.name, call.kind, &pre.input, call.read_only);
        // Why this order: a deny rule is the operator's and the user's hard line; no hook
        // (the repository's included) can allow past it.
        let outcome = match verdict.decision {
            Decision::Deny => {
                let why = explain(&verdict);
                deny(format!("Permission denied: {why}"), why)
            }
            _ if pre.ask.is_some() => {
                let why = pre.ask.clone().unwrap_or_default();
                self.ask(call, pre.input.clone(), why).await
            }
            _ if pre.allow.is_some() => GateVerdict::Allow {
                input: pre.input.clone(),
                reason: pre.allow.clone().unwrap_or_default(),
            },
            Decision::Allow => GateVerdict::Allow {
                input: pre.input.clone(),
                reason: explain(&verdict),
            },
            Decision::Ask => self.ask(call, pre.input.clone(), explain(&verdict)).await,
        };
        if let GateVerdict::Allow { input, .. } = &outcome {
            let context = (!pre.context.is_empty()).then(|| pre.context.join("\n"));
            self.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(call.tool_use_id.clone(), (input.clone(), context));
        }
        outcome
    }

    async fn after(&self, call: &ToolCallInfo, mut output: ToolOutput) -> ToolOutput {
        let (ran_with, pre_context) = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&call.tool_use_id)
            .unwrap_or_else(|| (call.input.clone(), None));
        let mut notes: Vec<String> = pre_context.into_iter().collect();
        let entries = self
            .hooks
            .matching(HookEvent::PostToolUse, Some(&call.name));
        if !entries.is_empty() {
            let shown = truncate(&output.content, MAX_RESPONSE_FOR_HOOKS);
            let response = input::tool_response(&call.name, shown, output.is_error);
            for entry in entries {
                let fields = input::post_tool_use(
                    &call.name,
                    &ran_with,
                    &call.tool_use_id,
                    response.clone(),
                );
                let out = self
                    .hooks
                    .run(&entry, fields, Some(&call.tool_use_id))
                    .await;
                if let Some(reason) = out.block {
                    notes.push(format!("{} reported: {reason}", entry.describe()));
                }
                if let Some(stop) = out.stop {
                    notes.push(format!("{} asked to stop: {stop}", entry.describe()));
                }
                notes.extend(out.context);
            }
        }
        if !notes.is_empty() {
            output.content = format!("{}\n\n{}", output.content, notes.join("\n"));
        }
        output
    }

    /// Why this is sound: the sub-agent's gate has the same rules, hooks and prompter; only
    /// the mode differs, and the client that defined the sub-agent could set the session's
    /// own mode as well. A mode the operator disabled (bypassPermissions under
    /// `disableBypassPermissionsMode`) is refused as for the session. The session's
    /// bypassPermissions wins over the sub-agent's mode, as in Claude Code.
    fn in_mode(&self, mode: PermissionMode) -> Result<Arc<dyn ToolGate>, String> {
        let mode = if self.engine.mode() == PermissionMode::BypassPermissions {
            PermissionMode::BypassPermissions
        } else {
            mode
        };
        let engine = self.engine.with_mode(mode).map_err(|e| e.to_string())?;
        Ok(Arc::new(PolicyGate::new(
            Arc::new(engine),
            self.hooks.clone(),
            self.prompter(),
        )))
    }

    fn offers(&self, tool: &str) -> bool {
        self.engine.offers(tool)
    }
}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests;
