//! Edit: replace an exact string in a file the model has read, refusing when the file
//! changed since (the agent compares digests under its own lock and writes nothing on any
//! failure).

use sandbox_agent::proto::EditRequest;
use serde_json::{Value, json};

use super::context::{FileStamp, StampRefusal};
use super::{
    Tool, ToolContext, ToolOutput, absolute_path, agent_error_output, bool_field, str_field,
};

pub struct EditTool;

const DESCRIPTION: &str = "Replaces exact text in a file in the sandbox. `file_path` must be \
absolute, and the file must have been read with Read in this session: an edit is refused \
when the file changed since that read. `old_string` must match the file exactly (whitespace \
and indentation included; leave out the line-number prefix Read shows) and only once, unless \
`replace_all` is true, which replaces every occurrence. Add surrounding lines to make a \
match unique. `new_string` must differ from `old_string`. A failed edit changes nothing. \
The result shows the edited lines.";

#[tonic::async_trait]
impl Tool for EditTool {
    fn name(&self) -> &'static str {
        "Edit"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "minLength": 1,
                    "description": "Absolute path of the file to change"},
                "old_string": {"type": "string", "minLength": 1,
                    "description": "The exact text to replace"},
                "new_string": {"type": "string",
                    "description": "The text to put in its place (must differ from old_string)"},
                "replace_all": {"type": "boolean",
                    "description": "Replace every occurrence instead of exactly one (default false)"}
            },
            "required": ["file_path", "old_string", "new_string"],
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
        let path = match absolute_path("Edit", "file_path", file_path, ctx.workspace()) {
            Ok(p) => p,
            Err(out) => return out,
        };
        let shown = path.display().to_string();
        let stamp = match ctx.read_state().for_edit(&path) {
            Ok(stamp) => stamp,
            Err(refusal) => return refused(&shown, refusal),
        };
        let old_string = str_field(&input, "old_string");
        let new_string = str_field(&input, "new_string");
        if old_string == new_string {
            return ToolOutput::error(
                "Edit: old_string and new_string are identical; nothing would change",
            );
        }
        let req = EditRequest {
            path: shown.clone(),
            old_string: old_string.to_string(),
            new_string: new_string.to_string(),
            replace_all: bool_field(&input, "replace_all").unwrap_or(false),
            expected_sha256: stamp.sha256,
        };
        match ctx.client().edit(req).await {
            Ok(resp) => {
                let stamp = FileStamp {
                    sha256: resp.sha256,
                    mtime_ns: resp.mtime_ns,
                };
                ctx.read_state().record(&path, stamp);
                ToolOutput::ok(success(&shown, resp.replacements, &resp.snippet))
            }
            Err(err) => agent_error_output("Edit", &err),
        }
    }
}

/// The error text for an Edit refused by the read-state rule.
pub fn refused(path: &str, refusal: StampRefusal) -> ToolOutput {
    ToolOutput::error(match refusal {
        StampRefusal::NotRead => format!(
            "Edit: you have not read {path} in this session; read the file first with Read, \
             then edit it"
        ),
        StampRefusal::Changed => {
            format!("Edit: {path} changed since you read it; read it again")
        }
    })
}

/// The text the model sees after a successful edit.
pub fn success(path: &str, replacements: u64, snippet: &str) -> String {
    let what = if replacements == 1 {
        "1 replacement".to_string()
    } else {
        format!("{replacements} replacements")
    };
    if snippet.is_empty() {
        return format!("Edited {path} ({what}).");
    }
    format!("Edited {path} ({what}). The lines around the first change now read:\n{snippet}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_without_a_read_says_read_first() {
        let out = refused("/w/a.rs", StampRefusal::NotRead);
        assert!(out.is_error);
        assert!(
            out.content.contains("read the file first"),
            "{}",
            out.content
        );
    }

    #[test]
    fn success_counts_replacements_and_shows_the_snippet() {
        assert_eq!(success("/w/a", 1, ""), "Edited /w/a (1 replacement).");
        let s = success("/w/a", 3, "     2\tx\n");
        assert!(s.starts_with("Edited /w/a (3 replacements)."), "{s}");
        assert!(s.ends_with("     2\tx\n"), "{s}");
    }
}
