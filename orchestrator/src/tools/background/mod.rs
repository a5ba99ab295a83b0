//! Background shells: a Bash call with `run_in_background` starts a command that outlives
//! the call, the only kind that may. The model reads its new output with TaskOutput and
//! ends it with TaskStop (Claude Code's current names and fields); every one still running
//! ends with the session.
//!
//! # Layout
//!
//! - [`BackgroundShells`] (here): the session's shells, kept in its [`ToolContext`] (so a
//!   sub-agent's shells are the session's too), started, listed, stopped.
//! - [`unread`]: the bounded buffer of output the model has not read yet.
//! - [`task_output`] and [`task_stop`]: the two tools.
//!
//! # How a background command runs
//!
//! It is an interactive exec of the session's agent, like a stdio MCP server: confined as
//! every command (Landlock, seccomp, rlimits) and, where the backend delegated cgroups, in
//! a per-command cgroup of its own that it keeps for its whole life (the agent holds the
//! slot while the exec runs), so TaskStop, the command's own end and the session's end
//! each kill its whole process tree through that cgroup however it forks. Its stdin is at
//! end of file; its stderr is joined to its stdout by the shell (`exec 2>&1`) because the
//! agent streams only an interactive command's stdout whole; it runs with `argv` (a small
//! launcher that execs bash, or sh where there is no bash), not as a session shell
//! command, so its final directory never changes the session's.
//!
//! A reader task drains the stream into [`unread::Unread`] all the time (a command is
//! never held up by a model that does not read), and dropping the shell aborts that
//! task, which ends the exec call: the agent then kills the command.

pub mod task_output;
pub mod task_stop;
pub mod unread;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use sandbox_agent::proto::{ExecRequest, ExitStatus, exec_event};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::ToolContext;
use unread::Unread;

/// The most background shells running at once in one session. Each holds one of the
/// agent's per-command cgroups (16 in all), so foreground commands and MCP servers keep
/// the rest.
pub const MAX_RUNNING: usize = 8;
/// The most shells remembered, running or ended; the oldest ended ones are forgotten
/// first.
const MAX_KEPT: usize = 64;
/// Joins stderr to stdout, then runs the command (`$1`) with bash where the sandbox has
/// it, else sh: the shell a foreground Bash call gets.
const LAUNCH: &str =
    r#"exec 2>&1; if command -v bash >/dev/null; then exec bash -c "$1"; fi; exec sh -c "$1""#;
/// How long TaskStop waits for the agent to report the command gone.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// How a background shell stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Running,
    /// Ended on its own (or was killed, see [`Shell::stopped`]), as the agent reported.
    Exited(ExitStatus),
    /// The exec stream broke (the sandbox stopped, or the call could not be kept).
    Lost(String),
}

impl Status {
    /// Claude Code's status words: running, completed, failed, killed.
    pub fn word(&self, stopped: bool) -> &'static str {
        match self {
            Self::Running => "running",
            _ if stopped => "killed",
            Self::Exited(s) if s.code == Some(0) => "completed",
            Self::Exited(s) if s.signal.is_some() || s.cancelled || s.timed_out => "killed",
            Self::Exited(_) | Self::Lost(_) => "failed",
        }
    }
}

/// What the reader task and the tools share about one shell.
#[derive(Debug)]
struct Shared {
    unread: Mutex<Unread>,
    status: Mutex<Status>,
    /// Bumped on every change (new output, end), for TaskOutput's `block`.
    changed: watch::Sender<u64>,
    /// TaskStop (or the session's end) asked for it to end.
    stopped: AtomicBool,
}

/// One background command.
#[derive(Debug)]
pub struct Shell {
    /// The id the model uses (`task_id`, `shell_id`).
    pub id: String,
    pub command: String,
    /// The agent's id for the exec (Cancel takes it).
    exec_id: String,
    shared: Arc<Shared>,
    reader: ReaderGuard,
}

