//! `WebSearch{query, allowed_domains?, blocked_domains?}` (Claude Code's names), through
//! the Messages API's server-side web search: one request (no client tools) carrying the
//! `web_search_20250305` server tool with the call's domain lists, whose reply holds the
//! `server_tool_use` and `web_search_tool_result` blocks. A reply that pauses
//! (`pause_turn`) is continued by sending it back unchanged, server blocks included.
//!
//! Offered when the settings' `webSearch` is true (the endpoint must offer the server
//! tool); the permission rule is `WebSearch`.

use serde_json::{Value, json};

use super::web_fetch::{SideModel, reply_text};
use super::{Tool, ToolContext, ToolKind, ToolOutput, str_field};
use crate::model::{ContentBlock, Message, MessagesRequest, StopReason, ToolDefinition};

/// Searches the server may run for one call.
const MAX_USES: u32 = 8;
/// `pause_turn` continuations at most.
const MAX_CONTINUATIONS: usize = 4;
const ANSWER_TOKENS: u32 = 4096;

/// The WebSearch tool of one session.
pub struct WebSearchTool {
    model: SideModel,
}

impl WebSearchTool {
    pub fn new(model: SideModel) -> Self {
        Self { model }
    }

    async fn search(&self, query: &str, allowed: &[String], blocked: &[String]) -> ToolOutput {
        let mut req = MessagesRequest::new(
            self.model.model.clone(),
            ANSWER_TOKENS,
            vec![Message::user_text(format!(
                "Perform a web search for the query: {query}"
            ))],
        );
        req.tools = vec![ToolDefinition::web_search(allowed, blocked, MAX_USES)];
        let mut blocks = Vec::new();
        for _ in 0..=MAX_CONTINUATIONS {
            let reply = match self.model.client.complete(&req).await {
                Ok(reply) => reply,
                Err(e) => return ToolOutput::error(format!("WebSearch: the search failed: {e}")),
            };
            blocks.extend(reply.content.iter().cloned());
            if reply.stop_reason != Some(StopReason::PauseTurn) {
                break;
            }
            // The API requires the paused turn back exactly as it came.
            req.messages.push(reply.to_message());
        }
        ToolOutput::ok(summary(query, &blocks))
    }
}

/// The model's text and every result (title and URL), in the order they came.
fn summary(query: &str, blocks: &[ContentBlock]) -> String {
    let mut links = Vec::new();
    for block in blocks {
        if let ContentBlock::WebSearchToolResult { content, .. } = block {
            links.extend(result_lines(content));
        }
    }
    let text = reply_text(blocks);
    let mut out = format!("Web search results for \"{query}\":\n");
    if links.is_empty() {
        out.push_str("(no results)\n");
    }
    for line in links {
        out.push_str(&line);
        out.push('\n');
    }
    if !text.trim().is_empty() {
        out.push('\n');
        out.push_str(text.trim());
    }
    out
}

fn result_lines(content: &Value) -> Vec<String> {
    if let Some(code) = content.get("error_code").and_then(Value::as_str) {
        return vec![format!("- search error: {code}")];
    }
    content
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|r| r["type"] == "web_search_result")
                .map(|r| {
                    let title = r["title"].as_str().unwrap_or("(untitled)");
                    format!("- {title}: {}", r["url"].as_str().unwrap_or(""))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn string_list(input: &Value, key: &str) -> Vec<String> {
    input
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[tonic::async_trait]
impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        "WebSearch"
    }

    fn description(&self) -> &str {
        "Searches the web and returns result titles and URLs with a short summary. \
         allowed_domains limits results to those domains; blocked_domains excludes \
         domains (give one or the other, not both)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 2, "description": "The search query"},
                "allowed_domains": {"type": "array", "items": {"type": "string"},
                    "description": "Only return results from these domains"},
                "blocked_domains": {"type": "array", "items": {"type": "string"},
                    "description": "Never return results from these domains"}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Network
    }

    fn uses_sandbox(&self) -> bool {
        false
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> ToolOutput {
        let allowed = string_list(&input, "allowed_domains");
        let blocked = string_list(&input, "blocked_domains");
        if !allowed.is_empty() && !blocked.is_empty() {
            return ToolOutput::error(
                "WebSearch: give allowed_domains or blocked_domains, not both",
            );
        }
        self.search(str_field(&input, "query"), &allowed, &blocked)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lists_results_errors_and_text() {
        let blocks = vec![
            ContentBlock::WebSearchToolResult {
                tool_use_id: "s1".into(),
                content: json!([{"type": "web_search_result", "title": "Docs",
                    "url": "https://docs.test/", "encrypted_content": "x"}]),
            },
            ContentBlock::WebSearchToolResult {
                tool_use_id: "s2".into(),
                content: json!({"type": "web_search_tool_result_error",
                    "error_code": "max_uses_exceeded"}),
            },
            ContentBlock::text("Docs is the answer."),
        ];
        let text = summary("docs", &blocks);
        assert!(text.contains("- Docs: https://docs.test/"), "{text}");
        assert!(text.contains("search error: max_uses_exceeded"), "{text}");
        assert!(text.ends_with("Docs is the answer."), "{text}");
    }
}
