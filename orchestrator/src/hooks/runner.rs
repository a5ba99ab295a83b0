//! Running one hook handler.
//!
//! - Managed (operator) command hooks run on the host: `sh -c COMMAND` in the workspace,
//!   the input JSON on stdin, in their own process group, killed as a group at the timeout.
//! - Every other command hook runs inside the session's sandbox through the agent's exec
//!   API (argv `sh -c COMMAND`, so a `cd` in a hook never moves the model's Bash directory):
//!   the same Landlock, seccomp, namespaces and limits as a Bash call. The agent kills its
//!   process tree at the timeout.
//! - Callbacks go to the registered [`HookCallbacks`] client.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures::StreamExt;
use sandbox_agent::proto::{ExecRequest, exec_event, output_chunk};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::output::{self, HookOutcome, HookRun, RunStatus};
use super::{Handler, HookCallbacks, HookEntry, HookEvents, RunsOn};
use crate::tools::ToolContext;

/// Most bytes of a hook's stdout or stderr kept.
const MAX_HOOK_OUTPUT: usize = 256 * 1024;
/// Extra wait past a sandboxed hook's timeout for the agent to report the kill.
const SANDBOX_SLACK: Duration = Duration::from_secs(10);

/// Runs hook handlers for one session.
pub struct HookRunner {
    /// The session's sandbox (None: sandboxed hooks cannot run, and say so).
    sandbox: Option<ToolContext>,
    workspace: PathBuf,
    callbacks: RwLock<Option<Arc<dyn HookCallbacks>>>,
    events: RwLock<Option<Arc<dyn HookEvents>>>,
}