/// Aborts the reader task when the shell is dropped, which ends the exec call.
#[derive(Debug)]
struct ReaderGuard(JoinHandle<()>);

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Shell {
    pub fn status(&self) -> Status {
        lock(&self.shared.status).clone()
    }

    /// Whether TaskStop or the session's end asked for it to end.
    pub fn stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::SeqCst)
    }

    pub fn is_running(&self) -> bool {
        self.status() == Status::Running
    }

    /// Takes the output not read yet, and how many bytes of it were dropped unread.
    pub fn take_unread(&self) -> (Vec<u8>, u64) {
        lock(&self.shared.unread).take()
    }

    /// Waits until the shell is no longer running, at most `timeout`, or until
    /// `interrupted` resolves. True when it ended.
    pub async fn wait_end(
        &self,
        timeout: Duration,
        interrupted: impl std::future::Future<Output = ()>,
    ) -> bool {
        let mut changes = self.shared.changed.subscribe();
        let ended = async {
            while self.is_running() {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        };
        tokio::select! {
            () = ended => {},
            () = tokio::time::sleep(timeout) => {},
            () = interrupted => {},
        }
        !self.is_running()
    }
}

/// The session's background shells.
#[derive(Debug, Default)]
pub struct BackgroundShells {
    shells: Mutex<Vec<Arc<Shell>>>,
    /// Shells started so far (the next id).
    started: AtomicU64,
}

/// Why TaskStop could not stop a shell.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StopError {
    #[error("no background task has the id `{0}`")]
    Unknown(String),
    #[error("task {id} is not running, so it cannot be stopped (status: {status})")]
    NotRunning { id: String, status: &'static str },
}

