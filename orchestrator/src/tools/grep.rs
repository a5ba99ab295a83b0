//! Grep: search file contents with a regular expression (ripgrep's engine, in the agent).
//! Maps Claude Code's fields (`-i`, `-n`, `-A`/`-B`/`-C`, `type`, `output_mode`) onto the
//! agent's GrepRequest.

use sandbox_agent::proto::grep_request::OutputMode;
use sandbox_agent::proto::{GrepRequest, GrepResponse};
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, agent_error_output, bool_field, str_field, u64_field};

pub struct GrepTool;

const DESCRIPTION: &str = "Searches file contents in the sandbox with a regular expression \
(Rust regex syntax, as in ripgrep: escape literal braces and parentheses). `path` is a file \
or directory (default: the current working directory); narrow it with `glob` (e.g. \
`*.{ts,tsx}`) or `type` (a ripgrep file type such as `rust`, `py`, `js`). `output_mode`: \
`files_with_matches` (default) lists matching files, `content` shows matching lines \
(`-n` line numbers, on by default; `-A`/`-B`/`-C` lines of context after, before, or \
around), `count` gives matches per file. `-i` ignores case; `multiline` lets a pattern \
span lines and `.` match newlines. `head_limit` keeps only the first N lines, files or \
counts. Files ignored by .gitignore and binary files are skipped. Use this instead of \
running grep or rg through Bash.";

#[tonic::async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &'static str {
        "Grep"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1,
                    "description": "Regular expression to search for"},
                "path": {"type": "string",
                    "description": "File or directory to search (default: the current working directory)"},
                "glob": {"type": "string",
                    "description": "Only files whose name matches this glob, e.g. \"*.rs\""},
                "type": {"type": "string",
                    "description": "Only files of this ripgrep type, e.g. \"rust\", \"py\""},
                "output_mode": {"type": "string",
                    "enum": ["content", "files_with_matches", "count"],
                    "description": "What to return (default files_with_matches)"},
                "-i": {"type": "boolean", "description": "Ignore case"},
                "-n": {"type": "boolean",
                    "description": "Show line numbers (content mode; default true)"},
                "-A": {"type": "integer", "minimum": 0,
                    "description": "Lines of context after each match (content mode)"},
                "-B": {"type": "integer", "minimum": 0,
                    "description": "Lines of context before each match (content mode)"},
                "-C": {"type": "integer", "minimum": 0,
                    "description": "Lines of context before and after each match (content mode)"},
                "multiline": {"type": "boolean",
                    "description": "Let the pattern span lines (default false)"},
                "head_limit": {"type": "integer", "minimum": 0,
                    "description": "Keep only the first N output lines, files or counts (0: all)"}
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
        let req = request(&input);
        let head_limit = req.head_limit;
        match ctx.client().grep(req).await {
            Ok(resp) => ToolOutput::ok(render(&resp, head_limit)),
            Err(err) => agent_error_output("Grep", &err),
        }
    }
}

/// The agent request for a validated input.
pub fn request(input: &Value) -> GrepRequest {
    let mode = match str_field(input, "output_mode") {
        "content" => OutputMode::Content,
        "count" => OutputMode::Count,
        _ => OutputMode::FilesWithMatches,
    };
    let context = u64_field(input, "-C").unwrap_or(0);
    // An explicit -A / -B wins over -C for its side.
    let after = u64_field(input, "-A").unwrap_or(context);
    let before = u64_field(input, "-B").unwrap_or(context);
    let mut req = GrepRequest {
        pattern: str_field(input, "pattern").to_string(),
        // A relative path is resolved by the agent against the session's directory.
        path: str_field(input, "path").to_string(),
        glob: str_field(input, "glob").to_string(),
        file_type: str_field(input, "type").to_string(),
        case_insensitive: bool_field(input, "-i").unwrap_or(false),
        line_numbers: bool_field(input, "-n").unwrap_or(mode == OutputMode::Content),
        before_context: clamp_u32(before),
        after_context: clamp_u32(after),
        multiline: bool_field(input, "multiline").unwrap_or(false),
        head_limit: clamp_u32(u64_field(input, "head_limit").unwrap_or(0)),
        ..Default::default()
    };
    req.set_output_mode(mode);
    req
}

fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The text the model sees for a finished search.
pub fn render(resp: &GrepResponse, head_limit: u32) -> String {
    let mut out = resp.output.trim_end().to_string();
    if out.is_empty() {
        return "No matches found".to_string();
    }
    if resp.truncated {
        let why = if head_limit > 0 {
            format!("[stopped at head_limit {head_limit}; raise it or narrow the search]")
        } else {
            "[output truncated; narrow the search with path, glob, type or head_limit]".to_string()
        };
        out.push('\n');
        out.push_str(&why);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_map_onto_the_request() {
        let req = request(&json!({
            "pattern": "fn main", "path": "/w", "glob": "*.rs", "type": "rust",
            "output_mode": "content", "-i": true, "-C": 2, "-A": 5, "head_limit": 10,
            "multiline": true
        }));
        assert_eq!(req.output_mode(), OutputMode::Content);
        assert_eq!((req.before_context, req.after_context), (2, 5));
        assert!(req.case_insensitive && req.multiline && req.line_numbers);
        assert_eq!(req.file_type, "rust");
        assert_eq!(req.glob, "*.rs");
        assert_eq!(req.head_limit, 10);
    }

    #[test]
    fn line_numbers_default_on_only_in_content_mode() {
        let content = request(&json!({"pattern": "x", "output_mode": "content"}));
        assert!(content.line_numbers);
        let off = request(&json!({"pattern": "x", "output_mode": "content", "-n": false}));
        assert!(!off.line_numbers);
        let files = request(&json!({"pattern": "x"}));
        assert!(!files.line_numbers);
        assert_eq!(files.output_mode(), OutputMode::FilesWithMatches);
    }

    #[test]
    fn empty_and_cut_results_are_explained() {
        assert_eq!(render(&GrepResponse::default(), 0), "No matches found");
        let resp = GrepResponse {
            output: "a.rs\nb.rs\n".into(),
            truncated: true,
            ..Default::default()
        };
        assert_eq!(
            render(&resp, 2),
            "a.rs\nb.rs\n[stopped at head_limit 2; raise it or narrow the search]"
        );
        assert!(render(&resp, 0).contains("output truncated"));
    }
}
