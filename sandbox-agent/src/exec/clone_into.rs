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
use crate::launch::light::Light;

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
    /// Where `argv[0]` is looked for, in order: itself when it has a slash, else each
    /// directory of the `PATH` of `envp` joined with it (as `execvp` searches).
    candidates: Vec<CString>,
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
        let program = argv.first().map_or("", String::as_str);
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str());
        let candidates = search_path(program, path)
            .iter()
            .map(|p| c(p.as_bytes()))
            .collect::<io::Result<_>>()?;
        Ok(Prepared {
            candidates,
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

/// Where `execvp` would look for `program`, in order, under `path` (the environment's
/// `PATH`; without one, the C library's default): `program` itself when it holds a slash,
/// else each directory joined with it (an empty entry is the working directory).
fn search_path(program: &str, path: Option<&str>) -> Vec<String> {
    if program.contains('/') {
        return vec![program.to_string()];
    }
    if program.is_empty() {
        return Vec::new();
    }
    path.unwrap_or("/bin:/usr/bin")
        .split(':')
        .map(|dir| match dir {
            "" => program.to_string(),
            d => format!("{}/{program}", d.trim_end_matches('/')),
        })
        .collect()
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
    let pid = start(&Clone::Fork(&clone), &fds, what, setup)?;
    drop((in_r, out_w, err_w));
    Ok(Spawned {
        pid,
        stdin: in_w,
        stdout: Some(out_r),
        stderr: Some(err_r),
    })
}

/// Starts a child whose stdin is /dev/null and whose stdout and stderr are `stdout` and
/// `stderr` (the caller's descriptors, left open in the caller), runs `setup` in it and
/// execs `what`; returns its pid once the exec happened. The one-shot sandbox's init
/// starts its command here ([`crate::launch::oneshot`]), the same child part as
/// [`spawn`]. `what.stdin` must be false.
///
/// The child is made vfork-style (`CLONE_VM | CLONE_VFORK` on a stack of its own, see
/// `launch::light`): no copy of the caller's page tables (the init is a copy of the
/// orchestrator, whose fork costs a millisecond on this project's machines), and the
/// caller waits, suspended, until the child has exec'd or given up.
///
/// # Safety
/// `setup` must be alloc-free and touch no lock (it runs in a child sharing the
/// caller's memory), as for [`spawn`].
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
    // SAFETY: the child runs only `start`'s child part (alloc-free system calls on data
    // prepared before the clone, and `setup`, alloc-free by the caller's contract), on the
    // stack `Light` made, then execs or _exits; CLONE_VFORK keeps this process suspended
    // until then, so nothing it shares changes under it.
    let clone = Clone::Light;
    match start(&clone, &[null.as_raw_fd(), stdout, stderr], what, setup) {
        Ok(pid) => Ok(pid),
        Err(CloneError::Failed(e) | CloneError::Unsupported(e)) => Err(e),
    }
}

/// How [`start`] makes the child.
enum Clone<'a> {
    /// A fork-like clone (no `CLONE_VM`) that returns 0 in the child, which then runs the
    /// child part on its copy of the caller's stack.
    Fork(&'a dyn Fn() -> Result<i32, CloneError>),
    /// A vfork-style light child running the child part on a stack of its own.
    Light,
}

/// Everything the child part needs, made before the clone.
struct ChildPlan<'a> {
    fds: &'a [RawFd; 3],
    what: &'a Prepared,
    argv: &'a [*const c_char],
    envp: &'a [*const c_char],
    /// `/bin/sh CANDIDATE ARGS...`, slot 1 filled in by the child: for a program the
    /// kernel will not exec (no `#!`), as `execvp` does.
    script: *mut *const c_char,
    setup: &'a dyn Fn() -> io::Result<()>,
    report: RawFd,
}

/// The child's whole life: the child part, then its errno to the report pipe, then out.
fn child_main(plan: &ChildPlan) -> ! {
    let errno = child(plan);
    // SAFETY: write(2) of a 4-byte stack value, then _exit: nothing of the parent's copy
    // (or, for a light child, of the parent's memory) runs in the child.
    unsafe {
        libc::write(plan.report, (&raw const errno).cast(), 4);
        libc::_exit(127)
    }
}

