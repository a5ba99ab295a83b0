//! Each test forks, installs the filter in the child, makes the call and reports the
//! outcome as the exit code: 0 = as expected, other = which check failed.

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;

use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;

use super::*;
use crate::confine::in_child;

fn programs(network: bool) -> SeccompPrograms {
    SeccompPolicy::default_policy()
        .unwrap()
        .compile(network, false)
        .unwrap()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Runs `call` under the filter; the child exits 0 when it returned -1 with `want`.
fn expect_errno(network: bool, want: i32, call: impl FnOnce() -> libc::c_long) {
    let progs = programs(network);
    let status = in_child(|| {
        progs.apply().unwrap();
        let rc = call();
        if rc == -1 && errno() == want { 0 } else { 1 }
    });
    assert_eq!(
        status,
        WaitStatus::Exited(status.pid().unwrap(), 0),
        "want errno {want}"
    );
}

/// Runs `call` under the filter; the child exits 0 when the call succeeded.
fn expect_ok(network: bool, call: impl FnOnce() -> libc::c_long) {
    let progs = programs(network);
    let status = in_child(|| {
        progs.apply().unwrap();
        if call() >= 0 { 0 } else { 1 }
    });
    assert_eq!(status, WaitStatus::Exited(status.pid().unwrap(), 0));
}

fn expect_killed(call: impl FnOnce()) {
    let progs = programs(false);
    let status = in_child(|| {
        progs.apply().unwrap();
        call();
        0
    });
    assert!(
        matches!(status, WaitStatus::Signaled(_, Signal::SIGSYS, _)),
        "expected SIGSYS, got {status:?}"
    );
}

// SAFETY (for every `unsafe` below): raw syscalls with integer arguments or null pointers;
// the filter refuses them before the kernel looks at any pointer, and the ones that are
// allowed get valid or null arguments.

#[test]
fn the_default_policy_parses_and_every_rule_has_a_reason() {
    let policy = SeccompPolicy::default_policy().unwrap();
    assert!(policy.rules.iter().all(|r| !r.why.is_empty()));
    assert!(programs(false).programs.len() >= 3);
}

#[test]
fn unknown_fields_and_syscalls_are_refused() {
    let bad_field = DEFAULT_POLICY.replacen("\"why\"", "\"whyy\"", 1);
    assert!(SeccompPolicy::parse(&bad_field).is_err());
    let bad_name = DEFAULT_POLICY.replacen("\"ptrace\"", "\"ptrac\"", 1);
    assert!(SeccompPolicy::parse(&bad_name).is_err());
}

#[test]
fn ptrace_is_refused() {
    // SAFETY: see above.
    expect_errno(false, libc::EPERM, || unsafe {
        libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0)
    });
}

#[test]
fn unshare_user_namespace_is_refused() {
    // SAFETY: see above.
    expect_errno(false, libc::EPERM, || unsafe {
        libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER)
    });
}

#[test]
fn clone_with_a_namespace_flag_is_refused_and_plain_fork_works() {
    // SAFETY: see above; the clone is refused before it happens.
    expect_errno(false, libc::EPERM, || unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::CLONE_NEWNS | libc::SIGCHLD,
            0,
            0,
            0,
            0,
        )
    });
    let progs = programs(false);
    let status = in_child(|| {
        progs.apply().unwrap();
        // A plain fork (glibc: clone without namespace flags) must still work.
        // SAFETY: the grandchild only _exits.
        match unsafe { libc::fork() } {
            // SAFETY: _exit ends the grandchild at once.
            0 => unsafe { libc::_exit(7) },
            -1 => 1,
            pid => {
                let mut st = 0;
                // SAFETY: st is a valid out-pointer.
                unsafe { libc::waitpid(pid, &mut st, 0) };
                if libc::WEXITSTATUS(st) == 7 { 0 } else { 2 }
            }
        }
    });
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
}

#[test]
fn clone3_is_enosys_so_libc_falls_back() {
    // SAFETY: see above.
    expect_errno(false, libc::ENOSYS, || unsafe {
        libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0)
    });
}

