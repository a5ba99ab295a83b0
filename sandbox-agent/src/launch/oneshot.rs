//! The one-shot sandbox: the sandbox's init runs one command itself, confined exactly as
//! the agent confines each of its commands, instead of starting the agent. No agent
//! process, no runtime, no RPC: `cordon sandbox -- CMD` on the local backend.
//!
//! # When
//!
//! Only where it is equivalent to running the command through the agent: the local
//! backend, no network egress (the egress bridge and the DNS stub live in the agent) and
//! no workspace disk budget (the agent measures it around each command). Anything else
//! starts the agent and runs the command over RPC, unchanged; [`OneShot::validate`]
//! refuses the rest, so a launch config cannot ask for a one-shot run without them.
//!
//! # What the command gets
//!
//! Everything the agent path gives, from the same code: the init has built the same root
//! (mounts, protected paths, masks, denied paths), joined the session cgroup with its
//! limits and dropped to the sandbox uid with no capabilities and no_new_privs
//! ([`super::child`]). Then, in the init, the steps the agent takes for every command:
//! [`crate::confine::confine_self`] (the agent's Landlock ruleset and seccomp filter,
//! which every command inherits there), the children's own filter
//! ([`crate::confine::child_filter`]) installed in the child right before exec with the
//! rlimits and a new session ([`crate::confine::child_setup`]), and the environment a
//! command gets ([`crate::exec::spawn::command_env`]). The child is started by the same
//! code as the agent's commands ([`crate::exec::clone_into::fork_onto`]).
//!
//! # Standard streams
//!
//! The command never sees the host's terminal (no TIOCSTI or TIOCLINUX injection, no job
//! control): stdin is /dev/null, as an exec request without stdin gets it, and stdout and
//! stderr are the write ends of two pipes the orchestrator made and copies to its own
//! streams. The orchestrator is the launcher here ([`super::inline`]): the init, its
//! clone, inherits them (close-on-exec: no exec of the orchestrator's passes them on),
//! and the command's child part moves them onto 1 and 2 and marks everything from 3 up
//! close-on-exec: after exec the command holds its three standard streams and nothing
//! else. The launcher drops its copies right after the clone, the init its copies right
//! after the exec: the pipes reach end of file when the last process of the sandbox is
//! gone.
//!
//! # Exit status
//!
//! When the command's leader ends the init writes one [`CommandEnd`] line to the status
//! pipe (`exit N` or `signal N`) and exits; the kernel then kills everything left in the
//! pid namespace. An empty status pipe means the command never ran: the init's setup
//! error says why. So a command's own exit code 125 is never taken for a launcher
//! failure, nor a signal for an exit code.
//!
//! # Teardown and timeout
//!
//! The launcher supervises and tears down exactly as for an agent (kill of the pid
//! namespace, git vetting, placeholders, setuid sweep, cgroup removal) before it says
//! how the command ended; its supervision bounds the run at the exec timeout
//! ([`crate::limits::MAX_EXEC_TIMEOUT_MS`]), ends it on SIGINT, SIGTERM or SIGHUP, and
//! copies the output as it comes ([`super::inline`]). The launcher binary
//! (`--launch-config`) refuses a one-shot config: it has no output to copy to.

use std::collections::HashMap;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::{LaunchConfig, LaunchError};
use crate::confine::{self, ChildLimits};
use crate::exec::clone_into::{self, Prepared};
use crate::exec::spawn;
use crate::proto::ExecRequest;

/// The marker the one-shot command carries (the agent's kill scans look for it; here
/// the pid namespace is the command's alone).
const MARKER: &str = "oneshot";

/// One command for the init to run instead of the agent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OneShot {
    /// The program and its arguments (an argv, not a shell string).
    pub argv: Vec<String>,
    /// Its working directory: absolute, as the sandbox sees it.
    pub cwd: PathBuf,
    /// Inherited write ends: the command's stdout, its stderr, and the status pipe.
    pub stdout_fd: RawFd,
    pub stderr_fd: RawFd,
    pub status_fd: RawFd,
}

/// The launcher's copies of the write ends: the command's stdout and stderr, the status.
#[derive(Debug)]
pub struct Fds {
    stdout: OwnedFd,
    stderr: OwnedFd,
    status: OwnedFd,
}

impl Fds {
    /// The write ends of a one-shot run's pipes, made in this process (the in-process
    /// launcher's, see [`super::inline`]): the command's stdout and stderr, the status.
    pub fn new(stdout: OwnedFd, stderr: OwnedFd, status: OwnedFd) -> Fds {
        Fds {
            stdout,
            stderr,
            status,
        }
    }
}

