//! Write: create a file or replace one whole. Replacing an existing file needs a prior Read
//! of it in this session, and the file unchanged since, so the model never overwrites
//! content it has not seen.

use std::path::Path;

use sandbox_agent::ErrorCode;
use sandbox_agent::proto::WriteRequest;
use serde_json::{Value, json};

use super::context::{FileStamp, StampRefusal};
use super::{Tool, ToolContext, ToolOutput, absolute_path, agent_error_output, str_field};

pub struct WriteTool;

const DESCRIPTION: &str = "Writes a whole file in the sandbox, creating it (and any missing \
parent directories) or replacing its content. `file_path` must be absolute. To replace an \
existing file you must have read it with Read in this session, and it must not have changed \
since; new files need no Read. For changing part of a file prefer Edit, which sends only the \
changed text. Content is at most 16 MiB.";

#[tonic::async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &'static str {
        "Write"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "minLength": 1,
                    "description": "Absolute path of the file to write"},
                "content": {"type": "string",
                    "description": "The file's complete new content"}
            },
            "required": ["file_path", "content"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Edit
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let file_path = str_field(&input, "file_path");
        let path = match absolute_path("Write", "file_path", file_path, ctx.workspace()) {
            Ok(p) => p,
            Err(out) => return out,
        };
        let shown = path.display().to_string();
        let current = match current_digest(ctx, &shown).await {
            Ok(d) => d,
            Err(out) => return out,
        };
        if let Err(refusal) = ctx.read_state().for_write(&path, current.as_deref()) {
            return refused(&shown, refusal);
        }
        let content = str_field(&input, "content").as_bytes().to_vec();
        let req = WriteRequest {
            path: shown.clone(),
            content,
            create_parents: true,
        };
        match ctx.client().write(req).await {
            Ok(resp) => {
                record(ctx, &path, resp.sha256, resp.mtime_ns);
                let verb = if resp.created { "Created" } else { "Replaced" };
                ToolOutput::ok(format!("{verb} {shown} ({} bytes).", resp.bytes_written))
            }
            Err(err) => agent_error_output("Write", &err),
        }
    }
}

fn record(ctx: &ToolContext, path: &Path, sha256: String, mtime_ns: i64) {
    ctx.read_state()
        .record(path, FileStamp { sha256, mtime_ns });
}

/// The digest of the file at `path` now, or `None` when there is no file there.
async fn current_digest(ctx: &ToolContext, path: &str) -> Result<Option<String>, ToolOutput> {
    // A one-line read: the agent digests the whole file whatever the window.
    match ctx.client().read(path, 1, 1).await {
        Ok(resp) => Ok(Some(resp.sha256)),
        Err(err) if err.code == ErrorCode::NotFound => Ok(None),
        Err(err) => Err(agent_error_output("Write", &err)),
    }
}

/// The error text for a Write refused by the read-state rule.
pub fn refused(path: &str, refusal: StampRefusal) -> ToolOutput {
    ToolOutput::error(match refusal {
        StampRefusal::NotRead => format!(
            "Write: {path} already exists and you have not read it in this session; read it \
             with Read first (or use Edit to change part of it)"
        ),
        StampRefusal::Changed => format!(
            "Write: {path} changed since you last read it (a command or the user modified \
             it); read it again before replacing it"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_tell_the_model_what_to_do() {
        let out = refused("/w/a", StampRefusal::NotRead);
        assert!(out.is_error);
        assert!(
            out.content.contains("read it with Read first"),
            "{}",
            out.content
        );
        let out = refused("/w/a", StampRefusal::Changed);
        assert!(
            out.content.contains("changed since you last read it"),
            "{}",
            out.content
        );
    }
}
