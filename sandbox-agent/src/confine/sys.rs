//! The raw system calls confinement and process control need, each behind a small safe
//! wrapper. Every `unsafe` block of the agent's process handling lives here.
//!
//! Functions marked "alloc-free" are safe to call between fork and exec in a
//! multi-threaded process: they make one system call and touch no heap or lock.

use std::io;

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sets `PR_SET_NO_NEW_PRIVS`: exec can never grant privileges (setuid bits, file caps).
pub fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; no memory is passed.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
}

/// Alloc-free: installs one classic-BPF seccomp program on the calling thread
/// (`seccomp(SECCOMP_SET_MODE_FILTER)` without TSYNC).
pub fn install_seccomp_filter(prog: &[seccompiler::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    let fprog = libc::sock_fprog {
        len,
        // The kernel only reads the program; the cast matches libc's declaration.
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: fprog points to `len` valid instructions (seccompiler's sock_filter has the
    // kernel's layout) that outlive the call; the kernel copies them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Reads `PR_GET_NO_NEW_PRIVS`.
pub fn no_new_privs() -> bool {
    // SAFETY: prctl with integer arguments only; no memory is passed.
    unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 }
}

/// Makes this process a child subreaper: orphaned descendants reparent to it instead of
/// to init, so the agent can find and kill them.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; no memory is passed.
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

/// The Landlock ABI version the kernel offers: 0 when Landlock is missing or disabled.
pub fn landlock_abi() -> u32 {
    landlock_abi_checked().unwrap_or(0)
}

/// The Landlock ABI version, or why the kernel offers none (ENOSYS: not built in;
/// EOPNOTSUPP: disabled at boot).
pub fn landlock_abi_checked() -> io::Result<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel only
    // returns a number; no memory is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(v).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

/// Alloc-free: starts a new session (and process group) led by the caller.
pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no arguments.
    let rc = unsafe { libc::setsid() };
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Alloc-free: sets both the soft and the hard limit of `resource` to `value`.
pub fn setrlimit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `limit` is a valid rlimit on the stack for the duration of the call.
    check(unsafe { libc::setrlimit(resource, &limit) })
}

/// The current hard limit of `resource` (`u64::MAX` for unlimited).
pub fn hard_rlimit(resource: libc::__rlimit_resource_t) -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit on the stack.
    check(unsafe { libc::getrlimit(resource, &mut limit) })?;
    Ok(limit.rlim_max)
}

/// Alloc-free: makes every file descriptor from `first` up close at exec.
pub fn close_fds_from(first: libc::c_uint) -> io::Result<()> {
    // SAFETY: close_range takes integers only. CLOSE_RANGE_CLOEXEC marks the descriptors
    // close-on-exec instead of closing them now, so std's own exec-error pipe (also
    // CLOEXEC) keeps working until exec and nothing std still holds is closed under it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The process's real uid and gid.
pub fn uid_gid() -> (u32, u32) {
    // SAFETY: getuid and getgid cannot fail and take no arguments.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// A pidfd for `pid` (one of our children): it becomes readable when the process exits,
/// so the runtime can wait for the exit without a thread blocked in waitid.
pub fn pidfd_open(pid: i32) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags, no memory. On success it returns a new
    // file descriptor that nothing else owns, so wrapping it in OwnedFd is sound.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, libc::O_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // A descriptor number always fits a c_int; the syscall returns it widened to c_long.
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: see above; the value is a valid, owned descriptor number.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// The pidfd of `pid`, registered with the tokio reactor: `readable().await` resolves when
/// the process exits. Must be called inside a runtime.
pub fn exit_watch(pid: i32) -> io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    let fd = pidfd_open(pid)?;
    // SAFETY: the AsyncFd takes ownership of the OwnedFd, so the descriptor stays open and
    // is not reused for as long as it is registered (the I/O-safety contract).
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}

/// The per-user-namespace counts of every namespace kind (`/proc/sys/user/max_*`).
const NAMESPACE_COUNTS: [&str; 8] = [
    "max_user_namespaces",
    "max_mnt_namespaces",
    "max_pid_namespaces",
    "max_net_namespaces",
    "max_ipc_namespaces",
    "max_uts_namespaces",
    "max_cgroup_namespaces",
    "max_time_namespaces",
];

/// Whether no process of the calling process's user namespace can create a namespace of
/// any kind: every `/proc/sys/user/max_*_namespaces` reads 0. These limits belong to the
/// user namespace (each one has its own) and only a holder of `CAP_SYS_RESOURCE` in it
/// can raise them, which nothing in the sandbox has once the init dropped its
/// capabilities. A kind this kernel does not list counts as not capped.
pub fn namespaces_capped() -> bool {
    if CAPPED_HERE.load(std::sync::atomic::Ordering::Relaxed) {
        return true;
    }
    NAMESPACE_COUNTS.iter().all(|name| {
        std::fs::read_to_string(format!("/proc/sys/user/{name}")).is_ok_and(|v| v.trim() == "0")
    })
}

/// Caps every namespace count of the calling process's user namespace at 0 (needs
/// `CAP_SYS_RESOURCE` in it: the local backend's init, before it drops privileges).
/// Returns the kinds that could not be capped.
pub fn cap_namespaces() -> Vec<String> {
    let uncapped: Vec<String> = NAMESPACE_COUNTS
        .iter()
        .filter(|name| std::fs::write(format!("/proc/sys/user/{name}"), "0").is_err())
        .map(|name| (*name).to_string())
        .collect();
    // Every count of this process's user namespace is 0 now, and stays so: raising one
    // needs CAP_SYS_RESOURCE in it, which nothing started here keeps (the init drops it
    // next). Later checks in this process need not read them again.
    if uncapped.is_empty() {
        CAPPED_HERE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    uncapped
}

/// Set once [`cap_namespaces`] capped every count of this process's user namespace.
static CAPPED_HERE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `CLONE_INTO_CGROUP` (Linux 5.7), from `linux/sched.h`.
pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` as of Linux 5.7 (`CLONE_ARGS_SIZE_VER2`, 88 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// clone3 with `flags` and no new stack (a fork, plus namespaces or `CLONE_INTO_CGROUP`
/// into the cgroup directory `cgroup`), SIGCHLD at exit. Returns the child's pid in the
/// parent and 0 in the child.
///
/// # Safety
/// As for fork: the child is a copy of the caller with only the calling thread; in a
/// multi-threaded process it may only make async-signal-safe calls (no allocation) until
/// it execs or `_exit`s.
pub unsafe fn clone3(flags: u64, cgroup: Option<std::os::fd::RawFd>) -> io::Result<i32> {
    let args = CloneArgs {
        flags: flags | cgroup.map_or(0, |_| CLONE_INTO_CGROUP),
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup.map_or(0, |fd| fd as u64),
        ..CloneArgs::default()
    };
    // SAFETY: `args` is a valid clone_args of the size passed; without CLONE_VM and a
    // stack the call behaves like fork (the caller's contract covers the child).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    i32::try_from(ret).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}
