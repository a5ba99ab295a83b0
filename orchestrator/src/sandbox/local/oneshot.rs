//! `cordon sandbox` on the local backend without the agent: the sandbox's init runs the
//! one command itself, confined as the agent confines each of its commands, and no RPC
//! is spoken (`sandbox_agent::launch::oneshot` says how, and why it is the same
//! confinement).
//!
//! Only where that is equivalent ([`equivalent`]): no network egress (the egress bridge
//! lives in the agent) and no workspace disk budget (the agent measures it around each
//! command). Everything else starts the agent and runs the command over RPC, unchanged.
//!
//! This process is the sandbox's launcher, before any runtime starts
//! (`sandbox_agent::launch::inline`): no launcher process to start, which was a fifth of
//! the whole. The command's stdout and stderr are pipes this process copies to its own as
//! the output comes; stdin is /dev/null; the host's terminal never reaches the sandbox.
//! How the command ended comes back on a third pipe, written by the init (an empty one:
//! the command never started, and the init's error says why). The run ends when the
//! sandbox has no process left and the teardown (kill of the pid namespace, git vetting,
//! placeholders, setuid sweep, cgroup removal) is done; a timeout or a termination signal
//! kills the sandbox first. Unlike an exec through the agent, the output is never capped:
//! it goes to the user's terminal, not to a model's context.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use sandbox_agent::launch::oneshot::OneShot;
use sandbox_agent::launch::{LaunchError, inline};

pub use sandbox_agent::launch::inline::End;

use super::{LocalBackend, SandboxError, SandboxSpec};

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

impl Command {
    /// Makes the pipes (close-on-exec: the init gets the write ends through its clone)
    /// and the launch config's part naming them.
    fn pipes(&self) -> Result<(OneShot, inline::Pipes), SandboxError> {
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
        let pipes = inline::Pipes {
            read: [out_r, err_r, st_r],
            write: [out_w, err_w, st_w],
        };
        Ok((shot, pipes))
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
    ) -> Result<End, SandboxError> {
        let (workspace, additional, state_dir) = self.prepare_state(spec)?;
        let mut config = self.launch_config(spec, &workspace, &additional, &state_dir);
        let ran = command.pipes().and_then(|(shot, pipes)| {
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
                pipes,
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
        ran
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
