//! Starting a command straight inside its cgroup: `clone3(CLONE_INTO_CGROUP)` on the
//! slot's directory, then the same pre-exec setup and exec as [`super::spawn`]'s
//! `std::process::Command` path.
//!
//! Why: a child that enters its cgroup by writing to `cgroup.procs` makes the kernel take
//! its global threadgroup lock for writing, which waits for an RCU grace period (1 to
//! 11 ms per command on this project's machines). A child born in the cgroup is never
//! moved, and fork only takes that lock for reading.
//!
//! The child runs between a clone of this multi-threaded process and exec, like a
//! `pre_exec` hook: it makes only alloc-free system calls on data prepared before the
//! clone. A failure in the child (chdir, the confinement, exec) is sent back as an errno
//! over a close-on-exec pipe; end of file means the exec happened.
//!
//! Where clone3 is refused (a seccomp filter that answers ENOSYS, as the agent's own does
//! unless namespace creation is capped, see `policies/README.md`; an old kernel; a v1
//! slot) the caller falls back to the `Command` path; the refusal is remembered so each
//! later command goes there directly.

use std::ffi::{CString, c_char};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::confine::sys;

/// Whether clone3 may still work here; cleared at its first refusal.
///
/// A slot that has been killed is never used here (children born in it would be
/// SIGKILLed by the kernel at birth: `Lease::cgroup_fd` says why); that, not this
/// switch, is what keeps a timed-out hook or a restarted MCP server from killing the
/// next command of its slot.
static USABLE: AtomicBool = AtomicBool::new(true);

/// Whether a spawn should try [`spawn`] at all.
pub fn usable() -> bool {
    USABLE.load(Ordering::Relaxed)
}

/// What to exec and how, all prepared before the clone.
pub struct Prepared {
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    stdin: bool,
}

impl Prepared {
    /// `argv[0]` is looked up in the `PATH` of `env` (as `execvp` does) when it has no
    /// slash. Fails on a NUL byte.
    pub fn new(
        argv: &[String],
        env: &[(String, String)],
        cwd: &std::path::Path,
        stdin: bool,
    ) -> io::Result<Prepared> {
        let c = |s: &[u8]| CString::new(s).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
        Ok(Prepared {
            argv: argv
                .iter()
                .map(|a| c(a.as_bytes()))
                .collect::<io::Result<_>>()?,
            envp: env
                .iter()
                .map(|(k, v)| c(format!("{k}={v}").as_bytes()))
                .collect::<io::Result<_>>()?,
            cwd: c(cwd.as_os_str().as_encoded_bytes())?,
            stdin,
        })
    }
}

