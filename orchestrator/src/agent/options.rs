//! What the caller of a session changes about how the loop asks the model, beyond
//! Cordon's defaults: the Agent SDK's flags (`--system-prompt`, `--append-system-prompt`,
//! `--thinking`, `--effort`, `--max-budget-usd`, `--json-schema`). The operator chose
//! them (they come from the program driving Cordon, not from the repository), so they
//! are taken as given; only their shape is checked, where they are parsed.

use serde_json::Value;

use crate::model::ThinkingConfig;

/// The loop's choices; the default is Cordon's own behaviour.
#[derive(Debug, Clone, Default)]
pub struct LoopOptions {
    /// Replaces Cordon's system prompt and its environment block (the memory files
    /// still follow, as the setting sources allow).
    pub system_prompt: Option<String>,
    /// Added after the system prompt (Cordon's or the replacement).
    pub append_system_prompt: Option<String>,
    pub thinking: Option<ThinkingConfig>,
    /// `output_config.effort`.
    pub effort: Option<String>,
    /// `output_config.task_budget`, in tokens.
    pub task_budget: Option<u64>,
    /// The session's spending limit: no model call starts once the priced usage reached
    /// it (the run ends `error_max_budget_usd`).
    pub max_budget_usd: Option<f64>,
    /// The final answer must be a value of this JSON Schema (an object schema), given
    /// through the StructuredOutput tool and returned as the result's
    /// `structured_output`.
    pub json_schema: Option<Value>,
    /// What the session spent so far; clones share it, so a sub-agent's calls count
    /// toward its parent's budget.
    pub spend: super::budget::SharedSpend,
}

/// The API's `output_config.effort` levels (`--effort`, a sub-agent's `effort`).
pub const EFFORT_LEVELS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// Output tokens a call may spend beyond the thinking budget (the API requires
/// `max_tokens` above `budget_tokens`).
const ANSWER_TOKENS: u32 = 8_000;

impl LoopOptions {
    /// The request's `output_config` (none when nothing in it is set).
    pub fn output_config(&self) -> Option<crate::model::OutputConfig> {
        (self.effort.is_some() || self.task_budget.is_some()).then(|| crate::model::OutputConfig {
            effort: self.effort.clone(),
            task_budget: self
                .task_budget
                .map(|total| crate::model::TaskBudget::Tokens { total }),
        })
    }

    /// `max_tokens` for a call that would otherwise ask for `default`: raised above a
    /// thinking budget that reaches it.
    pub fn max_tokens(&self, default: u32) -> u32 {
        match self.thinking {
            Some(ThinkingConfig::Enabled { budget_tokens, .. }) if budget_tokens >= default => {
                budget_tokens.saturating_add(ANSWER_TOKENS)
            }
            _ => default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thinking_budget_keeps_room_for_the_answer() {
        let mut options = LoopOptions::default();
        assert_eq!(options.max_tokens(16_000), 16_000);
        options.thinking = Some(ThinkingConfig::Enabled {
            budget_tokens: 4_000,
            display: None,
        });
        assert_eq!(options.max_tokens(16_000), 16_000);
        options.thinking = Some(ThinkingConfig::Enabled {
            budget_tokens: 32_000,
            display: None,
        });
        assert_eq!(options.max_tokens(16_000), 40_000);
        options.thinking = Some(ThinkingConfig::Adaptive { display: None });
        assert_eq!(options.max_tokens(16_000), 16_000);
    }
}
