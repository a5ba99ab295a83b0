//! TaskOutput: the new output of a background shell since the last read, and how it
//! stands (Claude Code's current name and fields; its older BashOutput, with `bash_id` and
//! `filter`, is accepted too). With `block` (the default) it first waits for the command
//! to end, at most `timeout` milliseconds.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Shell, Status};
use crate::tools::{Tool, ToolContext, ToolOutput, bool_field, str_field, u64_field};

pub const NAME: &str = "TaskOutput";
/// Claude Code's earlier name for it.
pub const OLD_NAME: &str = "BashOutput";

/// Characters of new output one result carries; the newest are kept.
const MAX_CHARS: usize = 30_000;
const DEFAULT_TIMEOUT_MS: u64 = 30_000;
const MAX_TIMEOUT_MS: u64 = 600_000;

const DESCRIPTION: &str = "Reads a background command (one started by Bash with \
run_in_background) by its `task_id`: the output it printed since the last TaskOutput call \
for it (stdout and stderr together), and its status: running, completed, failed or killed, \
with the exit code once it ended. `block` (default true) first waits for the command to \
end, at most `timeout` milliseconds (default 30000, at most 600000); use block=false to \
look at a server or watcher that keeps running. `filter`, a regular expression, keeps only \
the new lines that match (the others are discarded). At most the newest 30,000 characters \
of new output are returned; older unread output is skipped and counted.";

#[derive(Debug, Default)]
pub struct TaskOutputTool;

#[tonic::async_trait]
impl Tool for TaskOutputTool {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "task_id": {"type": "string", "minLength": 1,
                    "description": "The background task's id, as Bash returned it"},
                "block": {"type": "boolean",
                    "description": "Wait for the task to end first (default true)"},
                "timeout": {"type": "integer", "minimum": 0, "maximum": MAX_TIMEOUT_MS,
                    "description": "Most milliseconds to wait when blocking (default 30000)"},
                "filter": {"type": "string",
                    "description": "Regular expression: only new lines matching it are returned"},
                "bash_id": {"type": "string", "minLength": 1,
                    "description": "Deprecated: use task_id"}
            },
            // task_id, or its older name: the call checks that one is there.
            "required": [],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn uses_sandbox(&self) -> bool {
        // It reads what the session's reader tasks already gathered.
        false
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let id = match super::task_id(&input, "bash_id", NAME) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        let filter = match str_field(&input, "filter") {
            "" => None,
            f => match regex::Regex::new(f) {
                Ok(re) => Some(re),
                Err(e) => return ToolOutput::error(format!("TaskOutput: `filter`: {e}")),
            },
        };
        let Some(shell) = ctx.background().get(id) else {
            return ToolOutput::error(format!("TaskOutput: no background task has the id `{id}`"));
        };
        let mut retrieval = "success";
        if bool_field(&input, "block").unwrap_or(true) && shell.is_running() {
            let timeout = u64_field(&input, "timeout").unwrap_or(DEFAULT_TIMEOUT_MS);
            let mut interrupts = ctx.interrupt_signal();
            let interrupted = async move {
                let _ = interrupts.changed().await;
            };
            if !shell
                .wait_end(
                    Duration::from_millis(timeout.min(MAX_TIMEOUT_MS)),
                    interrupted,
                )
                .await
            {
                retrieval = "timeout";
            }
        } else if shell.is_running() {
            retrieval = "not_ready";
        }
        ToolOutput::ok(render(&shell, retrieval, filter.as_ref()))
    }
}

/// The result: Claude Code's tagged layout, then the new output.
fn render(shell: &Shell, retrieval: &str, filter: Option<&regex::Regex>) -> String {
    // Status first: output taken after it was read as ended is then surely all of it.
    let status = shell.status();
    let (bytes, dropped) = shell.take_unread();
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if let Some(re) = filter {
        text = text
            .lines()
            .filter(|l| re.is_match(l))
            .map(|l| format!("{l}\n"))
            .collect();
    }
    let (text, skipped_chars) = newest_chars(&text, MAX_CHARS);
    let mut out = format!(
        "<retrieval_status>{retrieval}</retrieval_status>\n<task_id>{}</task_id>\n\
         <task_type>local_bash</task_type>\n<status>{}</status>\n",
        shell.id,
        status.word(shell.stopped())
    );
    match &status {
        Status::Exited(s) => {
            if let Some(code) = s.code {
                out.push_str(&format!("<exit_code>{code}</exit_code>\n"));
            } else if let Some(signal) = s.signal {
                out.push_str(&format!("<signal>{signal}</signal>\n"));
            }
        }
        Status::Lost(why) => out.push_str(&format!("<note>{why}</note>\n")),
        Status::Running => {}
    }
    if dropped > 0 || skipped_chars > 0 {
        out.push_str(&format!(
            "<note>older unread output skipped: {dropped} bytes dropped unread, \
             {skipped_chars} characters cut here</note>\n"
        ));
    }
    if text.trim().is_empty() {
        out.push_str("<output>(no new output)</output>");
    } else {
        out.push_str(&format!("<output>\n{}\n</output>", text.trim_end()));
    }
    out
}

/// The last `max` characters of `text`, and how many came before them.
fn newest_chars(text: &str, max: usize) -> (&str, usize) {
    let total = text.chars().count();
    if total <= max {
        return (text, 0);
    }
    let skip = total - max;
    let start = text.char_indices().nth(skip).map_or(text.len(), |(i, _)| i);
    (&text[start..], skip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_characters_are_kept_on_a_char_boundary() {
        assert_eq!(newest_chars("abc", 5), ("abc", 0));
        assert_eq!(newest_chars("aébcd", 3), ("bcd", 2));
        assert_eq!(newest_chars("abéé", 2), ("éé", 2));
    }
}