/// The light child's entry: `arg` is the `ChildPlan` on the suspended parent's stack.
extern "C" fn light_entry(arg: *mut std::ffi::c_void) -> libc::c_int {
    // SAFETY: the parent made `arg` from a live `ChildPlan` and is suspended (CLONE_VFORK)
    // until this child execs or exits, so the plan outlives every use here.
    child_main(unsafe { &*arg.cast::<ChildPlan>() })
}

/// Makes the child as `how` says, sets its standard streams to `fds` (stdin, stdout,
/// stderr), runs `setup` and execs `what`. Returns the child's pid once it exec'd; a
/// failure in the child comes back as its errno and the child is reaped.
fn start(
    how: &Clone,
    fds: &[RawFd; 3],
    what: &Prepared,
    setup: &dyn Fn() -> io::Result<()>,
) -> Result<i32, CloneError> {
    let (report_r, report_w) = pipe().map_err(CloneError::Failed)?;
    let mut argv: Vec<*const c_char> = what.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const c_char> = what.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut script: Vec<*const c_char> = vec![c"/bin/sh".as_ptr(), std::ptr::null()];
    script.extend(argv.iter().skip(1));
    let plan = ChildPlan {
        fds,
        what,
        argv: &argv,
        envp: &envp,
        script: script.as_mut_ptr(),
        setup,
        report: report_w.as_raw_fd(),
    };
    let pid = match how {
        Clone::Fork(clone) => match clone()? {
            0 => child_main(&plan),
            pid => pid,
        },
        Clone::Light => {
            let arg = (&raw const plan).cast_mut().cast::<std::ffi::c_void>();
            // SAFETY: `light_entry` runs the alloc-free child part on `plan`, which lives
            // on this frame; CLONE_VFORK suspends this thread until the child execs or
            // exits, so the plan (and the script slots it writes) outlive the child's use.
            let child = unsafe { Light::spawn(libc::CLONE_VFORK, light_entry, arg) }
                .map_err(CloneError::Failed)?;
            child.release_after_vfork()
        }
    };
    drop(report_w);
    if let Some(errno) = read_report(report_r) {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        return Err(CloneError::Failed(io::Error::from_raw_os_error(errno)));
    }
    Ok(pid)
}

/// The child's part: standard streams, signals, directory, `setup`, exec. Returns the
/// errno of the step that failed. Alloc-free.
fn child(plan: &ChildPlan) -> i32 {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: plain system calls on descriptors and buffers this child owns or the
    // parent prepared for it; sigset_t is plain data initialised by sigemptyset.
    unsafe {
        for (target, &fd) in (0..).zip(plan.fds.iter()) {
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
        if libc::chdir(plan.what.cwd.as_ptr()) < 0 {
            return errno();
        }
        if let Err(e) = (plan.setup)() {
            return e.raw_os_error().unwrap_or(libc::EIO);
        }
    }
    exec_search(plan)
}

/// `execvp` on the prepared candidates, with `envp` as the environment: each candidate
/// in turn, on to the next where the file is missing or not permitted, a file the kernel
/// will not exec run by `/bin/sh` (as `execvp` does). Returns the errno that ends the
/// search (EACCES when any candidate was refused so). Alloc-free.
fn exec_search(plan: &ChildPlan) -> i32 {
    let mut refused = false;
    let mut last = libc::ENOENT;
    for candidate in &plan.what.candidates {
        // SAFETY: null-terminated arrays of pointers to NUL-terminated strings, all
        // prepared before the clone and alive until exec; slot 1 of `script` is ours.
        let errno = unsafe {
            libc::execve(candidate.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
            let mut e = *libc::__errno_location();
            if e == libc::ENOEXEC {
                *plan.script.add(1) = candidate.as_ptr();
                libc::execve(
                    c"/bin/sh".as_ptr(),
                    plan.script.cast_const(),
                    plan.envp.as_ptr(),
                );
                e = *libc::__errno_location();
            }
            e
        };
        match errno {
            libc::EACCES => refused = true,
            libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
            other => return other,
        }
        last = errno;
    }
    if refused { libc::EACCES } else { last }
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
