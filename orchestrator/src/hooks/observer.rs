//! [`HookObserver`]: the loop's moments as hook events — UserPromptSubmit, Stop,
//! PreCompact — plus SessionStart and SessionEnd, which `cordon run` calls around the run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::agent::gate::{LoopObserver, PromptVerdict, StopVerdict};

use super::{HookEvent, Hooks, input};

/// Hooks as a [`LoopObserver`].
#[derive(Debug)]
pub struct HookObserver {
    hooks: Arc<Hooks>,
    /// A Stop hook kept the model going, and the model has not been given a new prompt.
    stop_hook_active: AtomicBool,
    /// What SessionStart hooks added, for the first prompt.
    session_context: Mutex<Option<String>>,
}

impl HookObserver {
    pub fn new(hooks: Arc<Hooks>) -> HookObserver {
        HookObserver {
            hooks,
            stop_hook_active: AtomicBool::new(false),
            session_context: Mutex::new(None),
        }
    }

    /// SessionStart (`source`: startup | resume). What the hooks print (or return as
    /// `additionalContext`) goes with the first prompt to the model.
    pub async fn session_start(&self, source: &str) {
        let results = self
            .hooks
            .fire(
                HookEvent::SessionStart,
                Some(source),
                input::session_start(source),
            )
            .await;
        let context: Vec<String> = results.into_iter().filter_map(|(_, o)| o.context).collect();
        if !context.is_empty() {
            *self
                .session_context
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(context.join("\n"));
        }
    }

    /// SessionEnd, before the sandbox goes (`reason`: clear | logout | prompt_input_exit |
    /// other). Its output cannot change anything.
    pub async fn session_end(&self, reason: &str) {
        self.hooks
            .fire(HookEvent::SessionEnd, None, input::session_end(reason))
            .await;
    }
}

#[tonic::async_trait]
impl LoopObserver for HookObserver {
    async fn user_prompt(&self, prompt: &str) -> PromptVerdict {
        self.stop_hook_active.store(false, Ordering::SeqCst);
        let mut context: Vec<String> = self
            .session_context
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .into_iter()
            .collect();
        let results = self
            .hooks
            .fire(
                HookEvent::UserPromptSubmit,
                None,
                input::user_prompt_submit(prompt),
            )
            .await;
        for (entry, out) in results {
            if let Some(reason) = out.block.or(out.stop) {
                return PromptVerdict::Block {
                    reason: format!("{}: {reason}", entry.describe()),
                };
            }
            context.extend(out.context);
        }
        PromptVerdict::Continue {
            context: (!context.is_empty()).then(|| context.join("\n")),
        }
    }

    async fn stop(&self, _text: &str) -> StopVerdict {
        let active = self.stop_hook_active.load(Ordering::SeqCst);
        let results = self
            .hooks
            .fire(HookEvent::Stop, None, input::stop(active))
            .await;
        let mut reasons = Vec::new();
        for (_, out) in results {
            // `continue: false` overrides everything: the run ends.
            if out.stop.is_some() {
                self.stop_hook_active.store(false, Ordering::SeqCst);
                return StopVerdict::Stop;
            }
            reasons.extend(out.block);
        }
        if reasons.is_empty() {
            self.stop_hook_active.store(false, Ordering::SeqCst);
            return StopVerdict::Stop;
        }
        self.stop_hook_active.store(true, Ordering::SeqCst);
        StopVerdict::Continue {
            reason: reasons.join("\n"),
        }
    }

    async fn pre_compact(&self, manual: bool) {
        let trigger = if manual { "manual" } else { "auto" };
        self.hooks
            .fire(
                HookEvent::PreCompact,
                Some(trigger),
                input::pre_compact(trigger, ""),
            )
            .await;
    }
}