/// Where the sandbox's user namespace caps every namespace count at 0, the agent may use
/// clone3 (EFAULT for a null argument: the kernel saw the call) and its children still
/// get ENOSYS from their own filter.
#[test]
fn clone3_moves_to_the_children_when_namespaces_are_capped() {
    let policy = SeccompPolicy::default_policy().unwrap();
    let agent = policy.compile(false, true).unwrap();
    let children = policy.compile_children(false, true).unwrap();
    // SAFETY: clone3 with a null argument only fails (EFAULT or ENOSYS).
    let clone3 = || unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 88) };
    let status = in_child(|| {
        agent.apply().unwrap();
        if clone3() != -1 || errno() != libc::EFAULT {
            return 1;
        }
        children.install().unwrap();
        if clone3() == -1 && errno() == libc::ENOSYS {
            0
        } else {
            2
        }
    });
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
}

#[test]
fn threads_still_start_under_the_filter() {
    let progs = programs(false);
    let status = in_child(|| {
        progs.apply().unwrap();
        match std::thread::spawn(|| 5).join() {
            Ok(5) => 0,
            _ => 1,
        }
    });
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
}

#[test]
fn io_uring_keyctl_bpf_are_refused() {
    // SAFETY: see above.
    expect_errno(false, libc::EPERM, || unsafe {
        libc::syscall(libc::SYS_io_uring_setup, 1, std::ptr::null::<u8>())
    });
    // SAFETY: see above.
    expect_errno(false, libc::EPERM, || unsafe {
        libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0)
    });
    // SAFETY: see above.
    expect_errno(false, libc::EPERM, || unsafe {
        libc::syscall(libc::SYS_bpf, 0, std::ptr::null::<u8>(), 0)
    });
}

fn socket(family: i32) -> libc::c_long {
    // SAFETY: see above; a descriptor that is created is leaked until the child exits.
    unsafe { libc::syscall(libc::SYS_socket, family, libc::SOCK_STREAM, 0) }
}

#[test]
fn inet_sockets_need_the_network_grant() {
    expect_errno(false, libc::EPERM, || socket(libc::AF_INET));
    expect_errno(false, libc::EPERM, || socket(libc::AF_INET6));
    expect_ok(true, || socket(libc::AF_INET));
}

#[test]
fn netlink_is_refused_and_unix_is_allowed() {
    // SAFETY: see above.
    let netlink = || unsafe {
        libc::syscall(
            libc::SYS_socket,
            libc::AF_NETLINK,
            libc::SOCK_RAW,
            libc::NETLINK_ROUTE,
        )
    };
    expect_errno(false, libc::EPERM, netlink);
    expect_errno(true, libc::EPERM, netlink);
    expect_ok(false, || socket(libc::AF_UNIX));
    let mut fds = [0i32; 2];
    let p = fds.as_mut_ptr();
    // SAFETY: p points to two writable ints.
    expect_ok(false, move || unsafe {
        libc::syscall(libc::SYS_socketpair, libc::AF_UNIX, libc::SOCK_STREAM, 0, p)
    });
    // SAFETY: refused before the pointer is read.
    expect_errno(true, libc::EPERM, move || unsafe {
        libc::syscall(libc::SYS_socketpair, libc::AF_INET, libc::SOCK_STREAM, 0, p)
    });
}

#[test]
fn tiocsti_is_refused_even_with_high_bits() {
    for req in [0x5412u64, 0x1_0000_5412, 0xffff_ffff_0000_5412, 0x541C] {
        // SAFETY: see above; fd 0 and a null argument, refused before use.
        expect_errno(false, libc::EPERM, move || unsafe {
            libc::syscall(libc::SYS_ioctl, 0, req, std::ptr::null::<u8>())
        });
    }
}