impl OneShot {
    /// Refuses a one-shot run where it would not be equivalent to the agent path, and
    /// anything an exec request could not carry either.
    pub fn validate(&self, cfg: &LaunchConfig) -> Result<(), LaunchError> {
        let refuse = |why: &str| Err(LaunchError::Config(format!("one-shot: {why}")));
        if cfg.agent.egress.is_some() {
            return refuse("a session with egress needs the agent (its bridge)");
        }
        if cfg.agent.disk_budget_bytes.is_some() {
            return refuse("a disk budget needs the agent (it measures each command)");
        }
        if !self.cwd.is_absolute() {
            return refuse("the working directory must be absolute");
        }
        let req = ExecRequest {
            argv: self.argv.clone(),
            cwd: self.cwd.to_string_lossy().into_owned(),
            ..Default::default()
        };
        crate::exec::validate(&req).map_err(|e| LaunchError::Config(e.message))?;
        let fds = [self.stdout_fd, self.stderr_fd, self.status_fd];
        let lifeline = cfg.lifeline_fd;
        if fds.iter().any(|&fd| fd < 3 || Some(fd) == lifeline)
            || fds[0] == fds[1]
            || fds[1] == fds[2]
            || fds[0] == fds[2]
        {
            return refuse("the descriptors must be distinct, above 2 and not the lifeline");
        }
        Ok(())
    }
}

/// How the command's leader ended, as the status pipe carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandEnd {
    Exited(i32),
    Signaled(i32),
}

impl CommandEnd {
    /// The status line: `exit N` or `signal N`.
    pub fn encode(self) -> String {
        match self {
            CommandEnd::Exited(c) => format!("exit {c}\n"),
            CommandEnd::Signaled(s) => format!("signal {s}\n"),
        }
    }

    /// Parses what the status pipe held; `None` for anything but one well-formed line.
    pub fn parse(bytes: &[u8]) -> Option<CommandEnd> {
        let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
        let (kind, n) = text.split_once(' ')?;
        let n: i32 = n.parse().ok()?;
        match kind {
            "exit" if (0..=255).contains(&n) => Some(CommandEnd::Exited(n)),
            "signal" if (1..=64).contains(&n) => Some(CommandEnd::Signaled(n)),
            _ => None,
        }
    }

    /// The shell's convention: the exit code, or 128+N for signal N.
    pub fn code(self) -> i32 {
        match self {
            CommandEnd::Exited(c) => c,
            CommandEnd::Signaled(s) => 128 + s,
        }
    }

    /// How a reaped child ended, if it did.
    pub fn of(status: WaitStatus) -> Option<CommandEnd> {
        match status {
            WaitStatus::Exited(_, c) => Some(CommandEnd::Exited(c)),
            WaitStatus::Signaled(_, s, _) => Some(CommandEnd::Signaled(s as i32)),
            _ => None,
        }
    }
}

