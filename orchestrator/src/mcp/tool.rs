//! An MCP server's tool as the model sees it: `mcp__<server>__<tool>`, the server's own
//! description and input schema, permission kind `other` (rules name it, `mcp__server`
//! names all of a server's). Results become text; past the cap, the whole text is saved
//! in the sandbox and the result names the file, as for Bash.

use std::sync::Arc;

use sandbox_agent::limits::DEFAULT_OUTPUT_LIMIT_CHARS;
use sandbox_agent::proto::WriteRequest;
use serde_json::Value;

use super::server::McpServer;
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutput};

/// Where a cut result is kept in full, inside the sandbox.
const FULL_OUTPUT_DIR: &str = "/tmp/cordon-mcp";

/// One tool of one server.
pub struct McpTool {
    full_name: String,
    description: String,
    schema: Value,
    read_only: bool,
    tool: String,
    server: Arc<McpServer>,
}

/// `mcp__<server>__<tool>` with characters outside `[A-Za-z0-9_-]` made `_`, as Claude
/// Code names them (so rules and hook matchers written for it carry over).
pub fn full_name(server: &str, tool: &str) -> String {
    format!("mcp__{}__{}", name_part(server), name_part(tool))
}

/// `name` as it appears in a tool's full name: characters outside `[A-Za-z0-9_-]` made `_`.
pub fn name_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl McpTool {
    pub fn new(server: Arc<McpServer>, def: &rmcp::model::Tool) -> Self {
        let read_only = def
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let mut schema = Value::Object((*def.input_schema).clone());
        if schema.get("type").is_none() {
            schema["type"] = Value::from("object");
        }
        Self {
            full_name: full_name(server.name(), &def.name),
            description: def
                .description
                .as_deref()
                .unwrap_or("(the server gave no description)")
                .to_string(),
            schema,
            read_only,
            tool: def.name.to_string(),
            server,
        }
    }
}

#[tonic::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.full_name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    /// A server the client turned off (`mcp_toggle`) offers nothing.
    fn is_offered(&self) -> bool {
        !self.server.is_disabled()
    }

    fn mcp_server(&self) -> Option<&str> {
        Some(self.server.name())
    }

    fn uses_sandbox(&self) -> bool {
        matches!(
            self.server.config.transport,
            super::config::Transport::Stdio { .. }
        )
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let args = match input {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        match self.server.call(ctx, &self.tool, args).await {
            Ok(result) => {
                let (text, is_error) = render(&result);
                let text = cap(ctx, &self.full_name, text).await;
                ToolOutput {
                    content: text,
                    is_error,
                    ..ToolOutput::default()
                }
            }
            Err(e) => ToolOutput::error(format!("{}: {e}", self.full_name)),
        }
    }
}

/// A `tools/call` result as text: text blocks as they are, other blocks described.
pub fn render(result: &Value) -> (String, bool) {
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut parts = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("");
        match field("type") {
            "text" => parts.push(field("text").to_string()),
            "image" | "audio" => parts.push(format!(
                "[{} content, {}, {} base64 characters, not shown]",
                field("type"),
                field("mimeType"),
                field("data").len()
            )),
            "resource" => {
                let r = block.get("resource").cloned().unwrap_or(Value::Null);
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => parts.push(t.to_string()),
                    None => parts.push(format!(
                        "[resource {}]",
                        r.get("uri").and_then(Value::as_str).unwrap_or("")
                    )),
                }
            }
            "resource_link" => parts.push(format!("[resource link {}]", field("uri"))),
            other => parts.push(format!("[{other} content]")),
        }
    }
    if parts.is_empty()
        && let Some(s) = result.get("structuredContent")
    {
        parts.push(s.to_string());
    }
    let text = if parts.is_empty() {
        "(no output)".to_string()
    } else {
        parts.join("\n")
    };
    (text, is_error)
}

/// Cuts `text` past the output limit, keeping the whole in a sandbox file the result names.
async fn cap(ctx: &ToolContext, tool: &str, text: String) -> String {
    let limit = usize::try_from(DEFAULT_OUTPUT_LIMIT_CHARS).unwrap_or(usize::MAX);
    let Some((cut_at, _)) = text.char_indices().nth(limit) else {
        return text;
    };
    let path = format!("{FULL_OUTPUT_DIR}/{tool}-{}.txt", uuid::Uuid::new_v4());
    let saved = ctx
        .client()
        .write(WriteRequest {
            path: path.clone(),
            content: text.as_bytes().to_vec(),
            create_parents: true,
        })
        .await;
    let note = match saved {
        Ok(_) => format!("[output cut at {limit} characters; the whole output is in {path}]"),
        Err(e) => format!(
            "[output cut at {limit} characters; saving the rest failed: {}]",
            e.message
        ),
    };
    format!("{}\n{note}", &text[..cut_at])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_claude_code() {
        assert_eq!(
            full_name("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        assert_eq!(full_name("my server", "a.b"), "mcp__my_server__a_b");
    }

    #[test]
    fn results_become_text() {
        let r = json!({"content": [{"type": "text", "text": "12:00"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"}], "isError": false});
        assert_eq!(
            render(&r),
            (
                "12:00\n[image content, image/png, 4 base64 characters, not shown]".into(),
                false
            )
        );
        let r = json!({"content": [{"type": "text", "text": "boom"}], "isError": true});
        assert_eq!(render(&r), ("boom".into(), true));
        assert_eq!(render(&json!({"content": []})).0, "(no output)");
    }
}
