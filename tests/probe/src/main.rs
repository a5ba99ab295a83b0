//! `escape-probe CASE [ARGS]`: attempts one escape from inside a sandbox with raw
//! syscalls and reports what the kernel answered, one line:
//! `RESULT <case> denied <errno>` or `RESULT <case> allowed`.
//! Cases that a correct sandbox answers by killing the process (foreign-architecture
//! syscalls) print nothing more: the caller checks the signal.
//!
//! Every attempt is harmless if it succeeds: it targets only objects the probe or its
//! caller created (its own child, a path the caller names, a listener the caller opened).
#![allow(clippy::undocumented_unsafe_blocks)]
// a test probe made of raw syscalls; each is commented
// A probe given bad arguments by its caller should panic loudly: that is the report.
#![allow(clippy::unwrap_used)]

use std::ffi::CString;
use std::process::ExitCode;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn report(case: &str, ret: i64) {
    if ret < 0 {
        println!("RESULT {case} denied {}", errno());
    } else {
        println!("RESULT {case} allowed");
    }
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// A child that just waits, to be the target of cross-process attacks.
fn sleeper() -> libc::pid_t {
    // SAFETY: the child only calls async-signal-safe pause/_exit.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::pause();
            libc::_exit(0);
        }
        pid
    }
}

fn kill_child(pid: libc::pid_t) {
    // SAFETY: pid is our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
}