/// The init's part, after the root is built and privileges are dropped: confines this
/// process as the agent confines itself, starts the command with the children's own
/// setup, reaps until it ends and writes how it ended to the status pipe. Runs in the
/// single-threaded init; the caller then exits, which ends the sandbox.
pub(super) fn run(cfg: &LaunchConfig, shot: &OneShot, fds: Fds) -> Result<(), String> {
    let agent = &cfg.agent;
    // First, as the agent does before it serves: every later step (the environment's
    // user lookup included) sees what a command of the agent would.
    let report = confine::confine_self(agent).map_err(|e| e.to_string())?;
    for note in report
        .notes
        .iter()
        .filter(|n| n.starts_with("not enforced"))
    {
        tracing::warn!(note, "one-shot sandbox");
    }
    let filter = confine::child_filter(agent, &report).map_err(|e| e.to_string())?;
    let shell = spawn::find_shell();
    let env = spawn::command_env(agent, &shell, &HashMap::new(), MARKER);
    let limits =
        ChildLimits::prepare(&agent.rlimits).map_err(|e| format!("reading rlimits: {e}"))?;
    let what = Prepared::new(&shot.argv, &env, &shot.cwd, false)
        .map_err(|e| format!("preparing the command: {e}"))?;
    let setup = || confine::child_setup(&limits, &filter);
    // SAFETY: `setup` (rlimits, a new session, descriptors, the seccomp filter) makes
    // only alloc-free system calls, as fork_onto's child sharing this memory needs.
    let leader = unsafe {
        clone_into::fork_onto(
            fds.stdout.as_raw_fd(),
            fds.stderr.as_raw_fd(),
            &what,
            &setup,
        )
    }
    .map_err(|e| format!("cannot start {}: {e}", shot.argv[0]))?;
    // The command holds the pipes now; the init's copies would only delay their end.
    drop((fds.stdout, fds.stderr));
    let end = super::child::reap_until(Pid::from_raw(leader))
        .ok_or_else(|| "lost track of the command".to_string())?;
    std::fs::File::from(fds.status)
        .write_all(end.encode().as_bytes())
        .map_err(|e| format!("reporting the exit status: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(pid: i32) -> Option<CommandEnd> {
        CommandEnd::of(nix::sys::wait::waitpid(Pid::from_raw(pid), None).ok()?)
    }

    #[test]
    fn the_status_line_round_trips_and_refuses_anything_else() {
        for end in [
            CommandEnd::Exited(0),
            CommandEnd::Exited(125),
            CommandEnd::Signaled(9),
        ] {
            assert_eq!(CommandEnd::parse(end.encode().as_bytes()), Some(end));
        }
        for bad in [
            "",
            "exit 3",
            "exit 256\n",
            "signal 0\n",
            "exit 3\nexit 4\n",
            "die 1\n",
        ] {
            assert_eq!(CommandEnd::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(CommandEnd::Signaled(15).code(), 143);
    }

    fn config(shot: serde_json::Value, agent_extra: serde_json::Value) -> LaunchConfig {
        let mut agent = serde_json::json!({
            "socket_path": "/run/cordon/agent.sock",
            "workspace": "/work/p",
            "tmp_dir": "/tmp",
        });
        for (k, v) in agent_extra.as_object().unwrap() {
            agent[k] = v.clone();
        }
        let json = serde_json::json!({
            "session_id": "s",
            "state_dir": "/root/.cordon/run/s",
            "workspace": "/work/p",
            "lifeline_fd": 3,
            "oneshot": shot,
            "agent": agent,
        });
        serde_json::from_value(json).unwrap()
    }

    fn shot(fds: [i32; 3]) -> serde_json::Value {
        serde_json::json!({
            "argv": ["true"], "cwd": "/work/p",
            "stdout_fd": fds[0], "stderr_fd": fds[1], "status_fd": fds[2],
        })
    }

    #[test]
    fn only_an_equivalent_run_is_accepted() {
        let none = serde_json::json!({});
        config(shot([4, 5, 6]), none.clone()).validate().unwrap();
        let disk = serde_json::json!({"disk_budget_bytes": 1000});
        let err = config(shot([4, 5, 6]), disk).validate().unwrap_err();
        assert!(err.to_string().contains("disk budget"), "{err}");
        for fds in [[3, 5, 6], [4, 4, 6], [1, 5, 6], [4, 5, 4]] {
            assert!(
                config(shot(fds), none.clone()).validate().is_err(),
                "{fds:?}"
            );
        }
        let mut empty = shot([4, 5, 6]);
        empty["argv"] = serde_json::json!([]);
        assert!(config(empty, none.clone()).validate().is_err());
        let mut relative = shot([4, 5, 6]);
        relative["cwd"] = serde_json::json!("p");
        assert!(config(relative, none).validate().is_err());
    }

    #[test]
    fn fork_onto_gives_the_command_the_pipes_and_nothing_else() {
        let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (err_r, err_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        // Lists its open descriptors and whether stdin is a tty, then fails with 3.
        let script = "ls /proc/self/fd; echo oops >&2; exit 3";
        let argv: Vec<String> = ["sh", "-c", script].map(String::from).to_vec();
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let what = Prepared::new(&argv, &env, std::path::Path::new("/"), false).unwrap();
        let setup = || crate::confine::sys::close_fds_from(3);
        // A forked child of the test harness (threads and all) runs only the alloc-free
        // child part here: `setup` does not allocate.
        let pid = crate::confine::in_child(|| {
            // SAFETY: this forked child of the harness is single-threaded.
            let pid = unsafe {
                clone_into::fork_onto(out_w.as_raw_fd(), err_w.as_raw_fd(), &what, &setup)
            };
            pid.ok().and_then(wait).map_or(100, CommandEnd::code)
        });
        drop((out_w, err_w));
        assert!(matches!(pid, WaitStatus::Exited(_, 3)), "{pid:?}");
        let out = std::fs::read_to_string(format!("/proc/self/fd/{}", out_r.as_raw_fd()));
        let out = out.unwrap_or_default();
        // 0, 1, 2 and the one ls opens to list them.
        assert_eq!(out.lines().count(), 4, "{out}");
        let err = std::fs::read_to_string(format!("/proc/self/fd/{}", err_r.as_raw_fd()));
        assert_eq!(err.unwrap(), "oops\n");
    }
}
