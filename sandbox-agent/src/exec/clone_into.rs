//! Making a command's process: every command the agent runs, and the one-shot sandbox's,
//! is started here, in one of two ways, with the same child part (standard streams,
//! signals, directory, the caller's alloc-free setup, exec).
//!
//! - **Born in its cgroup** ([`spawn`]): `clone3(CLONE_INTO_CGROUP)` on a v2 slot's
//!   directory. A child that enters its cgroup by writing to `cgroup.procs` makes the
//!   kernel take its global threadgroup lock for writing, which waits for an RCU grace
//!   period (1 to 11 ms per command on this project's machines). A child born in the
//!   cgroup is never moved, and fork only takes that lock for reading.
//! - **Light** ([`spawn_light`], [`fork_onto`]): vfork-style, sharing the caller's memory
//!   until exec, so no copy of the caller's page tables and no copy-on-write faults after
//!   it. A command that has a v1 slot enters it by a write in its setup (v1 `tasks`: a
//!   move of the one thread, which skips that lock).
//!
//! Either way the child runs between a clone of this multi-threaded process and exec,
//! like a `pre_exec` hook: it makes only alloc-free system calls on data prepared before
//! the clone. A failure in the child (chdir, the confinement, exec) is sent back as an
//! errno over a close-on-exec pipe; end of file means the exec happened.
//!
//! Where clone3 is refused (a seccomp filter that answers ENOSYS, as the agent's own does
//! unless namespace creation is capped, see `policies/README.md`; an old kernel) the
//! caller uses the light way; the refusal is remembered so each later command goes there
//! directly.

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

/// A command's three standard streams: the child's ends and the parent's.
struct Streams {
    /// The child's stdin: the read end of a pipe, or /dev/null.
    child_in: OwnedFd,
    child_out: OwnedFd,
    child_err: OwnedFd,
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

impl Streams {
    fn new(stdin: bool) -> io::Result<Streams> {
        let (child_in, stdin) = if stdin {
            let (r, w) = pipe()?;
            (r, Some(w))
        } else {
            (dev_null()?, None)
        };
        let (stdout, child_out) = pipe()?;
        let (stderr, child_err) = pipe()?;
        Ok(Streams {
            child_in,
            child_out,
            child_err,
            stdin,
            stdout,
            stderr,
        })
    }

    fn child_fds(&self) -> [RawFd; 3] {
        [
            self.child_in.as_raw_fd(),
            self.child_out.as_raw_fd(),
            self.child_err.as_raw_fd(),
        ]
    }

    /// The started child with the parent's ends; the child's ends are closed here.
    fn into_spawned(self, pid: i32) -> Spawned {
        Spawned {
            pid,
            stdin: self.stdin,
            stdout: Some(self.stdout),
            stderr: Some(self.stderr),
        }
    }
}

/// Clones a child into the cgroup `cgroup` (a directory descriptor), runs `setup` in it
/// (alloc-free, like a `pre_exec` hook), and execs `what`.
pub fn spawn(
    cgroup: RawFd,
    what: &Prepared,
    setup: &dyn Fn() -> io::Result<()>,
) -> Result<Spawned, CloneError> {
    let streams = Streams::new(what.stdin).map_err(CloneError::Failed)?;
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
    let pid = start(&Clone::Fork(&clone), &streams.child_fds(), what, setup)?;
    Ok(streams.into_spawned(pid))
}

/// Starts a command with pipes for its streams, as [`spawn`] does, but vfork-style like
/// [`fork_onto`] and in the caller's cgroup: where the command is not born in its own
/// cgroup, `setup` moves it there by a write ([`crate::cgroup::slots::enter`]) before it
/// confines it.
///
/// Why not `std::process::Command`: with a `pre_exec` hook it forks, copying the agent's
/// page tables and making every page either side writes next take a copy-on-write fault;
/// here the agent's serving and blocking threads run on while the child, sharing their
/// memory, makes its few system calls and execs.
///
/// # Safety
/// `setup` must be alloc-free and touch no lock (it runs in a child sharing the
/// caller's memory), as for [`fork_onto`].
pub unsafe fn spawn_light(
    what: &Prepared,
    setup: &dyn Fn() -> io::Result<()>,
) -> io::Result<Spawned> {
    let streams = Streams::new(what.stdin)?;
    match start(&Clone::Light, &streams.child_fds(), what, setup) {
        Ok(pid) => Ok(streams.into_spawned(pid)),
        Err(CloneError::Failed(e) | CloneError::Unsupported(e)) => Err(e),
    }
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
    /// A light child: it runs the parent's signal handlers' code on the parent's memory
    /// should a signal reach it before exec, so it puts every caught signal back to its
    /// default first (see [`block_all_signals`]).
    light: bool,
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
        light: matches!(how, Clone::Light),
    };
    let pid = match how {
        Clone::Fork(clone) => match clone()? {
            0 => child_main(&plan),
            pid => pid,
        },
        Clone::Light => {
            let arg = (&raw const plan).cast_mut().cast::<std::ffi::c_void>();
            let blocked = block_all_signals();
            // SAFETY: `light_entry` runs the alloc-free child part on `plan`, which lives
            // on this frame; CLONE_VFORK suspends this thread until the child execs or
            // exits, so the plan (and the script slots it writes) outlive the child's use.
            let child = unsafe { Light::spawn(libc::CLONE_VFORK, light_entry, arg) };
            restore_signals(&blocked);
            child.map_err(CloneError::Failed)?.release_after_vfork()
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
        if plan.light {
            default_handlers();
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

/// Blocks every signal on the calling thread; the mask it had, for [`restore_signals`].
///
/// Why, around a light child's clone: the child starts with this thread's mask, and a
/// signal it took before exec would run one of the parent's handlers on the parent's
/// memory (a tokio handler wakes the parent's signal listener). Blocked from its first
/// instruction (all but the two the C library keeps for itself, whose handlers act only
/// on a signal this very process sent to one of its threads, which no other process can
/// forge), the child can put each caught signal back to its default
/// ([`default_handlers`]) before it unblocks them: a signal pending by then gets the
/// default action, as it would in the program it execs. This thread is suspended until
/// the child execs anyway (CLONE_VFORK), so nothing it would have handled is lost: a
/// pending signal is delivered when the mask is restored.
fn block_all_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by sigfillset and the kernel.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    }
}

fn restore_signals(old: &libc::sigset_t) {
    // SAFETY: `old` is a mask pthread_sigmask returned.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

/// In a light child, with every signal blocked: each signal the parent catches goes back
/// to its default disposition, in the child's own table (the clone shares memory, not
/// handlers: no CLONE_SIGHAND). Ignored ones stay ignored, as exec keeps them. Alloc-free.
fn default_handlers() {
    for sig in 1..=libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction with a zeroed (SIG_DFL) action and a valid out pointer, on
        // this child's own table; a number the C library reserves answers EINVAL and is
        // left alone.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                let default: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
    }
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

#[cfg(test)]
#[path = "clone_into_tests.rs"]
mod tests;
