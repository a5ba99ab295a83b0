//! What occupies the context window, by category — the answer to "why is my context
//! full?". Sizes are estimates (characters / 4) except the total, which is the last model
//! call's real input count when there was one.

use serde::Serialize;

use crate::agent::AgentLoop;
use crate::agent::compact::{CHARS_PER_TOKEN, estimate_tokens};
use crate::model::{ContentBlock, Role};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ContextReport {
    /// The model the next call goes to.
    pub model: String,
    pub context_window: u64,
    /// Tokens the last model call used (input + cache + output), 0 before any call.
    pub measured_tokens: u64,
    pub categories: Vec<(String, u64)>,
    /// The CLAUDE.md files the memory category holds.
    pub memory_files: Vec<super::prompt::LoadedMemory>,
}

impl std::fmt::Display for ContextReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: u64 = self.categories.iter().map(|(_, n)| n).sum();
        writeln!(
            f,
            "Context window: {} tokens; last call used {}; estimated now {}",
            self.context_window, self.measured_tokens, total
        )?;
        for (name, tokens) in &self.categories {
            let share = *tokens as f64 * 100.0 / self.context_window.max(1) as f64;
            writeln!(f, "  {name:<22} {tokens:>8} tokens  {share:5.1}%")?;
        }
        Ok(())
    }
}

fn tokens_of<T: Serialize>(value: &T) -> u64 {
    serde_json::to_string(value)
        .map(|s| s.len() as u64 / CHARS_PER_TOKEN)
        .unwrap_or(0)
}

pub(crate) fn build(agent: &AgentLoop) -> ContextReport {
    let system = super::prompt::system_blocks(
        &agent.config.cwd,
        None,
        &agent.config.today,
        &agent.config.options,
    );
    let memory = agent
        .config
        .memory
        .as_ref()
        .map_or(0, |m| m.len() as u64 / CHARS_PER_TOKEN);
    let mut user_text = 0;
    let mut assistant_text = 0;
    let mut tool_calls = 0;
    let mut tool_results = 0;
    let mut thinking = 0;
    for message in &agent.messages {
        for block in &message.content {
            let n = tokens_of(block);
            match (block, message.role) {
                (ContentBlock::ToolUse { .. }, _) => tool_calls += n,
                (ContentBlock::ToolResult { .. }, _) => tool_results += n,
                (ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. }, _) => {
                    thinking += n
                }
                (_, Role::User) => user_text += n,
                (_, Role::Assistant) => assistant_text += n,
            }
        }
    }
    debug_assert!(estimate_tokens(&agent.messages) >= user_text);
    ContextReport {
        model: agent.model_name(),
        context_window: agent.config.context_window,
        measured_tokens: agent.context_tokens,
        memory_files: agent.config.memory_files.clone(),
        categories: vec![
            ("system prompt".into(), tokens_of(&system)),
            (
                "tool definitions".into(),
                tokens_of(&agent.tool_definitions()),
            ),
            ("memory (CLAUDE.md)".into(), memory),
            ("user messages".into(), user_text),
            ("assistant messages".into(), assistant_text),
            ("thinking".into(), thinking),
            ("tool calls".into(), tool_calls),
            ("tool results".into(), tool_results),
        ],
    }
}
