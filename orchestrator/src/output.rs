//! The records `cordon run` prints: `text` (the final answer), `json` (one result object)
//! and `stream-json` (one JSON object per line: an init record, each assistant and user
//! message, a final result record). Field names follow Claude Code's headless output so
//! tooling written for it (the Agent SDKs, CI scripts) reads ours unchanged.

use serde::Serialize;
use serde_json::{Value, json};

use crate::agent::RunOutcome;
use crate::model::{Message, Role, Usage};

/// `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    #[value(name = "stream-json")]
    StreamJson,
}

/// `text` made safe to print on a terminal (text output): every control character but
/// newline and tab is written out as an escape (`\x1b`, `\u{9b}`) instead of being sent.
///
/// The model's answer, tool output and file names the sandbox chose are untrusted. Sent
/// raw, ESC and C1 sequences drive the user's terminal: OSC 52 writes their clipboard
/// (`\x1b]52;c;...\x07`), CSI moves the cursor and rewrites what was shown, a title
/// sequence can echo text back into some terminals' input, BEL rings. C0 controls (ESC,
/// BEL, CR, backspace...), DEL and the C1 controls U+0080..U+009F (a lone U+009B is a CSI
/// on some terminals) are all escaped. JSON output needs none of this: its encoder escapes
/// control characters already, and its consumers are programs.
pub fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    escape_for_terminal(text, |c| c == '\n' || c == '\t')
}

/// [`for_terminal`] for one line naming something a session or a repository chose (a file
/// name): newlines and tabs are escaped too, so a name cannot fake a line of its own.
pub fn name_for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    escape_for_terminal(text, |_| false)
}

/// Escapes control characters (but those `keep` lets through) and the bidirectional and
/// other invisible format characters that reorder or hide what a terminal shows
/// (U+202E turns `exe.txt` around).
fn escape_for_terminal(text: &str, keep: impl Fn(char) -> bool) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && !keep(c))
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}' | '\u{feff}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !unsafe_char(c) {
            out.push(c);
        } else if u32::from(c) < 0x80 {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The first stream-json record.
pub fn init_record(
    session_id: &str,
    cwd: &str,
    tools: &[String],
    model: &str,
    permission_mode: &str,
) -> Value {
    json!({
        "type": "system",
        "subtype": "init",
        "session_id": session_id,
        "cwd": cwd,
        "tools": tools,
        "mcp_servers": [],
        "model": model,
        "permissionMode": permission_mode,
        "apiKeySource": "environment",
        "cordon_version": crate::version::CORDON,
        // What the Agent SDK checks (see `crate::version`).
        "claude_code_version": crate::version::CLAUDE_CODE_COMPATIBLE,
    })
}

/// An assistant or user message record.
pub fn message_record(session_id: &str, message: &Message) -> Value {
    let kind = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    json!({
        "type": kind,
        "message": message,
        "parent_tool_use_id": Value::Null,
        "session_id": session_id,
    })
}

/// Token usage in the API's field names.
#[derive(Debug, Serialize)]
struct UsageOut {
    input_tokens: u64,
    output_tokens: u64,
    cache_read_input_tokens: u64,
    cache_creation_input_tokens: u64,
}

/// The final record (`json` prints only this; `stream-json` prints it last).
pub fn result_record(session_id: &str, outcome: &RunOutcome, duration_ms: u64) -> Value {
    let Usage {
        input_tokens,
        output_tokens,
        cache_read_input_tokens,
        cache_creation_input_tokens,
    } = outcome.usage;
    let mut record = json!({
        "type": "result",
        "subtype": outcome.subtype,
        "is_error": outcome.is_error,
        "duration_ms": duration_ms,
        "num_turns": outcome.turns,
        "result": outcome.text,
        "session_id": session_id,
        "stop_reason": outcome.stop_reason.as_ref().map(|s| s.as_str().to_string()),
        "usage": UsageOut { input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens },
        // Priced from policies/model-prices.json; null when a model there has no price.
        "total_cost_usd": outcome.total_cost_usd,
    });
    if let Some(value) = &outcome.structured_output {
        record["structured_output"] = value.clone();
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_the_shapes_headless_tooling_reads() {
        let init = init_record("s1", "/w", &["Read".into()], "m", "default");
        assert_eq!(init["type"], "system");
        assert_eq!(init["subtype"], "init");
        assert_eq!(init["tools"][0], "Read");
        let msg = message_record("s1", &Message::user_text("hi"));
        assert_eq!(msg["type"], "user");
        assert_eq!(msg["message"]["content"][0]["text"], "hi");
        let outcome = RunOutcome {
            text: "done".into(),
            is_error: false,
            subtype: "success".into(),
            turns: 3,
            usage: Usage {
                input_tokens: 5,
                output_tokens: 7,
                ..Default::default()
            },
            ..RunOutcome::start()
        };
        let result = result_record("s1", &outcome, 12);
        assert_eq!(result["result"], "done");
        assert_eq!(result["num_turns"], 3);
        assert_eq!(result["usage"]["output_tokens"], 7);
        assert_eq!(result["is_error"], false);
    }
}

/// A message as a person reads it in a terminal (`--verbose` text output): assistant text
/// as is, each tool call on one line, each result's first lines indented.
pub fn human(message: &Message) -> String {
    use crate::model::{ContentBlock, ToolResultContent};
    const RESULT_LINES: usize = 4;
    const LINE_CHARS: usize = 160;
    let clip = |s: &str| -> String {
        let mut line: String = s.chars().take(LINE_CHARS).collect();
        if s.chars().count() > LINE_CHARS {
            line.push('…');
        }
        line
    };
    let mut out = String::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text, .. } if message.role == Role::Assistant => {
                out.push_str(&format!("● {}\n", text.trim()));
            }
            ContentBlock::Text { text, .. } => out.push_str(&format!("> {}\n", clip(text.trim()))),
            ContentBlock::ToolUse { name, input, .. } => {
                out.push_str(&format!("  → {name} {}\n", clip(&input.to_string())));
            }
            ContentBlock::ToolResult {
                content, is_error, ..
            } => {
                let text = match content {
                    ToolResultContent::Text(t) => t.clone(),
                    ToolResultContent::Blocks(b) => serde_json::to_string(b).unwrap_or_default(),
                };
                let mark = if *is_error { "✗" } else { "←" };
                let lines: Vec<&str> = text.lines().collect();
                for (i, line) in lines.iter().take(RESULT_LINES).enumerate() {
                    let lead = if i == 0 { mark } else { " " };
                    out.push_str(&format!("    {lead} {}\n", clip(line)));
                }
                if lines.len() > RESULT_LINES {
                    out.push_str(&format!(
                        "      … {} more lines\n",
                        lines.len() - RESULT_LINES
                    ));
                }
            }
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {
                out.push_str("  (thinking)\n");
            }
            ContentBlock::Image { .. } => out.push_str("  (image)\n"),
            ContentBlock::ServerToolUse { name, input, .. } => {
                out.push_str(&format!("  ⇢ {name} {}\n", clip(&input.to_string())));
            }
            ContentBlock::WebSearchToolResult { .. } => out.push_str("    ← (search results)\n"),
        }
    }
    out
}