impl std::fmt::Debug for HookRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookRunner")
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl HookRunner {
    pub fn new(sandbox: Option<ToolContext>, workspace: impl Into<PathBuf>) -> HookRunner {
        HookRunner {
            sandbox,
            workspace: workspace.into(),
            callbacks: RwLock::new(None),
            events: RwLock::new(None),
        }
    }

    /// Where callback hooks go (the Agent SDK client, once it has initialised).
    pub fn set_callbacks(&self, callbacks: Arc<dyn HookCallbacks>) {
        *self
            .callbacks
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(callbacks);
    }

    /// Who hears of each command hook's start and end.
    pub fn set_events(&self, events: Arc<dyn HookEvents>) {
        *self.events.write().unwrap_or_else(PoisonError::into_inner) = Some(events);
    }

    /// Runs `entry` with `input` on stdin and interprets the result.
    pub async fn run(
        &self,
        entry: &HookEntry,
        input: &Value,
        tool_use_id: Option<&str>,
    ) -> HookOutcome {
        match &entry.handler {
            Handler::Command {
                command,
                timeout,
                runs_on,
            } => {
                let stdin = serde_json::to_vec(input).unwrap_or_default();
                let events = self
                    .events
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let hook_id = uuid::Uuid::new_v4().to_string();
                if let Some(events) = &events {
                    events.started(&hook_id, entry);
                }
                let run = match runs_on {
                    RunsOn::Host => self.on_host(command, stdin, *timeout, &entry.env).await,
                    RunsOn::Sandbox => self.in_sandbox(command, stdin, *timeout, &entry.env).await,
                };
                if let Some(events) = &events {
                    events.responded(&hook_id, entry, &run);
                }
                tracing::debug!(hook = %entry.describe(), status = ?run.status, "hook ran");
                output::interpret(entry.event, &run)
            }
            Handler::Callback { id } => {
                let callbacks = self
                    .callbacks
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let Some(callbacks) = callbacks else {
                    return notice(format!("callback {id}: no client registered callbacks"));
                };
                match callbacks
                    .call(id, input.clone(), tool_use_id.map(str::to_string))
                    .await
                {
                    Ok(value) => output::from_json(entry.event, &value),
                    Err(e) => notice(format!("callback {id} failed: {e}")),
                }
            }
        }
    }

    /// An operator's hook, on the host.
    async fn on_host(
        &self,
        command: &str,
        stdin: Vec<u8>,
        timeout: Duration,
        env: &[(String, String)],
    ) -> HookRun {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(command)
            .current_dir(&self.workspace)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("CLAUDE_PROJECT_DIR", &self.workspace)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            // Its own group, so the timeout kills everything it started.
            .process_group(0)
            .kill_on_drop(true);
        // An operator's hook runs on every CPU this process was given, not on the pin of
        // the session thread that starts it.
        let mut child = match sandbox_agent::affinity::with_every_cpu(|| cmd.spawn()) {
            Ok(child) => child,
            Err(e) => return failed(format!("cannot start /bin/sh: {e}")),
        };
        let pid = child.id();
        let (Some(mut child_in), Some(out), Some(err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return failed("the hook's pipes were not set up".into());
        };
        let feed = async move {
            // A hook that does not read its input is fine: ignore a broken pipe.
            let _ = child_in.write_all(&stdin).await;
            drop(child_in);
        };
        let work = async {
            let (_, stdout, stderr, status) =
                tokio::join!(feed, read_capped(out), read_capped(err), child.wait());
            (stdout, stderr, status)
        };
        match tokio::time::timeout(timeout, work).await {
            Ok((stdout, stderr, Ok(status))) => HookRun {
                status: match status.code() {
                    Some(code) => RunStatus::Exited(code),
                    None => RunStatus::Failed(format!("ended by a signal ({status})")),
                },
                stdout,
                stderr,
            },
            Ok((stdout, stderr, Err(e))) => HookRun {
                status: RunStatus::Failed(format!("waiting for it failed: {e}")),
                stdout,
                stderr,
            },
            Err(_) => {
                if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.wait().await;
                HookRun {
                    status: RunStatus::TimedOut,
                    stdout: String::new(),
                    stderr: String::new(),
                }
            }
        }
    }

    /// A repository's or user's hook, inside the sandbox.
    async fn in_sandbox(
        &self,
        command: &str,
        stdin: Vec<u8>,
        timeout: Duration,
        extra_env: &[(String, String)],
    ) -> HookRun {
        let Some(sandbox) = &self.sandbox else {
            return failed("no sandbox to run it in".into());
        };
        // A sandbox that died since the last call is replaced first, as for a tool call.
        if let Err(why) = sandbox.ensure_sandbox().await {
            return failed(why);
        }
        if stdin.len() > sandbox_agent::limits::MAX_STDIN_BYTES {
            return failed(format!(
                "its input ({} bytes) is over the {} byte limit",
                stdin.len(),
                sandbox_agent::limits::MAX_STDIN_BYTES
            ));
        }
        let timeout_ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, sandbox_agent::limits::MAX_EXEC_TIMEOUT_MS);
        let req = ExecRequest {
            exec_id: format!("hook-{}", uuid::Uuid::new_v4()),
            argv: vec!["/bin/sh".into(), "-c".into(), command.into()],
            timeout_ms,
            cwd: self.workspace.display().to_string(),
            env: {
                let mut env = sandbox.env().clone();
                env.extend(extra_env.iter().cloned());
                env.insert(
                    "CLAUDE_PROJECT_DIR".to_string(),
                    self.workspace.display().to_string(),
                );
                env
            },
            output_limit: MAX_HOOK_OUTPUT as u64,
            stdin,
            ..Default::default()
        };
        let mut client = sandbox.client();
        let work = async move {
            let stream = client.exec(req).await.map_err(|e| e.to_string())?;
            let mut stream = std::pin::pin!(stream);
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            while let Some(event) = stream.next().await {
                match event.map_err(|e| e.to_string())?.event {
                    Some(exec_event::Event::Output(chunk)) => {
                        let buf = if chunk.stream == output_chunk::Stream::Stderr as i32 {
                            &mut stderr
                        } else {
                            &mut stdout
                        };
                        if buf.len() < MAX_HOOK_OUTPUT {
                            buf.extend_from_slice(&chunk.data);
                        }
                    }
                    Some(exec_event::Event::Exit(status)) => {
                        let status = if status.timed_out {
                            RunStatus::TimedOut
                        } else if let Some(code) = status.code {
                            RunStatus::Exited(code)
                        } else {
                            RunStatus::Failed(format!(
                                "ended by signal {}",
                                status.signal.unwrap_or_default()
                            ))
                        };
                        return Ok(HookRun {
                            status,
                            stdout: String::from_utf8_lossy(&stdout).into_owned(),
                            stderr: String::from_utf8_lossy(&stderr).into_owned(),
                        });
                    }
                    None => {}
                }
            }
            Err("the sandbox ended the hook's output without an exit status".to_string())
        };
        match tokio::time::timeout(timeout + SANDBOX_SLACK, work).await {
            Ok(Ok(run)) => run,
            Ok(Err(e)) => failed(format!("the sandbox could not run it: {e}")),
            Err(_) => HookRun {
                status: RunStatus::TimedOut,
                stdout: String::new(),
                stderr: String::new(),
            },
        }
    }
}

fn failed(why: String) -> HookRun {
    HookRun {
        status: RunStatus::Failed(why),
        stdout: String::new(),
        stderr: String::new(),
    }
}

fn notice(text: String) -> HookOutcome {
    HookOutcome {
        notice: Some(text),
        ..HookOutcome::default()
    }
}

/// Reads a pipe to its end, keeping at most [`MAX_HOOK_OUTPUT`] bytes.
async fn read_capped(mut pipe: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if kept.len() < MAX_HOOK_OUTPUT {
                    kept.extend_from_slice(&buf[..n]);
                }
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}
