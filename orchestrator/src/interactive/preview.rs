//! What a permission question shows of a call: the command for Bash, a unified diff for
//! Edit and Write, the fields for anything else; and the one-line summary of a call in the
//! running conversation.
//!
//! The current content a Write would replace is read through the sandbox (the same
//! confined read the Read tool makes), never from the host: the file is the session's to
//! plant, the host reads workspace files only through the sandbox or beneath it without
//! links.

use serde_json::Value;
use similar::Algorithm;
use similar::udiff::unified_diff;

use crate::tools::ToolContext;

/// Most lines of a preview shown in a question.
pub const MAX_PREVIEW_LINES: usize = 60;
/// Lines of context around each change in a diff.
const CONTEXT_LINES: usize = 3;

fn field<'a>(input: &'a Value, key: &str) -> &'a str {
    input.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `Bash(ls -la)`, `Edit(/w/src/a.rs)`, `Glob(**/*.rs)`: how a call reads in the log.
pub fn summary(tool: &str, input: &Value) -> String {
    let main = match tool {
        "Bash" => field(input, "command").to_string(),
        "Read" | "Write" | "Edit" | "MultiEdit" => field(input, "file_path").to_string(),
        "NotebookEdit" => field(input, "notebook_path").to_string(),
        "Glob" | "Grep" => field(input, "pattern").to_string(),
        "WebFetch" => field(input, "url").to_string(),
        "Agent" | "Task" => field(input, "description").to_string(),
        _ => compact_json(input),
    };
    format!("{tool}({})", one_line(&main, 100))
}

/// The body of a permission question for the call.
pub async fn details(tool: &str, input: &Value, ctx: Option<&ToolContext>) -> Vec<String> {
    let lines = match tool {
        "Bash" => {
            let mut lines: Vec<String> = field(input, "command")
                .lines()
                .map(str::to_string)
                .collect();
            let description = field(input, "description");
            if !description.is_empty() {
                lines.push(format!("({description})"));
            }
            lines
        }
        "Edit" => edit_diff(input),
        "Write" => write_diff(input, ctx).await,
        "ExitPlanMode" => field(input, "plan").lines().map(str::to_string).collect(),
        _ => serde_json::to_string_pretty(input)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect(),
    };
    cap(lines)
}

fn edit_diff(input: &Value) -> Vec<String> {
    let path = field(input, "file_path");
    let mut lines = diff_lines(field(input, "old_string"), field(input, "new_string"), path);
    if input.get("replace_all").and_then(Value::as_bool) == Some(true) {
        lines.push("(every occurrence)".into());
    }
    lines
}

async fn write_diff(input: &Value, ctx: Option<&ToolContext>) -> Vec<String> {
    let path = field(input, "file_path");
    let (old, note) = match ctx {
        Some(ctx) => current_content(ctx, path).await,
        None => (String::new(), None),
    };
    let mut lines: Vec<String> = note.into_iter().collect();
    lines.extend(diff_lines(&old, field(input, "content"), path));
    lines
}

/// The file's text as the sandbox reads it (empty when it does not exist), and a note
/// when the diff is against less than the whole file.
async fn current_content(ctx: &ToolContext, path: &str) -> (String, Option<String>) {
    match ctx.client().read(path, 1, 0).await {
        Ok(resp) if !resp.binary_description.is_empty() => (
            String::new(),
            Some(format!("replaces {path} ({})", resp.binary_description)),
        ),
        Ok(resp) => {
            let text: String = resp
                .content
                .lines()
                .map(|l| l.split_once('\t').map_or(l, |(_, rest)| rest))
                .flat_map(|l| [l, "\n"])
                .collect();
            let note = resp
                .partial
                .then(|| format!("(diff against the first {} lines)", resp.lines_returned));
            (text, note)
        }
        Err(e) if e.code == sandbox_agent::ErrorCode::NotFound => {
            (String::new(), Some(format!("creates {path}")))
        }
        Err(e) => (
            String::new(),
            Some(format!("(cannot read {path}: {})", e.message)),
        ),
    }
}

fn diff_lines(old: &str, new: &str, path: &str) -> Vec<String> {
    let text = unified_diff(
        Algorithm::Myers,
        old,
        new,
        CONTEXT_LINES,
        Some((path, path)),
    );
    text.lines().map(str::to_string).collect()
}

fn cap(mut lines: Vec<String>) -> Vec<String> {
    if lines.len() > MAX_PREVIEW_LINES {
        let more = lines.len() - MAX_PREVIEW_LINES;
        lines.truncate(MAX_PREVIEW_LINES);
        lines.push(format!("… {more} more lines"));
    }
    lines
}

fn compact_json(input: &Value) -> String {
    serde_json::to_string(input).unwrap_or_default()
}

/// The first line of `text`, cut at `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let mut out: String = first.chars().take(max).collect();
    if first.chars().count() > max || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn an_edit_shows_a_unified_diff() {
        let lines = details(
            "Edit",
            &json!({"file_path": "/w/a.py", "old_string": "return a - b\n", "new_string": "return a + b\n"}),
            None,
        )
        .await;
        assert_eq!(lines[0], "--- /w/a.py");
        assert!(lines.contains(&"-return a - b".to_string()), "{lines:?}");
        assert!(lines.contains(&"+return a + b".to_string()), "{lines:?}");
    }

    #[tokio::test]
    async fn bash_shows_the_command_and_long_previews_are_cut() {
        let lines = details(
            "Bash",
            &json!({"command": "make\nmake test", "description": "build"}),
            None,
        )
        .await;
        assert_eq!(lines, vec!["make", "make test", "(build)"]);
        let content: String = (0..200).map(|i| format!("{i}\n")).collect();
        let lines = details(
            "Write",
            &json!({"file_path": "/w/n", "content": content}),
            None,
        )
        .await;
        assert_eq!(lines.len(), MAX_PREVIEW_LINES + 1);
        assert!(lines[MAX_PREVIEW_LINES].starts_with("… "));
    }

    #[test]
    fn summaries_are_one_line() {
        assert_eq!(summary("Bash", &json!({"command": "ls\npwd"})), "Bash(ls…)");
        assert_eq!(
            summary("mcp__x__y", &json!({"a": 1})),
            "mcp__x__y({\"a\":1})"
        );
    }
}
