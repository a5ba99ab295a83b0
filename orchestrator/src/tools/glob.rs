//! Glob: files whose path matches a glob pattern, most recently modified first.

use sandbox_agent::proto::{GlobRequest, GlobResponse};
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, agent_error_output, str_field};

pub struct GlobTool;

const DESCRIPTION: &str = "Finds files in the sandbox by name with a glob pattern such as \
`**/*.rs` or `src/**/test_*.py`, and lists their absolute paths, most recently modified \
first. `path` is the directory to search (default: the current working directory); a \
pattern may also start with an absolute directory. Files ignored by .gitignore and the \
.git directory are skipped. At most 1000 paths are returned; narrow the pattern when the list \
is cut. To search file contents use Grep.";

#[tonic::async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &'static str {
        "Glob"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1,
                    "description": "Glob pattern, e.g. \"**/*.ts\""},
                "path": {"type": "string",
                    "description": "Directory to search in (default: the current working directory)"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Read
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let req = GlobRequest {
            pattern: str_field(&input, "pattern").to_string(),
            // A relative path is resolved by the agent against the session's directory.
            path: str_field(&input, "path").to_string(),
            limit: 0,
        };
        match ctx.client().glob(req).await {
            Ok(resp) => ToolOutput::ok(render(&resp)),
            Err(err) => agent_error_output("Glob", &err),
        }
    }
}

/// The text the model sees for a finished glob.
pub fn render(resp: &GlobResponse) -> String {
    if resp.paths.is_empty() {
        return "No files found".to_string();
    }
    let mut out = resp.paths.join("\n");
    if resp.truncated {
        out.push_str(&format!(
            "\n[only the first {} paths are shown; use a narrower pattern or path]",
            resp.paths.len()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_one_per_line_with_a_notice_when_cut() {
        let mut resp = GlobResponse {
            paths: vec!["/w/b.rs".into(), "/w/a.rs".into()],
            truncated: false,
        };
        assert_eq!(render(&resp), "/w/b.rs\n/w/a.rs");
        resp.truncated = true;
        assert!(
            render(&resp)
                .ends_with("[only the first 2 paths are shown; use a narrower pattern or path]")
        );
        assert_eq!(render(&GlobResponse::default()), "No files found");
    }
}