#[test]
fn only_safe_personalities_are_allowed() {
    const PER_BSD: libc::c_ulong = 0x0006;
    const READ_IMPLIES_EXEC: libc::c_ulong = 0x0400000;
    // SAFETY: see above.
    expect_errno(false, libc::EPERM, || unsafe {
        libc::syscall(libc::SYS_personality, PER_BSD)
    });
    // SAFETY: see above.
    expect_errno(false, libc::EPERM, || unsafe {
        libc::syscall(libc::SYS_personality, READ_IMPLIES_EXEC)
    });
    // SAFETY: the query value changes nothing.
    expect_ok(false, || unsafe {
        libc::syscall(libc::SYS_personality, 0xffff_ffffu64)
    });
    // SAFETY: PER_LINUX is the current personality.
    expect_ok(false, || unsafe { libc::syscall(libc::SYS_personality, 0) });
}

#[test]
fn mount_family_and_module_calls_are_refused() {
    for nr in [
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_fsopen,
        libc::SYS_open_tree,
        libc::SYS_setns,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_open_by_handle_at,
        libc::SYS_init_module,
        libc::SYS_kexec_load,
        libc::SYS_process_vm_readv,
    ] {
        // SAFETY: see above; every one is refused before its arguments are read.
        expect_errno(false, libc::EPERM, move || unsafe {
            libc::syscall(nr, 0, 0, 0, 0, 0, 0)
        });
    }
}

#[test]
fn x32_syscalls_kill_the_process() {
    // SAFETY: see above; the x32 getpid is killed before it runs.
    expect_killed(|| unsafe {
        libc::syscall(0x4000_0000 | libc::SYS_getpid);
    });
}

#[cfg(target_arch = "x86_64")]
fn int80_getpid() -> i64 {
    let mut rax: i64 = 20; // getpid in the i386 table
    // SAFETY: int 0x80 with eax=getpid takes no pointer arguments; on kernels without ia32
    // emulation it raises a fault instead, which the caller tolerates.
    unsafe {
        std::arch::asm!("int 0x80", inout("rax") rax, options(nostack));
    }
    rax
}

#[cfg(target_arch = "x86_64")]
#[test]
fn i386_syscalls_kill_the_process() {
    // First check, unfiltered, that this kernel runs int 0x80 at all.
    let plain = in_child(|| if int80_getpid() > 0 { 0 } else { 1 });
    if !matches!(plain, WaitStatus::Exited(_, 0)) {
        eprintln!("skipping: no ia32 emulation here ({plain:?})");
        return;
    }
    expect_killed(|| {
        int80_getpid();
    });
}

/// A path in a fresh temp dir for the privilege-bit tests (the dir outlives the child).
fn scratch() -> (tempfile::TempDir, std::ffi::CString) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    (dir, c)
}

/// Every way to set S_ISUID or S_ISGID on a file or directory is refused with EPERM, with
/// the bit alone, both bits, and high bits around them.
#[test]
fn privilege_bits_are_refused_on_every_mode_taking_call() {
    const AT: i64 = libc::AT_FDCWD as i64;
    const REG: i64 = libc::S_IFREG as i64;
    const CREAT: i64 = (libc::O_CREAT | libc::O_WRONLY) as i64;
    const TMPFILE: i64 = (libc::O_TMPFILE | libc::O_WRONLY) as i64;
    for mode in [0o4755i64, 0o2755, 0o6755, 0o4000, 0xffff_0000 | 0o2644] {
        let (_dir, path) = scratch();
        std::fs::write(path.to_str().unwrap(), "x").unwrap();
        let file = std::fs::File::open(path.to_str().unwrap()).unwrap();
        let (p, fd) = (path.as_ptr() as i64, i64::from(file.as_raw_fd()));
        let tmp = c"/tmp".as_ptr() as i64;
        let calls: [(&str, libc::c_long, [i64; 4]); 12] = [
            ("chmod", libc::SYS_chmod, [p, mode, 0, 0]),
            ("fchmod", libc::SYS_fchmod, [fd, mode, 0, 0]),
            ("fchmodat", libc::SYS_fchmodat, [AT, p, mode, 0]),
            ("fchmodat2", libc::SYS_fchmodat2, [AT, p, mode, 0]),
            ("creat", libc::SYS_creat, [p, mode, 0, 0]),
            ("open O_CREAT", libc::SYS_open, [p, CREAT, mode, 0]),
            ("openat O_CREAT", libc::SYS_openat, [AT, p, CREAT, mode]),
            (
                "openat O_TMPFILE",
                libc::SYS_openat,
                [AT, tmp, TMPFILE, mode],
            ),
            ("mkdir", libc::SYS_mkdir, [p, mode, 0, 0]),
            ("mkdirat", libc::SYS_mkdirat, [AT, p, mode, 0]),
            ("mknod", libc::SYS_mknod, [p, REG | mode, 0, 0]),
            ("mknodat", libc::SYS_mknodat, [AT, p, REG | mode, 0]),
        ];
        for (name, nr, [a, b, c, d]) in calls {
            // SAFETY: the pointers among the arguments are valid C strings that outlive
            // the child, the fd is open; every call is refused before the kernel acts.
            expect_errno(false, libc::EPERM, move || unsafe {
                libc::syscall(nr, a, b, c, d)
            });
            let meta = std::fs::metadata(path.to_str().unwrap()).unwrap();
            assert_eq!(meta.permissions().mode() & 0o6000, 0, "{name} {mode:o}");
            assert!(meta.is_file(), "{name} {mode:o}");
        }
    }
}

