//! The launcher inside the orchestrator's own process, for a one-shot run (`cordon sandbox
//! -- CMD` on the local backend): the orchestrator, still single-threaded, becomes the
//! launcher. It clones the sandbox's init itself, copies the command's output to its own
//! stdout and stderr as it comes, tears down exactly as the launcher binary does
//! ([`super::supervise::run_and_tear_down`], the same code) and only then says how the
//! command ended.
//!
//! # Why
//!
//! Starting a process is dear on this project's machines: glibc's start-up probes the CPU
//! with `cpuid` about a hundred times and each traps to the hypervisor (about 9 µs), so
//! every exec costs a millisecond before `main`. The launcher binary's exec, its start-up
//! and its launch config read back were a fifth of `cordon sandbox -- true`
//! (BENCHMARKS.md, eleventh session).
//!
//! # When the orchestrator dies
//!
//! A launcher process of its own outlived a `kill -9` of `cordon` and tore down at once.
//! Here a [`Guardian`] stands in for it: a light child ([`super::light`]), started before
//! anything of the session exists, in a session of its own with its standard streams on
//! /dev/null, waiting on a pipe only this process writes to. A run that ends normally
//! dismisses it. If the pipe ends instead (this process was killed, or crashed), the
//! init died with it (its parent-death signal) and the guardian execs the agent binary's
//! reaper (`sandbox-agent --reap STATE_DIR`, [`super::state::reap`]): it waits until no
//! process of the session is left, then vets the git dirs, sweeps privilege bits, removes
//! the placeholders and cgroups and the state, as the teardown would have.
//!
//! # Signals and time
//!
//! SIGINT, SIGTERM and SIGHUP are blocked before the guardian and the init are made (both
//! inherit the mask: neither dies of a terminal's signal meant for `cordon`), and read by
//! the supervision, which kills the init: the run ends [`End::Interrupted`]. Past the
//! timeout the init is killed too: [`End::TimedOut`]. Either way the teardown runs in
//! full before this returns.

use std::ffi::{CString, c_char, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{SigSet, SigmaskHow};

use super::light::Light;
use super::oneshot::{CommandEnd, Fds};
use super::supervise::{Cause, InitIo, Watch, run_and_tear_down, termination_signals};
use super::{LaunchConfig, LaunchError, state};

/// The longest status line the init writes, with room to spare.
const MAX_STATUS_BYTES: usize = 64;
/// How long the output of a dead sandbox may take to reach end of file (every writer is
/// dead by then: this only bounds a pipe somebody outside kept open).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// The one-shot run's pipes, made by the caller (close-on-exec): the read ends this
/// process copies from, the write ends the command gets (stdout, stderr, status).
#[derive(Debug)]
pub struct Pipes {
    pub read: [OwnedFd; 3],
    pub write: [OwnedFd; 3],
}

/// How an in-process one-shot run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The command ended on its own.
    Command(CommandEnd),
    /// It ran past the timeout and was killed with everything it started.
    TimedOut,
    /// A termination signal came to this process; the sandbox was killed.
    Interrupted,
}

