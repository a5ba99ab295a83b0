//! `cordon sandbox` on the local backend without the agent: the sandbox's init runs the
//! one command itself, confined as the agent confines each of its commands, and no RPC
//! is spoken (`sandbox_agent::launch::oneshot` says how, and why it is the same
//! confinement).
//!
//! Only where that is equivalent ([`equivalent`]): no network egress (the egress bridge
//! lives in the agent) and no workspace disk budget (the agent measures it around each
//! command). Everything else starts the agent and runs the command over RPC, unchanged.
//!
//! The command's stdout and stderr are pipes this process copies to the caller's
//! writers as the output comes; stdin is /dev/null; the host's terminal never reaches
//! the sandbox. How the command ended comes back on a third pipe, written by the init
//! (an empty one: the command never started, and the launcher's log says why). The run
//! ends when the sandbox has no process left and the launcher's teardown (kill of the
//! pid namespace, git vetting, placeholders, setuid sweep, cgroup removal) is done. A
//! timeout or an interrupt closes the lifeline first: the launcher kills the sandbox,
//! then tears down the same way. Unlike an exec through the agent, the output is never
//! capped: it goes to the user's terminal, not to a model's context.
//!
//! `cordon sandbox` takes [`LocalBackend::run_oneshot_inline`]: the same run with this
//! process as the launcher, before any runtime starts (`sandbox_agent::launch::inline`):
//! no launcher process to start, which was a fifth of the whole. [`Run`] (a launcher
//! process, output copied on a runtime) serves callers that already run one.

use std::future::Future;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use sandbox_agent::exec::read_some;
use sandbox_agent::launch::oneshot::{CommandEnd, OneShot};
use sandbox_agent::launch::{LaunchError, inline};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;

use super::{LocalBackend, LocalHandle, STOP_TIMEOUT, SandboxError, SandboxHandle, SandboxSpec};

/// The longest status line the init writes, with room to spare.
const MAX_STATUS_BYTES: usize = 64;

/// Whether running `spec`'s command without the agent is equivalent to running it
/// through the agent.
pub fn equivalent(spec: &SandboxSpec) -> bool {
    spec.egress.is_none() && !spec.network && spec.limits.and_then(|l| l.disk_bytes).is_none()
}

/// The one command: an argv and its working directory (inside the sandbox).
#[derive(Debug, Clone)]
pub struct Command {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
}

/// The three pipes of a one-shot run, as made before the launcher starts.
pub(super) struct Ends {
    read: [OwnedFd; 3],
    /// Handed to the launcher; dropped here once it runs.
    _write: [OwnedFd; 3],
}

impl Ends {
    /// The read ends and the write ends, for a launcher in this very process.
    fn into_inline(self) -> inline::Pipes {
        inline::Pipes {
            read: self.read,
            write: self._write,
        }
    }

    pub(super) fn into_read_ends(self) -> Pipes {
        let [stdout, stderr, status] = self.read;
        Pipes {
            stdout,
            stderr,
            status,
        }
    }
}

/// This process's ends of the command's stdout and stderr and of the status pipe.
#[derive(Debug)]
pub struct Pipes {
    stdout: OwnedFd,
    stderr: OwnedFd,
    status: OwnedFd,
}

impl Command {
    /// Makes the pipes (close-on-exec: only the launcher inherits the write ends, see
    /// `LocalBackend::spawn_in`) and the launch config's part naming them.
    pub(super) fn pipes(&self) -> Result<(OneShot, Ends), SandboxError> {
        let pipe = || {
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| super::setup("creating the command's pipes")(e.into()))
        };
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (st_r, st_w) = pipe()?;
        let shot = OneShot {
            argv: self.argv.clone(),
            cwd: self.cwd.clone(),
            stdout_fd: out_w.as_raw_fd(),
            stderr_fd: err_w.as_raw_fd(),
            status_fd: st_w.as_raw_fd(),
        };
        let ends = Ends {
            read: [out_r, err_r, st_r],
            _write: [out_w, err_w, st_w],
        };
        Ok((shot, ends))
    }
}

/// How a one-shot run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The command ended on its own (exit code or signal).
    Command(CommandEnd),
    /// It ran past the timeout and was killed with everything it started.
    TimedOut,
    /// The caller's interrupt fired; the sandbox was killed.
    Interrupted,
}

/// A started one-shot sandbox.
#[derive(Debug)]
pub struct Run {
    handle: LocalHandle,
    pipes: Pipes,
}

impl LocalBackend {
    /// Starts a sandbox for `spec` whose init runs `command` instead of the agent. The
    /// caller checked [`equivalent`] (the launcher refuses egress and disk budgets too).
    pub fn start_oneshot(
        &self,
        spec: &SandboxSpec,
        command: &Command,
    ) -> Result<Run, SandboxError> {
        let (handle, _, pipes) = self.spawn(spec, Some(command))?;
        let pipes = pipes.ok_or_else(|| {
            super::setup("starting the command")(std::io::Error::other("no pipes"))
        })?;
        Ok(Run { handle, pipes })
    }
}