/// Ordinary modes still work through the same calls, and opening without O_CREAT is not
/// judged by whatever sits in the mode register.
#[test]
fn ordinary_modes_and_plain_opens_still_work() {
    let (dir, path) = scratch();
    let sub = std::ffi::CString::new(dir.path().join("d").to_str().unwrap()).unwrap();
    let (p, s) = (path.as_ptr() as i64, sub.as_ptr() as i64);
    const AT: i64 = libc::AT_FDCWD as i64;
    let calls: [(libc::c_long, [i64; 4]); 4] = [
        (
            libc::SYS_openat,
            [AT, p, (libc::O_CREAT | libc::O_WRONLY) as i64, 0o755],
        ),
        (libc::SYS_chmod, [p, 0o1777, 0, 0]),
        (libc::SYS_openat, [AT, p, libc::O_RDONLY as i64, 0o6755]),
        (libc::SYS_mkdir, [s, 0o755, 0, 0]),
    ];
    for (nr, [a, b, c, d]) in calls {
        // SAFETY: valid C strings that outlive the child, naming entries in a temp dir.
        expect_ok(false, move || unsafe { libc::syscall(nr, a, b, c, d) });
    }
}

fn open_how_call() -> libc::c_long {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: libc::O_RDONLY as u64,
        mode: 0,
        resolve: 0,
    };
    // SAFETY: a valid path and a valid open_how that outlive the call.
    unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c"/".as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    }
}

/// The agent keeps openat2 (it resolves every path with it); its children get ENOSYS from
/// the children-only filter, stacked on top of the inherited one.
#[test]
fn openat2_is_enosys_for_children_only() {
    expect_ok(false, open_how_call);
    let policy = SeccompPolicy::default_policy().unwrap();
    let children = policy.compile_children(false, false).unwrap();
    assert!(!children.is_empty());
    let progs = programs(false);
    let status = in_child(|| {
        progs.apply().unwrap();
        if open_how_call() < 0 {
            return 1;
        }
        children.install().unwrap();
        if open_how_call() == -1 && errno() == libc::ENOSYS {
            0
        } else {
            2
        }
    });
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
}

/// Only openat2 is children-only: everything else binds the agent too, so no other rule
/// can be lost by a spawn path that forgets the children filter.
#[test]
fn children_rules_stay_out_of_the_agents_own_filter() {
    let policy = SeccompPolicy::default_policy().unwrap();
    assert!(
        policy
            .rules
            .iter()
            .filter(|r| r.processes == Processes::Children)
            .all(|r| r.syscalls == ["openat2"])
    );
    // And only clone3 moves to the children when namespace creation is capped.
    assert!(
        policy
            .rules
            .iter()
            .filter(|r| r.processes == Processes::ChildrenWhenNamespacesCapped)
            .all(|r| r.syscalls == ["clone3"])
    );
}
