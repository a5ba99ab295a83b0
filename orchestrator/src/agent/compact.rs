//! Keeping the conversation inside the model's context window. When the last call's input
//! passes the threshold: first, old tool results are cleared (they are the bulk and the
//! least needed later); if that is not enough, the older turns are summarised by a model
//! call and replaced by the summary, with the CLAUDE.md memory re-injected after it. The
//! latest exchange is always kept verbatim, so pending tool results stay paired.

use crate::agent::AgentLoop;
use crate::model::{
    ContentBlock, Message, MessagesRequest, Role, ToolResultBlock, ToolResultContent,
};
use crate::session::RecordBody;

/// Text that replaces a cleared tool result.
pub const CLEARED: &str =
    "[earlier tool result cleared to save context; run the tool again if you need it]";

/// Prompt of the summarising call (our own words).
const SUMMARY_PROMPT: &str = "\
The conversation above is about to be replaced by a summary to free context. Write that \
summary now. Include: the user's requests and goals in their own terms; what has been done \
so far (files read, created and changed, commands run and what they showed); decisions and \
their reasons; errors met and how they were resolved; and what remains to do next. Be \
specific: keep file paths, function names and exact error messages. Reply with the summary \
only.";

/// Tool results shorter than this are kept: clearing them saves little.
const KEEP_SHORT_RESULT_CHARS: usize = 200;
/// Rough characters per token, for estimates between model calls.
pub const CHARS_PER_TOKEN: u64 = 4;

impl AgentLoop {
    pub(crate) fn needs_compaction(&self) -> bool {
        self.context_tokens as f64 > self.config.context_window as f64 * self.config.compact_at
    }

    /// Compacts now (also the manual compact). Returns the estimated tokens saved.
    pub async fn compact(&mut self) -> Result<u64, crate::model::ModelError> {
        let before = self.context_tokens;
        let cleared = clear_old_tool_results(&mut self.messages);
        let estimate = before.saturating_sub(cleared / CHARS_PER_TOKEN);
        if cleared > 0
            && (estimate as f64) < self.config.context_window as f64 * self.config.compact_at * 0.75
        {
            self.context_tokens = estimate;
            self.emit(super::LoopEvent::Compacted {
                tokens_before: before,
            });
            return Ok(before - estimate);
        }
        self.summarise(before, false).await?;
        self.emit(super::LoopEvent::Compacted {
            tokens_before: before,
        });
        Ok(before.saturating_sub(self.context_tokens))
    }

    /// Replaces the conversation before the verbatim tail with a model-written summary.
    /// `whole`: also summarise the tail when it is a finished exchange (manual compact).
    pub(crate) async fn summarise(
        &mut self,
        before: u64,
        whole: bool,
    ) -> Result<(), crate::model::ModelError> {
        let finished = self.messages.last().is_some_and(|m| {
            m.role == Role::Assistant
                && !m
                    .content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::ToolUse { .. }))
        });
        let keep_from = if whole && finished {
            self.messages.len()
        } else {
            tail_start(&self.messages)
        };
        if keep_from == 0 {
            return Ok(());
        }
        let mut history: Vec<Message> = self.messages[..keep_from].to_vec();
        crate::session::transcript::push_merged(&mut history, Message::user_text(SUMMARY_PROMPT));
        let mut req = MessagesRequest::new(self.config.model.clone(), 4096, history);
        req.system = super::prompt::system_blocks(
            &self.config.cwd,
            None,
            &self.config.today,
            &self.config.options,
        );
        let reply = self.model.complete(&req).await?;
        let summary = crate::session::transcript::text_of(&reply.to_message());
        let mut text = format!(
            "This session continues an earlier conversation that was compacted to save context. \
             Summary of it:\n\n{summary}"
        );
        if let Some(memory) = &self.config.memory {
            text.push_str("\n\n");
            text.push_str(memory);
        }
        let tail: Vec<Message> = self.messages[keep_from..].to_vec();
        self.record(RecordBody::Compaction {
            summary: text.clone(),
            tokens_before: before,
        });
        self.messages = vec![Message::user_text(text)];
        for message in tail {
            let body = match message.role {
                Role::User => RecordBody::User {
                    message: message.clone(),
                },
                Role::Assistant => RecordBody::Assistant {
                    message: message.clone(),
                    stop_reason: None,
                    usage: Default::default(),
                },
            };
            self.record(body);
            crate::session::transcript::push_merged(&mut self.messages, message);
        }
        self.sync();
        self.context_tokens = estimate_tokens(&self.messages);
        Ok(())
    }
}

/// Where the verbatim tail begins: the last user turn, and the assistant turn before it
/// when that turn's tool calls are answered by it.
fn tail_start(messages: &[Message]) -> usize {
    let Some(last_user) = messages.iter().rposition(|m| m.role == Role::User) else {
        return 0;
    };
    let answers_tools = messages[last_user]
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolResult { .. }));
    if answers_tools && last_user > 0 {
        last_user - 1
    } else {
        last_user
    }
}

