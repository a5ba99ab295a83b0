//! Host git commands with bounds: a deadline, a heap limit and a cap on what they print.
//!
//! Security: a host git reads what a session left in the workspace. A FIFO where git opens
//! a file (`.gitignore`, a ref under `.git/refs/`) blocks it forever; a ref that is a link
//! to `/dev/zero` makes it read without end, gigabytes in seconds. Either would stall the
//! next session's start (the prompt's `git status`) or a checkpoint, and on a team server
//! take the host's memory. So every such command runs in a process group of its own, with
//! `RLIMIT_DATA` set as soon as it exists, and is killed, group and all, when it passes its
//! deadline or prints more than its cap.

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// What one host git command may take.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Wall time, from the spawn.
    pub deadline: Duration,
    /// `RLIMIT_DATA` (heap and other private writable memory; mapped pack files do not
    /// count).
    pub data_bytes: u64,
    /// Bytes of standard output (and, apart, of standard error) kept; more is a failure.
    pub output_bytes: usize,
}

impl Bounds {
    /// For the commands of a session's start (branch, status): a few seconds.
    pub const PROMPT: Bounds = Bounds {
        deadline: Duration::from_secs(10),
        data_bytes: 2 << 30,
        output_bytes: 16 << 20,
    };
    /// For checkpoints (`add`, `write-tree`, `ls-files` over the whole tree): a minute.
    pub const CHECKPOINT: Bounds = Bounds {
        deadline: Duration::from_secs(60),
        data_bytes: 2 << 30,
        output_bytes: 256 << 20,
    };
}

/// How a bounded command ended.
#[derive(Debug)]
pub struct Ended {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a bounded command gave no result.
#[derive(Debug, thiserror::Error)]
pub enum BoundError {
    #[error("could not start git: {0}")]
    Spawn(std::io::Error),
    #[error("git ran past its {0:?} deadline and was killed")]
    TimedOut(Duration),
    #[error("git printed more than {0} bytes and was killed")]
    TooMuchOutput(usize),
}

/// Runs `cmd` (its stdin from `input`, else nothing) within `bounds`.
pub fn run(cmd: &mut Command, input: Option<Vec<u8>>, bounds: Bounds) -> Result<Ended, BoundError> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(BoundError::Spawn)?;
    let pid = child.id();
    limit_data(pid, bounds.data_bytes);
    let group = Group(pid);
    if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
        // A writer thread: git may fill its stdout pipe before reading all of stdin.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&data);
        });
    }
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let out = capped_reader(stdout, bounds.output_bytes, group);
    let err = capped_reader(stderr, bounds.output_bytes, group);
    let in_time = exited_within(pid, bounds.deadline);
    // Whatever the group still holds (a straggler keeping a pipe open, or everything
    // past the deadline) goes now, while the leader is unreaped.
    group.kill();
    let (stdout, out_over) = out.join().unwrap_or_default();
    let (stderr, err_over) = err.join().unwrap_or_default();
    let status = child.wait().map_err(BoundError::Spawn)?;
    if !in_time {
        return Err(BoundError::TimedOut(bounds.deadline));
    }
    if out_over || err_over {
        return Err(BoundError::TooMuchOutput(bounds.output_bytes));
    }
    Ok(Ended {
        status,
        stdout,
        stderr,
    })
}

/// A spawned command's process group (its leader's pid).
#[derive(Debug, Clone, Copy)]
struct Group(u32);

impl Group {
    fn kill(self) {
        // Sound: the group was made for this command alone (`process_group(0)`), and
        // every kill runs before its leader is reaped (`run` reaps last), so the number
        // stays the leader's and cannot name anyone else's group.
        if let Ok(pid) = i32::try_from(self.0) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Sets `RLIMIT_DATA` on `pid` right after its start. Best effort: a refusal leaves the
/// deadline as the bound.
fn limit_data(pid: u32, bytes: u64) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: prlimit on our own child with a valid rlimit and no old-value pointer.
    let rc = unsafe {
        libc::prlimit(
            pid,
            libc::RLIMIT_DATA,
            &raw const limit,
            std::ptr::null_mut(),
        )
    };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "host git's memory limit not set");
    }
}

/// Reads `pipe` to its end keeping at most `cap` bytes; past the cap it kills `group`.
/// Returns what it kept and whether the cap was passed.
fn capped_reader<R: Read + Send + 'static>(
    pipe: Option<R>,
    cap: usize,
    group: Group,
) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let Some(pipe) = pipe else {
            return (Vec::new(), false);
        };
        let mut kept = Vec::new();
        let cap_plus_one = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
        let _ = pipe.take(cap_plus_one).read_to_end(&mut kept);
        if kept.len() > cap {
            group.kill();
            kept.truncate(cap);
            return (kept, true);
        }
        (kept, false)
    })
}

/// Whether `pid` (a child of this process) exits within `deadline`. It is left a zombie
/// (`WNOWAIT`): the caller reaps it after its last kill.
fn exited_within(pid: u32, deadline: Duration) -> bool {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let pid: libc::id_t = pid;
        loop {
            // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waitid on our own child, writing only into `info`.
            let rc = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid,
                    &raw mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                let _ = tx.send(());
                return;
            }
        }
    });
    rx.recv_timeout(deadline).is_ok()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn bounds(deadline_ms: u64) -> Bounds {
        Bounds {
            deadline: Duration::from_millis(deadline_ms),
            data_bytes: 256 << 20,
            output_bytes: 1 << 20,
        }
    }

    #[test]
    fn a_command_within_bounds_gives_its_output_and_status() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "cat; echo err >&2; exit 3"]);
        let out = run(&mut cmd, Some(b"in\n".to_vec()), bounds(10_000)).unwrap();
        assert_eq!(out.stdout, b"in\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn past_the_deadline_the_whole_group_is_killed() {
        let start = Instant::now();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30"]);
        let e = run(&mut cmd, None, bounds(300)).unwrap_err();
        assert!(matches!(e, BoundError::TimedOut(_)), "{e}");
        // The background sleep held the pipes too: gone with the group, not waited for.
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_straggler_holding_the_pipes_does_not_hold_the_caller() {
        let start = Instant::now();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo done"]);
        let out = run(&mut cmd, None, bounds(20_000)).unwrap();
        assert_eq!(out.stdout, b"done\n");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn output_past_the_cap_kills_it() {
        let mut cmd = Command::new("yes");
        let e = run(&mut cmd, None, bounds(20_000)).unwrap_err();
        assert!(matches!(e, BoundError::TooMuchOutput(_)), "{e}");
    }

    #[test]
    fn the_heap_is_limited() {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", "b = bytearray(1 << 30)"]);
        let out = run(&mut cmd, None, bounds(20_000)).unwrap();
        assert!(
            !out.status.success(),
            "1 GiB allocated under a 256 MiB limit"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("MemoryError"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