/// A started child: its pid and the parent's ends of its standard streams.
#[derive(Debug)]
pub struct Spawned {
    pub pid: i32,
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

/// Why [`spawn`] did not start the child.
#[derive(Debug)]
pub enum CloneError {
    /// clone3 or `CLONE_INTO_CGROUP` is refused here: use the fallback (remembered).
    Unsupported(io::Error),
    /// The clone or the child's setup or exec failed; nothing is left running.
    Failed(io::Error),
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
}

fn dev_null() -> io::Result<OwnedFd> {
    std::fs::OpenOptions::new()
        .read(true)
        .open("/dev/null")
        .map(OwnedFd::from)
}

// SAFETY: `environ` is the C library's environment pointer, declared with its C type.
unsafe extern "C" {
    /// The C library's environment, read by `execvp` for `PATH`.
    static mut environ: *const *const c_char;
}

/// Clones a child into the cgroup `cgroup` (a directory descriptor), runs `setup` in it
/// (alloc-free, like a `pre_exec` hook), and execs `what`.
pub fn spawn(
    cgroup: RawFd,
    what: &Prepared,
    setup: &dyn Fn() -> io::Result<()>,
) -> Result<Spawned, CloneError> {
    let failed = CloneError::Failed;
    let (in_r, in_w) = if what.stdin {
        let (r, w) = pipe().map_err(failed)?;
        (r, Some(w))
    } else {
        (dev_null().map_err(failed)?, None)
    };
    let (out_r, out_w) = pipe().map_err(failed)?;
    let (err_r, err_w) = pipe().map_err(failed)?;
    let fds = [in_r.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()];
    // SAFETY: the child only runs `start`'s child part (alloc-free system calls on data
    // prepared before the clone, and `setup`, alloc-free by the caller's contract), then
    // execs or _exits.
    let clone = || match unsafe { sys::clone3(0, Some(cgroup)) } {
        Ok(pid) => Ok(pid),
        // Out of processes or memory: a fork would fail the same way. Anything else
        // (ENOSYS from seccomp or an old kernel, a cgroup that refuses) is this path's
        // own failure.
        Err(e) => Err(match e.raw_os_error() {
            Some(libc::EAGAIN | libc::ENOMEM) => CloneError::Failed(e),
            _ => {
                USABLE.store(false, Ordering::Relaxed);
                CloneError::Unsupported(e)
            }
        }),
    };
    let pid = start(&clone, &fds, what, setup)?;
    drop((in_r, out_w, err_w));
    Ok(Spawned {
        pid,
        stdin: in_w,
        stdout: Some(out_r),
        stderr: Some(err_r),
    })
}

/// Forks a child whose stdin is /dev/null and whose stdout and stderr are `stdout` and
/// `stderr` (the caller's descriptors, left open in the caller), runs `setup` in it and
/// execs `what`; returns its pid once the exec happened. The one-shot sandbox's init
/// starts its command here ([`crate::launch::oneshot`]), the same child part as
/// [`spawn`]. `what.stdin` must be false.
///
/// # Safety
/// The calling process must be single-threaded (then `setup` may allocate: the child is
/// a copy of a process in which no other thread held a lock).
pub unsafe fn fork_onto(
    stdout: RawFd,
    stderr: RawFd,
    what: &Prepared,
    setup: &dyn Fn() -> io::Result<()>,
) -> io::Result<i32> {
    if what.stdin {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let null = dev_null()?;
    // SAFETY: fork in a single-threaded process (the caller's contract); the child runs
    // `start`'s child part, then execs or _exits.
    let clone = || match unsafe { libc::fork() } {
        -1 => Err(CloneError::Failed(io::Error::last_os_error())),
        pid => Ok(pid),
    };
    match start(&clone, &[null.as_raw_fd(), stdout, stderr], what, setup) {
        Ok(pid) => Ok(pid),
        Err(CloneError::Failed(e) | CloneError::Unsupported(e)) => Err(e),
    }
}

/// Makes the child with `clone` (which returns 0 in the child, as fork does), sets its
/// standard streams to `fds` (stdin, stdout, stderr), runs `setup` and execs `what`.
/// Returns the child's pid once it exec'd; a failure in the child comes back as its errno
/// and the child is reaped.
fn start(
    clone: &dyn Fn() -> Result<i32, CloneError>,
    fds: &[RawFd; 3],
    what: &Prepared,
    setup: &dyn Fn() -> io::Result<()>,
) -> Result<i32, CloneError> {
    let (report_r, report_w) = pipe().map_err(CloneError::Failed)?;
    let mut argv: Vec<*const c_char> = what.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const c_char> = what.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let pid = clone()?;
    if pid == 0 {
        let errno = child(fds, what, &argv, &envp, setup);
        // SAFETY: write(2) of a 4-byte stack value, then _exit: nothing of the parent's
        // copy runs in the child.
        unsafe {
            libc::write(report_w.as_raw_fd(), (&raw const errno).cast(), 4);
            libc::_exit(127)
        }
    }
    drop(report_w);
    if let Some(errno) = read_report(report_r) {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        return Err(CloneError::Failed(io::Error::from_raw_os_error(errno)));
    }
    Ok(pid)
}

/// The child's part: standard streams, signals, directory, `setup`, exec. Returns the
/// errno of the step that failed. Alloc-free.
fn child(
    fds: &[RawFd; 3],
    what: &Prepared,
    argv: &[*const c_char],
    envp: &[*const c_char],
    setup: &dyn Fn() -> io::Result<()>,
) -> i32 {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: plain system calls on descriptors and buffers this copy of the process
    // owns; sigset_t is plain data initialised by sigemptyset. `environ` is only written
    // in this single-threaded child, just before exec, to pointers that stay valid
    // (`envp` lives until exec or return).
    unsafe {
        for (target, &fd) in (0..).zip(fds.iter()) {
            // dup2 onto itself keeps close-on-exec: clear it instead.
            let ok = if fd == target {
                libc::fcntl(fd, libc::F_SETFD, 0) >= 0
            } else {
                libc::dup2(fd, target) >= 0
            };
            if !ok {
                return errno();
            }
        }
        // What std's Command does: an empty signal mask and SIGPIPE back to its default
        // (Rust programs ignore it, and an ignored signal stays ignored across exec).
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        if libc::chdir(what.cwd.as_ptr()) < 0 {
            return errno();
        }
        if let Err(e) = setup() {
            return e.raw_os_error().unwrap_or(libc::EIO);
        }
        environ = envp.as_ptr();
        libc::execvp(argv[0], argv.as_ptr());
    }
    errno()
}

/// The child's report: `None` when the pipe closed empty (the exec happened).
fn read_report(report: OwnedFd) -> Option<i32> {
    let mut file = std::fs::File::from(report);
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match io::Read::read(&mut file, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (got == 4).then(|| i32::from_ne_bytes(buf))
}