#[cfg(test)]
mod terminal_tests {
    use super::{for_terminal, name_for_terminal};

    #[test]
    fn names_cannot_fake_lines_or_turn_text_around() {
        assert_eq!(
            name_for_terminal("zz\r\u{1b}[1A\nfake\tline"),
            "zz\\x0d\\x1b[1A\\x0afake\\x09line"
        );
        // Right-to-left override: `txt.exe` shown as `exe.txt`.
        assert_eq!(for_terminal("a\u{202e}txt.exe"), "a\\u{202e}txt.exe");
        assert_eq!(
            name_for_terminal("x\u{2066}y\u{200b}"),
            "x\\u{2066}y\\u{200b}"
        );
    }

    #[test]
    fn escape_sequences_are_shown_not_sent() {
        let osc52 = "done\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}";
        assert_eq!(
            for_terminal(osc52),
            "done\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07"
        );
        assert_eq!(for_terminal("a\u{1b}[2Jb\rc\u{8}"), "a\\x1b[2Jb\\x0dc\\x08");
        assert_eq!(for_terminal("\u{9b}31m\u{7f}"), "\\u{9b}31m\\x7f");
    }

    #[test]
    fn text_newlines_tabs_and_unicode_pass_unchanged() {
        let plain = "Fixed it.\n\tall tests pass ✓ — ünïcode";
        assert!(matches!(
            for_terminal(plain),
            std::borrow::Cow::Borrowed(s) if s == plain
        ));
    }
}

#[cfg(test)]
mod human_tests {
    use serde_json::json;

    use super::*;
    use crate::model::ContentBlock;

    #[test]
    fn tool_calls_and_results_read_as_one_line_each() {
        let call = Message::assistant(vec![
            ContentBlock::text("Reading it."),
            ContentBlock::ToolUse {
                id: "t".into(),
                name: "Read".into(),
                input: json!({"file_path": "/w/a"}),
            },
        ]);
        assert_eq!(
            human(&call),
            "● Reading it.\n  → Read {\"file_path\":\"/w/a\"}\n"
        );
        let result = Message::user(vec![ContentBlock::tool_result(
            "t",
            "a\nb\nc\nd\ne\nf",
            true,
        )]);
        let text = human(&result);
        assert!(text.starts_with("    ✗ a\n      b\n"), "{text}");
        assert!(text.ends_with("      … 2 more lines\n"), "{text}");
    }
}
