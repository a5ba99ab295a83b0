//! A stdio MCP server inside the sandbox, as a byte pipe for rmcp: the server runs as an
//! interactive exec of the session's agent (confined like every Bash command: Landlock,
//! seccomp, its own cgroup), its stdin fed from what rmcp writes and its stdout streamed
//! back into what rmcp reads. Stderr is kept (its tail) for error messages, never parsed.
//!
//! Dropping the [`SandboxPipe`] ends the exec call, and the agent kills the server's whole
//! process tree.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use sandbox_agent::AgentError;
use sandbox_agent::proto::{ExecRequest, ExitStatus, exec_event, output_chunk};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::tools::ToolContext;

/// Bytes buffered in each direction between rmcp and the exec stream.
const PIPE_BYTES: usize = 64 * 1024;
/// Stderr lines kept for an error message.
const STDERR_LINES: usize = 20;

/// What the server left behind: its exit and the tail of its stderr.
#[derive(Debug, Default)]
pub struct Exit {
    pub status: Option<ExitStatus>,
    pub stderr: VecDeque<String>,
    pub stream_error: Option<String>,
}

impl Exit {
    /// "exited with code 1; stderr: ..." for the model and `mcp_status`.
    pub fn describe(&self) -> String {
        let how = match (&self.status, &self.stream_error) {
            (Some(s), _) if s.timed_out => "was stopped at its time limit".to_string(),
            (Some(s), _) if s.signal.is_some() => {
                format!("was killed by signal {}", s.signal.unwrap_or_default())
            }
            (Some(s), _) => format!("exited with code {}", s.code.unwrap_or(-1)),
            (None, Some(e)) => format!("lost its connection: {e}"),
            (None, None) => "is still running".to_string(),
        };
        let tail: Vec<&str> = self.stderr.iter().map(String::as_str).collect();
        if tail.is_empty() {
            how
        } else {
            format!("{how}; its stderr ended with:\n{}", tail.join("\n"))
        }
    }
}

/// A running server's pipe: rmcp reads and writes `io`; the tasks carry the bytes.
pub struct SandboxPipe {
    pub read: ReadHalf<DuplexStream>,
    pub write: WriteHalf<DuplexStream>,
    pub exit: Arc<Mutex<Exit>>,
    pub guard: PipeGuard,
}

/// Ends the exec (killing the server) when dropped.
pub struct PipeGuard(Vec<JoinHandle<()>>);

impl Drop for PipeGuard {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Starts `command args` in the session's sandbox with `env` on top of the session's.
pub async fn spawn(
    ctx: &ToolContext,
    id: &str,
    command: &str,
    args: &[String],
    env: HashMap<String, String>,
) -> Result<SandboxPipe, AgentError> {
    let mut all_env = ctx.env().clone();
    all_env.extend(env);
    let req = ExecRequest {
        exec_id: id.to_string(),
        argv: std::iter::once(command.to_string())
            .chain(args.iter().cloned())
            .collect(),
        env: all_env,
        // Workspace-relative commands (`./server.py`) resolve against the workspace.
        cwd: ctx.workspace().display().to_string(),
        ..Default::default()
    };
    let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>(16);
    let input = tokio_stream::wrappers::ReceiverStream::new(stdin_rx);
    let events = ctx.client().exec_interactive(req, input).await?;
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let (read, write) = tokio::io::split(theirs);
    let (mut from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let exit = Arc::new(Mutex::new(Exit::default()));
    let writer = tokio::spawn(async move {
        let mut buf = vec![0u8; PIPE_BYTES];
        // Ends when rmcp closes its side (the server's stdin then closes) or the exec is gone.
        while let Ok(n) = from_rmcp.read(&mut buf).await {
            if n == 0 || stdin_tx.send(buf[..n].to_vec()).await.is_err() {
                break;
            }
        }
    });
    let recorded = exit.clone();
    let reader = tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        let mut err_line = Vec::new();
        while let Some(event) = events.next().await {
            match event.map(|e| e.event) {
                Ok(Some(exec_event::Event::Output(chunk))) => {
                    if chunk.stream == output_chunk::Stream::Stdout as i32 {
                        if to_rmcp.write_all(&chunk.data).await.is_err() {
                            break;
                        }
                    } else {
                        keep_stderr(&recorded, &mut err_line, &chunk.data);
                    }
                }
                Ok(Some(exec_event::Event::Exit(status))) => {
                    lock(&recorded).status = Some(status);
                    break;
                }
                Ok(None) => {}
                Err(e) => {
                    lock(&recorded).stream_error = Some(e.message.clone());
                    break;
                }
            }
        }
        // rmcp sees end of file: every request in flight fails at once.
        let _ = to_rmcp.shutdown().await;
    });
    Ok(SandboxPipe {
        read,
        write,
        exit,
        guard: PipeGuard(vec![writer, reader]),
    })
}

fn lock(exit: &Mutex<Exit>) -> std::sync::MutexGuard<'_, Exit> {
    // Holds plain data updated in single steps: a poisoned lock is still consistent.
    exit.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Splits stderr into lines and keeps the last few.
fn keep_stderr(exit: &Mutex<Exit>, partial: &mut Vec<u8>, data: &[u8]) {
    partial.extend_from_slice(data);
    let mut guard = lock(exit);
    while let Some(at) = partial.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = partial.drain(..=at).collect();
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        if text.is_empty() {
            continue;
        }
        if guard.stderr.len() == STDERR_LINES {
            guard.stderr.pop_front();
        }
        guard.stderr.push_back(text.chars().take(500).collect());
    }
    if partial.len() > 4096 {
        partial.clear();
    }
}
