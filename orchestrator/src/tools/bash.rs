//! Bash: one command in a fresh confined process (the agent runs it with `bash -c`). The
//! working directory carries over between calls; output is stdout and stderr interleaved,
//! cut by the agent past 30,000 characters with the whole kept in a file. An interrupt
//! cancels the command's whole process group. With `run_in_background` the command is
//! started as one of the session's background shells ([`super::background`]) and the call
//! returns its id at once.

use futures::StreamExt;
use sandbox_agent::limits::{DEFAULT_EXEC_TIMEOUT_MS, MAX_EXEC_TIMEOUT_MS};
use sandbox_agent::proto::{ExecRequest, ExitStatus, exec_event};
use sandbox_agent::{AgentError, ErrorCode};
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, agent_error_output, bool_field, str_field, u64_field};

pub struct BashTool;

const DESCRIPTION: &str = "Runs a shell command (bash) inside the sandbox and returns its \
output, stdout and stderr interleaved. Each call is a new process: the working directory \
carries over to the next call (a final `cd` sticks), exported variables do not. `timeout` \
is in milliseconds: default 120000 (2 minutes), at most 600000 (10 minutes); a command still \
running then is killed with all its children. Output past 30,000 characters is cut and the \
whole output saved to a file whose path the result gives (read it with Read or search it \
with Grep). A non-zero exit code is reported as an error. The sandbox may deny network \
access and writes outside the workspace. Prefer Read, Edit, Write, Glob and Grep over \
cat, sed, echo, find and grep. `description` is a short note of what the command does, for \
people watching. `run_in_background: true` starts the command and returns at once with a \
task id, for servers, watchers and long builds: read its new output with TaskOutput, stop \
it with TaskStop; it does not change the working directory, gets no `timeout`, and ends \
with the session at the latest. Do not add `&` to a command for this.";

#[tonic::async_trait]
impl Tool for BashTool {
    fn name(&self) -> &'static str {
        "Bash"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1,
                    "description": "The command to run"},
                "timeout": {"type": "integer", "minimum": 1,
                    "description": "Milliseconds before the command is killed (default 120000, at most 600000)"},
                "description": {"type": "string",
                    "description": "A few words saying what the command does"},
                "run_in_background": {"type": "boolean",
                    "description": "Start it in the background and return its task id at once"}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Exec
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        if bool_field(&input, "run_in_background") == Some(true) {
            return start_in_background(ctx, str_field(&input, "command")).await;
        }
        let (timeout_ms, capped) = effective_timeout(u64_field(&input, "timeout"));
        let req = ExecRequest {
            exec_id: uuid::Uuid::new_v4().to_string(),
            command: str_field(&input, "command").to_string(),
            timeout_ms,
            env: ctx.env().clone(),
            ..Default::default()
        };
        match run(ctx, req).await {
            Ok((output, status)) => {
                let mut out = render(&output, &status, timeout_ms);
                if capped {
                    out.content = format!(
                        "[timeout capped at {MAX_EXEC_TIMEOUT_MS} ms (10 minutes)]\n{}",
                        out.content
                    );
                }
                out
            }
            Err(err) => agent_error_output("Bash", &err),
        }
    }
}

/// Starts `command` as a background shell; the result names its id.
async fn start_in_background(ctx: &ToolContext, command: &str) -> ToolOutput {
    match ctx.background().start(ctx, command).await {
        Ok(shell) => ToolOutput::ok(format!(
            "Command running in background with ID: {id}. Read its new output with \
             TaskOutput (task_id \"{id}\"); stop it with TaskStop.",
            id = shell.id
        )),
        Err(why) => ToolOutput::error(format!("Bash: {why}")),
    }
}

/// The timeout to ask for, and whether the model's request was over the maximum.
pub fn effective_timeout(requested: Option<u64>) -> (u64, bool) {
    match requested {
        None | Some(0) => (DEFAULT_EXEC_TIMEOUT_MS, false),
        Some(ms) if ms > MAX_EXEC_TIMEOUT_MS => (MAX_EXEC_TIMEOUT_MS, true),
        Some(ms) => (ms, false),
    }
}

/// Runs `req` to its exit status, cancelling it if the session is interrupted meanwhile.
async fn run(ctx: &ToolContext, req: ExecRequest) -> Result<(Vec<u8>, ExitStatus), AgentError> {
    let exec_id = req.exec_id.clone();
    let mut interrupts = ctx.interrupt_signal();
    // `listening`: an interrupter still exists. `cancelling`: interrupted, and the agent
    // has not yet confirmed it found the command (it may not have registered it yet).
    let mut listening = true;
    let mut cancelling = false;
    let stream = ctx.client().exec(req).await?;
    let mut stream = std::pin::pin!(stream);
    // Bounded: the agent streams at most the output limit plus its marker.
    let mut output = Vec::new();
    loop {
        tokio::select! {
            event = stream.next() => match event {
                Some(event) => match event?.event {
                    Some(exec_event::Event::Output(chunk)) => output.extend_from_slice(&chunk.data),
                    Some(exec_event::Event::Exit(status)) => return Ok((output, status)),
                    None => {}
                },
                None => {
                    return Err(AgentError::new(
                        ErrorCode::Io,
                        "the command's output stream ended without an exit status",
                    ));
                }
            },
            changed = interrupts.changed(), if listening && !cancelling => match changed {
                Ok(()) => cancelling = !cancel(ctx, &exec_id).await,
                Err(_) => listening = false,
            },
            () = tokio::time::sleep(CANCEL_RETRY), if cancelling => {
                cancelling = !cancel(ctx, &exec_id).await;
            }
        }
    }
}

/// How often a cancel the agent did not act on yet is sent again.
const CANCEL_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// Asks the agent to kill the command; true once it did (the agent then still sends the
/// Exit event, marked cancelled). A failed cancel is retried; the timeout bounds it all.
async fn cancel(ctx: &ToolContext, exec_id: &str) -> bool {
    match ctx.client().cancel(exec_id).await {
        Ok(found) => found,
        Err(err) => {
            tracing::warn!(%exec_id, error = %err, "cancelling a command failed");
            false
        }
    }
}

/// The `tool_result` for a finished command.
pub fn render(output: &[u8], status: &ExitStatus, timeout_ms: u64) -> ToolOutput {
    let mut text = String::from_utf8_lossy(output).trim_end().to_string();
    let mut notes = Vec::new();
    if status.truncated
        && !status.full_output_path.is_empty()
        && !text.contains(&status.full_output_path)
    {
        notes.push(format!("Full output: {}", status.full_output_path));
    }
    let failed = if status.timed_out {
        notes.push(format!("Command timed out after {}", seconds(timeout_ms)));
        true
    } else if status.cancelled {
        notes.push("Command was interrupted".to_string());
        true
    } else if let Some(signal) = status.signal {
        notes.push(format!("Command was killed by signal {signal}"));
        true
    } else {
        match status.code {
            Some(0) => false,
            Some(code) => {
                notes.push(format!("Exit code {code}"));
                true
            }
            None => {
                notes.push("Command ended without an exit code".to_string());
                true
            }
        }
    };
    if text.is_empty() && notes.is_empty() {
        text = "(no output)".to_string();
    }
    for note in notes {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&note);
    }
    ToolOutput {
        content: text,
        is_error: failed,
        ..ToolOutput::default()
    }
}

/// "90s", "1.5s": milliseconds as seconds, without a needless fraction.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        let fraction = format!("{:03}", ms % 1000);
        format!("{}.{}s", ms / 1000, fraction.trim_end_matches('0'))
    }
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