/// Runs `config`'s one-shot command with this process as its launcher (see the module
/// docs): `pipes` carry its output, `log` takes the init's stderr, `reaper` is the agent
/// binary the guardian execs should this process die. The launch config must already be
/// recorded in its state dir (the reaper reads it), with `oneshot` naming the write ends
/// of `pipes`. Every stripped privilege bit is told to `on_stripped`.
///
/// Must be called while this process has one thread (it clones the init, which allocates);
/// refused otherwise.
pub fn run(
    config: &LaunchConfig,
    pipes: Pipes,
    log: &OwnedFd,
    reaper: &Path,
    timeout: Duration,
    on_stripped: &mut dyn FnMut(&Path),
) -> Result<End, LaunchError> {
    // Before anything of the session exists: files changed after this lose their
    // privilege bits at teardown (see hostside::privbits).
    let started = SystemTime::now();
    config.validate()?;
    if config.oneshot.is_none() {
        return Err(LaunchError::Config(
            "in-process: only a one-shot run".into(),
        ));
    }
    if !single_threaded() {
        return Err(LaunchError::Config(
            "in-process: this process has more than one thread".into(),
        ));
    }
    let blocked = Blocked::termination_signals()?;
    let guardian = Guardian::spawn(reaper, &config.state_dir).map_err(LaunchError::Supervise)?;
    if let Err(e) = state::write_pid_file(&config.state_dir) {
        tracing::warn!(error = %e, "recording the launcher pid");
    }
    let Pipes { read, write } = pipes;
    let [out_w, err_w, status_w] = write;
    let mut relay = Relay::new(read).map_err(LaunchError::Supervise)?;
    let watch = Watch {
        lifeline: None,
        relay: Some(&mut relay),
        deadline: Some(Instant::now() + timeout),
    };
    let init_io = InitIo {
        stderr: Some(log.as_raw_fd()),
        close: vec![guardian.done.as_raw_fd()],
    };
    let fds = Fds::new(out_w, err_w, status_w);
    let outcome = run_and_tear_down(config, started, watch, Some(fds), init_io, on_stripped);
    // The teardown is done (or never had anything to do): the guardian may go.
    guardian.dismiss();
    drop(blocked);
    let ended = outcome?;
    match ended.cause {
        Cause::TimedOut => Ok(End::TimedOut),
        Cause::Signalled => Ok(End::Interrupted),
        Cause::OutputFailed => {
            Err(LaunchError::Supervise(relay.failed.take().unwrap_or_else(
                || io::Error::other("writing the command's output"),
            )))
        }
        Cause::Exited | Cause::Released => CommandEnd::parse(&relay.status)
            .map(End::Command)
            .ok_or_else(|| {
                LaunchError::Setup(format!(
                    "the sandbox ended (code {}) without the command's status",
                    ended.code
                ))
            }),
    }
}

/// Whether this process has exactly one thread.
fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|d| d.count() == 1)
}

/// SIGINT, SIGTERM and SIGHUP blocked on this thread until dropped (the previous mask is
/// restored); children made meanwhile inherit the mask.
struct Blocked(SigSet);

impl Blocked {
    fn termination_signals() -> Result<Blocked, LaunchError> {
        let mut old = SigSet::empty();
        let set = termination_signals();
        nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old))
            .map_err(|e| LaunchError::Supervise(e.into()))?;
        Ok(Blocked(old))
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.0), None);
    }
}

/// The command's output on its way to this process's stdout and stderr, and its status
/// line as the init writes it.
#[derive(Debug)]
pub struct Relay {
    /// Read ends (non-blocking): stdout, stderr, status; `None` once at end of file.
    ends: [Option<OwnedFd>; 3],
    status: Vec<u8>,
    /// Why the output could not be written (its reader went away), if so; later output
    /// is read and dropped, so the command never blocks on a full pipe.
    failed: Option<io::Error>,
    buf: Vec<u8>,
}

impl Relay {
    fn new(read: [OwnedFd; 3]) -> io::Result<Relay> {
        for fd in &read {
            set_nonblocking(fd.as_raw_fd())?;
        }
        Ok(Relay {
            ends: read.map(Some),
            status: Vec::new(),
            failed: None,
            buf: vec![0; 64 * 1024],
        })
    }

    /// The read ends still open (-1 for those at end of file), to poll.
    pub(super) fn fds(&self) -> [RawFd; 3] {
        [0, 1, 2].map(|i| self.ends[i].as_ref().map_or(-1, AsRawFd::as_raw_fd))
    }