impl LocalBackend {
    /// Runs `command` under `spec` with this process as the sandbox's launcher: no
    /// launcher process and no runtime (`sandbox_agent::launch::inline` says how, and what
    /// stands in for the launcher should this process die). The command's output goes to
    /// this process's stdout and stderr as it comes; past `timeout`, or on SIGINT, SIGTERM
    /// or SIGHUP, the sandbox is killed. Returns once the teardown is done and the
    /// session's state is gone.
    ///
    /// This process must have one thread (refused otherwise): call it before any runtime
    /// starts. The caller checked [`equivalent`].
    pub fn run_oneshot_inline(
        &self,
        spec: &SandboxSpec,
        command: &Command,
        timeout: Duration,
    ) -> Result<Ended, SandboxError> {
        let (workspace, additional, state_dir) = self.prepare_state(spec)?;
        let mut config = self.launch_config(spec, &workspace, &additional, &state_dir);
        let ran = command.pipes().and_then(|(shot, ends)| {
            config.oneshot = Some(shot);
            let (_, log) = Self::record_config(&config, &state_dir)?;
            let mut stripped = |p: &std::path::Path| {
                tracing::warn!(
                    path = %p.display(),
                    "stripped a setuid/setgid bit made during the session"
                );
            };
            inline::run(
                &config,
                ends.into_inline(),
                &OwnedFd::from(log),
                &self.agent_bin,
                timeout,
                &mut stripped,
            )
            .map_err(launch_error)
        });
        match &ran {
            // The teardown ran in full: only the records and the log are left.
            Ok(_) => {
                let _ = std::fs::remove_dir_all(&state_dir);
            }
            Err(_) => sandbox_agent::launch::state::cleanup_session(&state_dir),
        }
        ran.map(|end| match end {
            inline::End::Command(end) => Ended::Command(end),
            inline::End::TimedOut => Ended::TimedOut,
            inline::End::Interrupted => Ended::Interrupted,
        })
    }
}

/// What a failed in-process launch says: the sandbox's own setup error (a program that
/// does not exist, say) as the command's failure, anything else as the start's.
fn launch_error(e: LaunchError) -> SandboxError {
    match e {
        LaunchError::Setup(why) => super::setup("running the command")(std::io::Error::other(why)),
        e => super::setup("starting the sandbox")(std::io::Error::other(e.to_string())),
    }
}

fn receiver(fd: OwnedFd) -> Result<Option<pipe::Receiver>, SandboxError> {
    pipe::Receiver::from_owned_fd(fd)
        .map(Some)
        .map_err(super::setup("reading the command's output"))
}

impl Run {
    /// Copies the command's output to `out` and `err` until the sandbox has no process
    /// left, waits for the teardown, and says how the command ended. Past `timeout`, or
    /// when `interrupt` resolves, the sandbox is killed (and torn down) first.
    pub async fn finish(
        self,
        out: &mut (dyn AsyncWrite + Unpin + Send),
        err: &mut (dyn AsyncWrite + Unpin + Send),
        timeout: Duration,
        interrupt: impl Future<Output = ()>,
    ) -> Result<Ended, SandboxError> {
        let Run { handle, pipes } = self;
        let copied = copy_until_gone(pipes, out, err, timeout, interrupt).await;
        let status = match copied {
            Ok(Copied::Status(status)) => status,
            Ok(Copied::Stopped(ended)) => {
                Box::new(handle).destroy().await?;
                return Ok(ended);
            }
            Err(e) => {
                Box::new(handle).destroy().await?;
                return Err(super::setup("writing the command's output")(e));
            }
        };
        // The init is gone; the launcher is tearing down. Its log says why when the
        // command never ran: read it before the teardown removes it.
        handle.launcher_exit(STOP_TIMEOUT).await;
        let end = CommandEnd::parse(&status);
        let log = if end.is_none() {
            handle.log()
        } else {
            String::new()
        };
        Box::new(handle).destroy().await?;
        end.map(Ended::Command).ok_or_else(|| {
            super::setup("running the command")(std::io::Error::other(log.trim().to_string()))
        })
    }
}

enum Copied {
    /// Every pipe ended: what the status pipe held.
    Status(Vec<u8>),
    /// A timeout or an interrupt came first.
    Stopped(Ended),
}

async fn copy_until_gone(
    pipes: Pipes,
    out: &mut (dyn AsyncWrite + Unpin + Send),
    err: &mut (dyn AsyncWrite + Unpin + Send),
    timeout: Duration,
    interrupt: impl Future<Output = ()>,
) -> std::io::Result<Copied> {
    let as_io = |e: SandboxError| std::io::Error::other(e.to_string());
    let mut stdout = receiver(pipes.stdout).map_err(as_io)?;
    let mut stderr = receiver(pipes.stderr).map_err(as_io)?;
    let mut status_pipe = receiver(pipes.status).map_err(as_io)?;
    let mut status = Vec::new();
    let (mut out_buf, mut err_buf) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    let mut status_buf = [0u8; MAX_STATUS_BYTES];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline, interrupt);
    while stdout.is_some() || stderr.is_some() || status_pipe.is_some() {
        tokio::select! {
            n = read_some(&mut stdout, &mut out_buf) => match n {
                Some(n) => {
                    out.write_all(&out_buf[..n]).await?;
                    out.flush().await?;
                }
                None => stdout = None,
            },
            n = read_some(&mut stderr, &mut err_buf) => match n {
                Some(n) => {
                    err.write_all(&err_buf[..n]).await?;
                    err.flush().await?;
                }
                None => stderr = None,
            },
            n = read_some(&mut status_pipe, &mut status_buf) => match n {
                // More than one short line is not a status: cut, so parsing refuses it.
                Some(n) if status.len() < MAX_STATUS_BYTES => status.extend_from_slice(&status_buf[..n]),
                Some(_) => {}
                None => status_pipe = None,
            },
            () = &mut deadline => return Ok(Copied::Stopped(Ended::TimedOut)),
            () = &mut interrupt => return Ok(Copied::Stopped(Ended::Interrupted)),
        }
    }
    Ok(Copied::Status(status))
}