fn raw(nr: i64, a: [u64; 6]) -> i64 {
    // SAFETY: raw syscalls with arguments that point nowhere or at our own buffers; the
    // kernel validates them. This is the point of the probe.
    unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let case = args.get(1).map(String::as_str).unwrap_or("");
    let arg = args.get(2).cloned().unwrap_or_default();
    match case {
        "status" => {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            for line in status.lines() {
                if [
                    "NoNewPrivs",
                    "Seccomp:",
                    "CapEff",
                    "CapPrm",
                    "CapBnd",
                    "CapAmb",
                    "Uid",
                    "Gid",
                ]
                .iter()
                .any(|k| line.starts_with(k))
                {
                    println!("{line}");
                }
            }
        }
        "ptrace-sibling" => {
            let pid = sleeper();
            report(
                case,
                raw(
                    libc::SYS_ptrace,
                    [libc::PTRACE_ATTACH as u64, pid as u64, 0, 0, 0, 0],
                ),
            );
            kill_child(pid);
        }
        "ptrace-traceme" => report(
            case,
            raw(
                libc::SYS_ptrace,
                [libc::PTRACE_TRACEME as u64, 0, 0, 0, 0, 0],
            ),
        ),
        "process-vm-readv" => {
            let pid = sleeper();
            let mut buf = [0u8; 8];
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: 8,
            };
            let remote = libc::iovec {
                iov_base: std::ptr::without_provenance_mut(0x400000),
                iov_len: 8,
            };
            let ret = raw(
                libc::SYS_process_vm_readv,
                [
                    pid as u64,
                    &local as *const _ as u64,
                    1,
                    &remote as *const _ as u64,
                    1,
                    0,
                ],
            );
            report(case, ret);
            kill_child(pid);
        }
        "unshare-user" => report(
            case,
            raw(
                libc::SYS_unshare,
                [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0],
            ),
        ),
        "unshare-net" => report(
            case,
            raw(
                libc::SYS_unshare,
                [libc::CLONE_NEWNET as u64, 0, 0, 0, 0, 0],
            ),
        ),
        "clone-newns" => {
            // A fork-like clone that also asks for a new mount namespace.
            let flags = (libc::CLONE_NEWNS | libc::SIGCHLD) as u64;
            let ret = raw(libc::SYS_clone, [flags, 0, 0, 0, 0, 0]);
            if ret == 0 {
                // SAFETY: we are the child of a successful clone: leave at once.
                unsafe { libc::_exit(0) };
            }
            report(case, ret);
        }
        "clone3" => {
            let args = [0u64; 11];
            report(
                case,
                raw(libc::SYS_clone3, [args.as_ptr() as u64, 88, 0, 0, 0, 0]),
            );
        }
        "mount" => {
            let (src, target, fs) = (cstr("none"), cstr(&arg), cstr("tmpfs"));
            report(
                case,
                raw(
                    libc::SYS_mount,
                    [
                        src.as_ptr() as u64,
                        target.as_ptr() as u64,
                        fs.as_ptr() as u64,
                        0,
                        0,
                        0,
                    ],
                ),
            );
        }
        "chroot" => {
            let target = cstr(&arg);
            report(
                case,
                raw(libc::SYS_chroot, [target.as_ptr() as u64, 0, 0, 0, 0, 0]),
            );
        }
        "io_uring" => {
            let mut params = [0u8; 120];
            report(
                case,
                raw(
                    libc::SYS_io_uring_setup,
                    [4, params.as_mut_ptr() as u64, 0, 0, 0, 0],
                ),
            );
        }
        "keyctl" => report(
            case,
            raw(
                libc::SYS_keyctl,
                [0 /* KEYCTL_GET_KEYRING_ID */, u64::MAX - 2, 0, 0, 0, 0],
            ),
        ),
        "add_key" => {
            let (t, d) = (cstr("user"), cstr("cordon-probe"));
            report(
                case,
                raw(
                    libc::SYS_add_key,
                    [t.as_ptr() as u64, d.as_ptr() as u64, 0, 0, u64::MAX - 2, 0],
                ),
            );
        }
        "bpf" => {
            let attr = [0u8; 128];
            report(
                case,
                raw(
                    libc::SYS_bpf,
                    [
                        0, /* BPF_MAP_CREATE */
                        attr.as_ptr() as u64,
                        128,
                        0,
                        0,
                        0,
                    ],
                ),
            );
        }
        "perf_event_open" => {
            let attr = [0u8; 128];
            report(
                case,
                raw(
                    libc::SYS_perf_event_open,
                    [attr.as_ptr() as u64, 0, u64::MAX, u64::MAX, 0, 0],
                ),
            );
        }
        "userfaultfd" => report(case, raw(libc::SYS_userfaultfd, [0, 0, 0, 0, 0, 0])),
        "init_module" => report(case, raw(libc::SYS_finit_module, [u64::MAX, 0, 0, 0, 0, 0])),
        "kexec_load" => report(case, raw(libc::SYS_kexec_load, [0, 0, 0, 0, 0, 0])),
        "open_by_handle_at" => {
            let handle = [0u8; 16];
            report(
                case,
                raw(
                    libc::SYS_open_by_handle_at,
                    [libc::AT_FDCWD as u64, handle.as_ptr() as u64, 0, 0, 0, 0],
                ),
            );
        }
        "tiocsti" => {
            let c = b'x';
            report(
                case,
                raw(
                    libc::SYS_ioctl,
                    [0, libc::TIOCSTI, &c as *const u8 as u64, 0, 0, 0],
                ),
            );
        }
        "tiocsti-highbit" => {
            // The kernel truncates the request to 32 bits: 0x1_0000_5412 is TIOCSTI to it.
            let c = b'x';
            report(
                case,
                raw(
                    libc::SYS_ioctl,
                    [
                        0,
                        0x1_0000_0000 | libc::TIOCSTI,
                        &c as *const u8 as u64,
                        0,
                        0,
                        0,
                    ],
                ),
            );
        }
        "tioclinux" => {
            let sub = [0u8; 2];
            report(
                case,
                raw(
                    libc::SYS_ioctl,
                    [0, libc::TIOCLINUX, sub.as_ptr() as u64, 0, 0, 0],
                ),
            );
        }
        "personality" => report(
            case,
            raw(
                libc::SYS_personality,
                [0x0040_0000 /* READ_IMPLIES_EXEC */, 0, 0, 0, 0, 0],
            ),
        ),
        "socket-inet" => report(
            case,
            raw(
                libc::SYS_socket,
                [libc::AF_INET as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0],
            ),
        ),
        "socket-inet6" => report(
            case,
            raw(
                libc::SYS_socket,
                [libc::AF_INET6 as u64, libc::SOCK_DGRAM as u64, 0, 0, 0, 0],
            ),
        ),
        "socket-netlink" => report(
            case,
            raw(
                libc::SYS_socket,
                [libc::AF_NETLINK as u64, libc::SOCK_RAW as u64, 0, 0, 0, 0],
            ),
        ),
        "socket-packet" => report(
            case,
            raw(
                libc::SYS_socket,
                [libc::AF_PACKET as u64, libc::SOCK_RAW as u64, 0, 0, 0, 0],
            ),
        ),
        "socket-unix" => report(
            case,
            raw(
                libc::SYS_socket,
                [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0],
            ),
        ),
        "connect" => {
            // ARG is 127.0.0.1:PORT of a listener the test opened outside the sandbox.
            match std::net::TcpStream::connect_timeout(
                &arg.parse().unwrap(),
                std::time::Duration::from_secs(2),
            ) {
                Ok(_) => println!("RESULT {case} allowed"),
                Err(e) => println!("RESULT {case} denied {}", e.raw_os_error().unwrap_or(0)),
            }
        }
        "x32" => {
            // getpid through the x32 ABI: must kill the process.
            report(case, raw(0x4000_0000 | libc::SYS_getpid, [0; 6]));
        }
        "int80" => {
            // getpid (20) through the i386 entry point: must kill the process.
            let mut ret: i64 = 20;
            // SAFETY: `int 0x80` with eax=20 is the i386 getpid; it reads no memory.
            unsafe { std::arch::asm!("int 0x80", inout("rax") ret) };
            report(case, if ret < 0 { -1 } else { ret });
        }
        "write" => {
            let ret = std::fs::write(&arg, b"escaped\n");
            match ret {
                Ok(()) => println!("RESULT {case} allowed"),
                Err(e) => println!("RESULT {case} denied {}", e.raw_os_error().unwrap_or(0)),
            }
        }
        "read" => match std::fs::read(&arg) {
            Ok(_) => println!("RESULT {case} allowed"),
            Err(e) => println!("RESULT {case} denied {}", e.raw_os_error().unwrap_or(0)),
        },
        "readdir" => match std::fs::read_dir(&arg) {
            Ok(_) => println!("RESULT {case} allowed"),
            Err(e) => println!("RESULT {case} denied {}", e.raw_os_error().unwrap_or(0)),
        },
        "hardlink" => {
            // ARG is "SRC DST": link SRC (outside) into DST (inside the workspace).
            let (src, dst) = arg.split_once(' ').unwrap_or((&arg, ""));
            match std::fs::hard_link(src, dst) {
                Ok(()) => println!("RESULT {case} allowed"),
                Err(e) => println!("RESULT {case} denied {}", e.raw_os_error().unwrap_or(0)),
            }
        }
        "open-creat-setuid" => {
            // openat(O_CREAT) of ARG (in the workspace) with mode 04755.
            let p = cstr(&arg);
            let flags = (libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL) as u64;
            let at = libc::AT_FDCWD as u64;
            report(
                case,
                raw(
                    libc::SYS_openat,
                    [at, p.as_ptr() as u64, flags, 0o4755, 0, 0],
                ),
            );
        }
        "openat2-creat-setuid" => {
            // openat2(O_CREAT) of ARG with mode 06755 inside struct open_how.
            let p = cstr(&arg);
            let how: [u64; 3] = [(libc::O_CREAT | libc::O_WRONLY) as u64, 0o6755, 0];
            let at = libc::AT_FDCWD as u64;
            let ret = raw(
                libc::SYS_openat2,
                [at, p.as_ptr() as u64, how.as_ptr() as u64, 24, 0, 0],
            );
            report(case, ret);
        }
        "mknod-setuid" => {
            // mknodat of a regular file ARG with mode 04755.
            let p = cstr(&arg);
            let mode = u64::from(libc::S_IFREG) | 0o4755;
            let at = libc::AT_FDCWD as u64;
            report(
                case,
                raw(libc::SYS_mknodat, [at, p.as_ptr() as u64, mode, 0, 0, 0]),
            );
        }
        "alloc" => {
            // ARG: MiB to allocate and touch. Past a memory limit the kernel kills the
            // probe (SIGKILL) before it can report "allowed".
            let mib: usize = arg.parse().unwrap();
            let mut held: Vec<Vec<u8>> = Vec::new();
            for _ in 0..mib {
                // Every page written, so it is really charged.
                held.push(vec![1u8; 1 << 20]);
            }
            println!("ALLOCATED {}", held.len());
            println!("RESULT {case} allowed");
        }
        "fork-count" => {
            // ARG: how many children to try to start. Reports how many forks succeeded
            // and the errno of the first refusal, then kills its children.
            let want: usize = arg.parse().unwrap();
            let mut children = Vec::new();
            let mut refused = 0;
            for _ in 0..want {
                let pid = sleeper();
                if pid < 0 {
                    refused = errno();
                    break;
                }
                children.push(pid);
            }
            println!("FORKED {}", children.len());
            for pid in children {
                kill_child(pid);
            }
            if refused != 0 {
                println!("RESULT {case} denied {refused}");
            } else {
                println!("RESULT {case} allowed");
            }
        }
        other => {
            eprintln!("escape-probe: unknown case {other:?}");
            return ExitCode::from(64);
        }
    }
    ExitCode::SUCCESS
}
