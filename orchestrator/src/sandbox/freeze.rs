//! Freezing a sandbox's pid namespace with signals, for backends without a freezer cgroup
//! (the local backend): while frozen no sandbox process runs, so host-side work on the
//! workspace (snapshot, rewind) cannot be raced by one.
//!
//! How: a helper child joins the sandbox's pid namespace (`setns` on a pidfd of its init)
//! and forks; the grandchild, inside the namespace, sends `kill(-1, SIGSTOP)`, which the
//! kernel delivers to every process of the namespace in one pass under the task-list lock,
//! so no fork can slip between them (a process that forks and exits in a loop is caught
//! like any other). The init gets its signal from the host (signals from an ancestor
//! namespace reach a namespace's init). Then every process of the namespace is waited
//! for until it is stopped: a signal lands when its target next leaves the kernel. Thawing
//! sends `SIGCONT` the same way.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::SandboxError;

/// How long processes may take to reach the stopped state.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

fn fail(why: impl Into<String>) -> SandboxError {
    SandboxError::Setup {
        step: "freezing the sandbox",
        source: std::io::Error::other(why.into()),
    }
}

/// Stops every process in the pid namespace whose init is `init` (a host pid), and
/// returns once all are stopped.
pub fn freeze(init: i32) -> Result<(), SandboxError> {
    signal_namespace(init, Signal::SIGSTOP)?;
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        let running = running_in_namespace(init)?;
        if running.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = thaw(init);
            return Err(fail(format!("processes {running:?} did not stop")));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Lets every process of the namespace run again.
pub fn thaw(init: i32) -> Result<(), SandboxError> {
    signal_namespace(init, Signal::SIGCONT)
}

/// Sends `sig` to every process of the namespace: from inside for all but the init (see
/// the module docs), from the host for the init.
fn signal_namespace(init: i32, sig: Signal) -> Result<(), SandboxError> {
    let pidfd = sandbox_agent::confine::sys::pidfd_open(init)
        .map_err(|e| fail(format!("pidfd of the sandbox init: {e}")))?;
    signal_from_inside(&pidfd, sig)?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(init), sig)
        .map_err(|e| fail(format!("signalling the sandbox init: {e}")))
}

fn signal_from_inside(pidfd: &OwnedFd, sig: Signal) -> Result<(), SandboxError> {
    let signo = sig as libc::c_int;
    let fd = pidfd.as_raw_fd();
    // SAFETY: the child makes only raw, async-signal-safe syscalls (setns, clone, kill,
    // wait4, _exit) on values prepared before the fork, never allocates or takes a lock,
    // and never returns into Rust code: sound after fork in a multi-threaded process.
    match unsafe { nix::unistd::fork() }.map_err(|e| fail(format!("fork: {e}")))? {
        nix::unistd::ForkResult::Child => {
            // SAFETY: see above.
            unsafe {
                if libc::setns(fd, libc::CLONE_NEWPID) != 0 {
                    libc::_exit(201);
                }
                // Only children enter the namespace joined with setns.
                let pid =
                    libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0);
                if pid == 0 {
                    let code = if libc::kill(-1, signo) == 0 { 0 } else { 202 };
                    libc::_exit(code);
                }
                if pid < 0 {
                    libc::_exit(203);
                }
                let mut status = 0;
                #[allow(clippy::cast_possible_truncation)]
                let waited = libc::waitpid(pid as libc::pid_t, &mut status, 0);
                if waited < 0 || !libc::WIFEXITED(status) {
                    libc::_exit(204);
                }
                libc::_exit(libc::WEXITSTATUS(status));
            }
        }
        nix::unistd::ForkResult::Parent { child } => {
            match nix::sys::wait::waitpid(child, None) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => Ok(()),
                // kill(-1) finds no process besides the init and the sender: nothing to do.
                Ok(nix::sys::wait::WaitStatus::Exited(_, 202)) => Ok(()),
                Ok(nix::sys::wait::WaitStatus::Exited(_, 201)) => Err(fail(
                    "joining the sandbox's pid namespace was refused (not root?)",
                )),
                other => Err(fail(format!("signalling the sandbox: {other:?}"))),
            }
        }
    }
}

/// Processes of the namespace of `init` (init included) that are not stopped.
fn running_in_namespace(init: i32) -> Result<Vec<i32>, SandboxError> {
    let ns = std::fs::metadata(format!("/proc/{init}/ns/pid"))
        .map_err(|e| fail(format!("the sandbox init is gone: {e}")))?
        .ino();
    let mut running = Vec::new();
    let entries = std::fs::read_dir("/proc").map_err(|e| fail(e.to_string()))?;
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
    {
        let same_ns = std::fs::metadata(format!("/proc/{pid}/ns/pid")).is_ok_and(|m| m.ino() == ns);
        if same_ns && !stopped(pid) {
            running.push(pid);
        }
    }
    Ok(running)
}

/// Whether `pid` is stopped, traced-stopped, a zombie, or gone.
fn stopped(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat.get(i + 2..i + 3))
        .unwrap_or("X");
    matches!(state, "T" | "t" | "Z" | "X")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_of_ours_is_seen_running_then_stopped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(!stopped(pid));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !stopped(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(stopped(pid));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