/// Replaces the text of long tool results outside the latest exchange. Returns the
/// characters removed.
pub fn clear_old_tool_results(messages: &mut [Message]) -> u64 {
    let keep_from = tail_start(messages);
    let mut removed = 0u64;
    for message in &mut messages[..keep_from] {
        for block in &mut message.content {
            if let ContentBlock::ToolResult { content, .. } = block {
                let len = match content {
                    ToolResultContent::Text(t) => t.len(),
                    ToolResultContent::Blocks(_) => usize::MAX,
                };
                if len > KEEP_SHORT_RESULT_CHARS && len != CLEARED.len() {
                    removed += if len == usize::MAX {
                        1000
                    } else {
                        (len - CLEARED.len()) as u64
                    };
                    *content = ToolResultContent::Text(CLEARED.to_string());
                }
            }
        }
    }
    removed
}

/// A rough token count of messages (used only between model calls).
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    let chars: u64 = messages
        .iter()
        .flat_map(|m| &m.content)
        .map(block_chars)
        .sum();
    chars / CHARS_PER_TOKEN
}

/// What an image costs the model, in tokens, at most: the API scales images to about
/// 1.15 megapixels, at about 750 pixels a token.
const IMAGE_TOKENS: u64 = 1600;

/// A block's size as characters of text would count. Images and PDFs are not counted by
/// their base64 (megabytes of it would pass for a full context): an image costs what the
/// API charges at most, a PDF a token per 64 bytes of its base64 (about 48 of the file's).
fn block_chars(block: &ContentBlock) -> u64 {
    let json_len = |b: &ContentBlock| serde_json::to_string(b).map_or(0, |s| s.len() as u64);
    match block {
        ContentBlock::Image { .. } => IMAGE_TOKENS * CHARS_PER_TOKEN,
        ContentBlock::ToolResult {
            content: ToolResultContent::Blocks(blocks),
            ..
        } => blocks
            .iter()
            .map(|b| match b {
                ToolResultBlock::Text { text } => text.len() as u64,
                ToolResultBlock::Image { .. } => IMAGE_TOKENS * CHARS_PER_TOKEN,
                ToolResultBlock::Document { source } => {
                    let data = source["data"].as_str().map_or(0, str::len) as u64;
                    data / 64 * CHARS_PER_TOKEN
                }
            })
            .sum(),
        other => json_len(other),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool_exchange(id: &str, result: &str) -> [Message; 2] {
        [
            Message::assistant(vec![ContentBlock::ToolUse {
                id: id.into(),
                name: "Read".into(),
                input: json!({}),
            }]),
            Message::user(vec![ContentBlock::tool_result(id, result, false)]),
        ]
    }

    #[test]
    fn old_long_results_are_cleared_but_the_latest_exchange_is_kept() {
        let long = "x".repeat(5000);
        let mut messages = vec![Message::user_text("start")];
        messages.extend(tool_exchange("a", &long));
        messages.extend(tool_exchange("b", "short"));
        messages.extend(tool_exchange("c", &long));
        let removed = clear_old_tool_results(&mut messages);
        assert_eq!(removed, (5000 - CLEARED.len()) as u64);
        assert_eq!(
            messages[2].content,
            vec![ContentBlock::tool_result("a", CLEARED, false)]
        );
        assert_eq!(
            messages[4].content,
            vec![ContentBlock::tool_result("b", "short", false)]
        );
        assert_eq!(
            messages[6].content,
            vec![ContentBlock::tool_result("c", long.as_str(), false)]
        );
        assert_eq!(
            clear_old_tool_results(&mut messages),
            0,
            "clearing twice changes nothing"
        );
    }

    #[test]
    fn the_tail_keeps_tool_use_and_its_results_together() {
        let mut messages = vec![Message::user_text("start")];
        messages.extend(tool_exchange("a", "r"));
        assert_eq!(tail_start(&messages), 1);
        messages.push(Message::assistant(vec![ContentBlock::text("done")]));
        messages.push(Message::user_text("next"));
        assert_eq!(tail_start(&messages), 4);
    }

    #[test]
    fn an_image_counts_what_the_model_charges_not_its_base64() {
        let image = ToolResultBlock::Image {
            source: json!({"type": "base64", "media_type": "image/png", "data": "A".repeat(4_000_000)}),
        };
        let result = ContentBlock::ToolResult {
            tool_use_id: "r".into(),
            content: ToolResultContent::Blocks(vec![
                ToolResultBlock::Text {
                    text: "a.png".into(),
                },
                image,
            ]),
            is_error: false,
            cache_control: None,
        };
        let tokens = estimate_tokens(&[Message::user(vec![result])]);
        assert!(
            tokens > IMAGE_TOKENS && tokens < IMAGE_TOKENS + 10,
            "{tokens}"
        );
    }
}