    /// Reads what end `i` holds now and passes it on; false when it could not be written
    /// (the first time only).
    pub(super) fn ready(&mut self, i: usize) -> bool {
        let Some(fd) = self.ends[i].as_ref().map(AsRawFd::as_raw_fd) else {
            return true;
        };
        // SAFETY: read into our own buffer of its length, from a descriptor we hold.
        let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.len()) };
        let n = match usize::try_from(n) {
            Ok(0) => {
                self.ends[i] = None;
                return true;
            }
            Ok(n) => n,
            Err(_) => {
                let e = io::Error::last_os_error();
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) {
                    self.ends[i] = None;
                }
                return true;
            }
        };
        if i == 2 {
            // More than one short line is no status: kept cut, so parsing refuses it.
            let room = MAX_STATUS_BYTES.saturating_sub(self.status.len());
            self.status.extend_from_slice(&self.buf[..n.min(room + 1)]);
            return true;
        }
        if self.failed.is_some() {
            return true;
        }
        let out = if i == 0 { 1 } else { 2 };
        match write_all(out, &self.buf[..n]) {
            Ok(()) => true,
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    /// Copies everything left, until every end is at end of file (or [`DRAIN_LIMIT`]).
    pub(super) fn drain(&mut self) {
        let until = Instant::now() + DRAIN_LIMIT;
        while self.ends.iter().any(Option::is_some) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.ends = [None, None, None];
                return;
            }
            let mut fds = self.fds().map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            let ms = libc::c_int::try_from(left.as_millis() + 1).unwrap_or(libc::c_int::MAX);
            // SAFETY: a valid array of three pollfds; negative fds are ignored.
            if unsafe { libc::poll(fds.as_mut_ptr(), 3, ms) } < 0 {
                continue;
            }
            for (i, fd) in fds.iter().enumerate() {
                if fd.revents != 0 {
                    let _ = self.ready(i);
                }
            }
        }
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we hold, integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes all of `bytes` to `fd` (this process's stdout or stderr), waiting for room when
/// the descriptor is non-blocking (a shared pipe somebody else made so).
fn write_all(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: write from a live slice of its length to a descriptor we hold.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        match usize::try_from(n) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(_) => {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::WouldBlock => {
                        let mut p = libc::pollfd {
                            fd,
                            events: libc::POLLOUT,
                            revents: 0,
                        };
                        // SAFETY: one valid pollfd.
                        unsafe { libc::poll(&mut p, 1, -1) };
                    }
                    _ => return Err(e),
                }
            }
        }
    }
    Ok(())
}

/// Stands in for a launcher process of its own should this one die mid-run (see the
/// module docs).
struct Guardian {
    light: Option<Light>,
    /// The write end of the pipe the guardian waits on: one byte dismisses it; its end of
    /// file (this process died) sends it to the reaper.
    done: OwnedFd,
    /// What the guardian reads: kept here until it is reaped, leaked if it never is (it
    /// may exec from it after this process is gone).
    args: Option<Box<GuardArgs>>,
}

/// The guardian's data, prepared before the clone: the pipe it waits on and the reaper's
/// whole exec.
struct GuardArgs {
    watch: c_int,
    path: CString,
    reap: CString,
    dir: CString,
    argv: [*const c_char; 4],
    /// What of this process's environment the reaper's git vetting reads (where the
    /// user's own git configuration is), as `NAME=value`.
    env: Vec<CString>,
    envp: Vec<*const c_char>,
}

/// The variables the reaper keeps: the user's git configuration is found through them,
/// and a relative `core.hooksPath` there applies to every repository it vets.
const REAPER_ENV: [&str; 3] = ["HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"];

impl Guardian {
    fn spawn(reaper: &Path, state_dir: &Path) -> io::Result<Guardian> {
        let c =
            |b: &[u8]| CString::new(b).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
        let (watch, done) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let mut args = Box::new(GuardArgs {
            watch: watch.as_raw_fd(),
            path: c(reaper.as_os_str().as_bytes())?,
            reap: c(b"--reap")?,
            dir: c(state_dir.as_os_str().as_bytes())?,
            argv: [std::ptr::null(); 4],
            env: REAPER_ENV
                .iter()
                .filter_map(|name| {
                    let value = std::env::var_os(name)?;
                    let mut kv = format!("{name}=").into_bytes();
                    kv.extend(value.as_bytes());
                    CString::new(kv).ok()
                })
                .collect(),
            envp: Vec::new(),
        });
        args.argv = [
            args.path.as_ptr(),
            args.reap.as_ptr(),
            args.dir.as_ptr(),
            std::ptr::null(),
        ];
        args.envp = args.env.iter().map(|v| v.as_ptr()).collect();
        args.envp.push(std::ptr::null());
        let arg = (&raw mut *args).cast::<c_void>();
        // SAFETY: `guard` keeps the light-child contract (raw system calls on `args`, then
        // exec or _exit); `args` is boxed (it does not move) and outlives the child: freed
        // only once it is reaped, leaked otherwise (see Drop).
        let light = unsafe { Light::spawn(0, guard, arg) }?;
        // The child has its own copy of the read end (its descriptor table is a copy).
        drop(watch);
        Ok(Guardian {
            light: Some(light),
            done,
            args: Some(args),
        })
    }