impl BackgroundShells {
    /// Starts `command` in the background; the shell, or the reason it could not start
    /// (for the model).
    pub async fn start(&self, ctx: &ToolContext, command: &str) -> Result<Arc<Shell>, String> {
        let running = self.lock().iter().filter(|s| s.is_running()).count();
        if running >= MAX_RUNNING {
            return Err(format!(
                "{running} background commands are already running (at most {MAX_RUNNING}); \
                 stop one with TaskStop first"
            ));
        }
        // Numbered per session, as Claude Code's own shells once were (`bash_1`): ids
        // only name this session's shells, so nothing is gained by guessing one.
        let id = format!("bash_{}", self.started.fetch_add(1, Ordering::Relaxed) + 1);
        let exec_id = format!("background-{}", uuid::Uuid::new_v4());
        let req = ExecRequest {
            exec_id: exec_id.clone(),
            argv: ["sh", "-c", LAUNCH, "cordon-background", command]
                .map(String::from)
                .to_vec(),
            env: ctx.env().clone(),
            // 0: the interactive maximum (a day); the session's end comes first.
            timeout_ms: 0,
            ..Default::default()
        };
        let events = ctx
            .client()
            .exec_interactive(req, futures::stream::empty())
            .await
            .map_err(|e| super::agent_error_output("Bash", &e).content)?;
        let (changed, _) = watch::channel(0u64);
        let shared = Arc::new(Shared {
            unread: Mutex::new(Unread::default()),
            status: Mutex::new(Status::Running),
            changed,
            stopped: AtomicBool::new(false),
        });
        let reader = tokio::spawn(read_events(events, shared.clone()));
        let shell = Arc::new(Shell {
            id,
            command: command.to_string(),
            exec_id,
            shared,
            reader: ReaderGuard(reader),
        });
        let mut shells = self.lock();
        shells.push(shell.clone());
        forget_oldest_ended(&mut shells);
        Ok(shell)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Shell>> {
        self.lock().iter().find(|s| s.id == id).cloned()
    }

    /// Every shell still running.
    pub fn running(&self) -> Vec<Arc<Shell>> {
        self.lock()
            .iter()
            .filter(|s| s.is_running())
            .cloned()
            .collect()
    }

    /// Ends the shell `id` and waits until the agent reports it gone (its whole cgroup
    /// killed); where the agent cannot be asked, ends the exec call, which kills it too.
    pub async fn stop(&self, ctx: &ToolContext, id: &str) -> Result<Arc<Shell>, StopError> {
        let shell = self.get(id).ok_or_else(|| StopError::Unknown(id.into()))?;
        if !shell.is_running() {
            return Err(StopError::NotRunning {
                id: id.into(),
                status: shell.status().word(shell.stopped()),
            });
        }
        shell.shared.stopped.store(true, Ordering::SeqCst);
        let asked = ctx.client().cancel(&shell.exec_id).await.unwrap_or(false);
        if !(asked && shell.wait_end(STOP_WAIT, std::future::pending()).await) {
            end_call(&shell, "stopped; the agent did not confirm the end");
        }
        Ok(shell)
    }

    /// At the session's end: ends every running shell's exec call (the agent kills each
    /// one's cgroup), before the sandbox itself goes.
    pub fn stop_all(&self) {
        for shell in self.running() {
            shell.shared.stopped.store(true, Ordering::SeqCst);
            end_call(&shell, "ended with the session");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Shell>>> {
        // Pushes and retains only: a poisoned list is still whole.
        self.shells.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Aborts the reader (dropping the exec stream, so the agent kills the command) and
/// records why.
fn end_call(shell: &Shell, why: &str) {
    shell.reader.0.abort();
    set_status(&shell.shared, Status::Lost(why.into()));
}

fn forget_oldest_ended(shells: &mut Vec<Arc<Shell>>) {
    while shells.len() > MAX_KEPT {
        match shells.iter().position(|s| !s.is_running()) {
            Some(i) => {
                shells.remove(i);
            }
            None => break,
        }
    }
}

/// Drains the exec stream into the shell's buffer until it ends.
async fn read_events(
    events: impl futures::Stream<
        Item = Result<sandbox_agent::proto::ExecEvent, sandbox_agent::AgentError>,
    >,
    shared: Arc<Shared>,
) {
    let mut events = std::pin::pin!(events);
    let end = loop {
        match events.next().await {
            Some(Ok(event)) => match event.event {
                Some(exec_event::Event::Output(chunk)) => {
                    lock(&shared.unread).push(&chunk.data);
                    shared.changed.send_modify(|n| *n = n.wrapping_add(1));
                }
                Some(exec_event::Event::Exit(status)) => break Status::Exited(status),
                None => {}
            },
            Some(Err(e)) => break Status::Lost(format!("its connection broke: {}", e.message)),
            None => break Status::Lost("its output stream ended without an exit status".into()),
        }
    };
    set_status(&shared, end);
}

/// Records how the shell ended, once (the first end wins).
fn set_status(shared: &Shared, end: Status) {
    {
        let mut status = lock(&shared.status);
        if *status == Status::Running {
            *status = end;
        }
    }
    shared.changed.send_modify(|n| *n = n.wrapping_add(1));
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every holder makes one whole update; a poisoned value is still consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The task id a TaskOutput or TaskStop call names: `task_id`, else the field of the tool's
/// older name (`old_field`); an error result naming `tool` when neither is given.
pub(crate) fn task_id<'a>(
    input: &'a serde_json::Value,
    old_field: &str,
    tool: &str,
) -> Result<&'a str, crate::tools::ToolOutput> {
    match (
        crate::tools::str_field(input, "task_id"),
        crate::tools::str_field(input, old_field),
    ) {
        ("", "") => Err(crate::tools::ToolOutput::error(format!(
            "{tool}: give the task's `task_id`"
        ))),
        ("", old) => Ok(old),
        (id, _) => Ok(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_are_claude_codes() {
        let exited = |code, signal| {
            Status::Exited(ExitStatus {
                code,
                signal,
                ..Default::default()
            })
        };
        assert_eq!(Status::Running.word(true), "running");
        assert_eq!(exited(Some(0), None).word(false), "completed");
        assert_eq!(exited(Some(2), None).word(false), "failed");
        assert_eq!(exited(None, Some(9)).word(false), "killed");
        assert_eq!(exited(Some(0), None).word(true), "killed");
        assert_eq!(Status::Lost("gone".into()).word(false), "failed");
    }
}