    /// Tells the guardian the run is over and reaps it.
    fn dismiss(mut self) {
        let _ = nix::unistd::write(&self.done, &[1]);
        if let Some(light) = self.light.take()
            && light.wait().is_ok()
        {
            drop(self.args.take());
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // Not reaped (dismissing failed, or this process is unwinding): the guardian may
        // yet exec the reaper from these strings, so they stay allocated.
        if let Some(args) = self.args.take() {
            Box::leak(args);
        }
    }
}

/// The guardian's life (alloc-free, see [`super::light`]): out of the orchestrator's
/// session and streams, it waits for a byte (dismissed: it ends) or the end of the pipe
/// (the orchestrator is gone: it becomes the reaper).
extern "C" fn guard(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the boxed `GuardArgs` the guardian's owner keeps (or leaks) for as
    // long as this child may run; every call is a plain system call on this child's own
    // descriptors or on those strings, and the exec's arrays are null-terminated.
    unsafe {
        let args = &*arg.cast::<GuardArgs>();
        // Only the pipe stays open (as 3): a copy of anything else of the orchestrator's
        // (its output pipes, the sandbox's) would keep it from ending.
        if !super::light::detach(&[args.watch]) {
            // Nothing to watch: no guardian, as when its clone fails.
            libc::_exit(0);
        }
        let mut byte = 0u8;
        loop {
            match libc::read(3, (&raw mut byte).cast(), 1) {
                1 => libc::_exit(0),
                0 => break,
                // Interrupted: wait on (errno is the orchestrator's to read, not ours).
                _ => {}
            }
        }
        libc::close(3);
        libc::execve(args.path.as_ptr(), args.argv.as_ptr(), args.envp.as_ptr());
        libc::_exit(127)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap()
    }

    #[test]
    fn the_status_end_keeps_at_most_one_short_line() {
        let (r, w) = pipe();
        let (o_r, _o_w) = pipe();
        let (e_r, _e_w) = pipe();
        let mut relay = Relay::new([o_r, e_r, r]).unwrap();
        nix::unistd::write(&w, "x".repeat(200).as_bytes()).unwrap();
        relay.ready(2);
        assert!(relay.status.len() <= MAX_STATUS_BYTES + 1);
        assert_eq!(CommandEnd::parse(&relay.status), None);
    }

    #[test]
    fn a_dismissed_guardian_ends_without_reaping() {
        let dir = tempfile::tempdir().unwrap();
        // A reaper that would leave a mark if it ran.
        let mark = dir.path().join("reaped");
        let script = dir.path().join("reaper");
        std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", mark.display())).unwrap();
        std::fs::set_permissions(
            &script,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
        )
        .unwrap();
        let g = Guardian::spawn(&script, dir.path()).unwrap();
        g.dismiss();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!mark.exists());
    }

    #[test]
    fn a_guardian_whose_pipe_ends_runs_the_reaper_on_the_state_dir() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("args");
        let script = dir.path().join("reaper");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$@\" > {}.tmp && mv {0}.tmp {0}\n",
                out.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            &script,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
        )
        .unwrap();
        let mut g = Guardian::spawn(&script, Path::new("/some/state")).unwrap();
        // As if this process died: the pipe ends without the byte.
        let light = g.light.take().unwrap();
        drop(std::mem::replace(&mut g.done, pipe().0));
        let status = light.wait().unwrap();
        assert!(libc::WIFEXITED(status), "{status}");
        let start = Instant::now();
        while !out.exists() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let args = std::fs::read_to_string(&out).unwrap();
        assert_eq!(args.trim(), "--reap /some/state");
    }
}
