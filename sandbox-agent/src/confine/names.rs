//! Names the seccomp policy may use: system calls and argument constants, resolved to the
//! numbers of the architecture the agent is built for. A name missing here is a policy
//! error, so a typo can never silently drop a rule.

/// The native syscall number of `name`, when this table knows it.
pub fn syscall(name: &str) -> Option<i64> {
    use libc::*;
    let nr = match name {
        "acct" => SYS_acct,
        "add_key" => SYS_add_key,
        "adjtimex" => SYS_adjtimex,
        "bpf" => SYS_bpf,
        "chroot" => SYS_chroot,
        "clock_adjtime" => SYS_clock_adjtime,
        "clock_settime" => SYS_clock_settime,
        "clone" => SYS_clone,
        "clone3" => SYS_clone3,
        "delete_module" => SYS_delete_module,
        "fanotify_init" => SYS_fanotify_init,
        "fchmod" => SYS_fchmod,
        "fchmodat" => SYS_fchmodat,
        "fchmodat2" => SYS_fchmodat2,
        "finit_module" => SYS_finit_module,
        "fsconfig" => SYS_fsconfig,
        "fsmount" => SYS_fsmount,
        "fsopen" => SYS_fsopen,
        "fspick" => SYS_fspick,
        "init_module" => SYS_init_module,
        "io_uring_enter" => SYS_io_uring_enter,
        "io_uring_register" => SYS_io_uring_register,
        "io_uring_setup" => SYS_io_uring_setup,
        "ioctl" => SYS_ioctl,
        "kcmp" => SYS_kcmp,
        "kexec_file_load" => SYS_kexec_file_load,
        "kexec_load" => SYS_kexec_load,
        "keyctl" => SYS_keyctl,
        "lookup_dcookie" => SYS_lookup_dcookie,
        "mkdirat" => SYS_mkdirat,
        "mknodat" => SYS_mknodat,
        "mount" => SYS_mount,
        "mount_setattr" => SYS_mount_setattr,
        "move_mount" => SYS_move_mount,
        "name_to_handle_at" => SYS_name_to_handle_at,
        "open_by_handle_at" => SYS_open_by_handle_at,
        "open_tree" => SYS_open_tree,
        "openat" => SYS_openat,
        "openat2" => SYS_openat2,
        "perf_event_open" => SYS_perf_event_open,
        "personality" => SYS_personality,
        "pidfd_getfd" => SYS_pidfd_getfd,
        "pivot_root" => SYS_pivot_root,
        "process_madvise" => SYS_process_madvise,
        "process_vm_readv" => SYS_process_vm_readv,
        "process_vm_writev" => SYS_process_vm_writev,
        "ptrace" => SYS_ptrace,
        "quotactl" => SYS_quotactl,
        "quotactl_fd" => SYS_quotactl_fd,
        "reboot" => SYS_reboot,
        "request_key" => SYS_request_key,
        "setns" => SYS_setns,
        "settimeofday" => SYS_settimeofday,
        "socket" => SYS_socket,
        "socketpair" => SYS_socketpair,
        "swapoff" => SYS_swapoff,
        "swapon" => SYS_swapon,
        "syslog" => SYS_syslog,
        "umount2" => SYS_umount2,
        "unshare" => SYS_unshare,
        "userfaultfd" => SYS_userfaultfd,
        "vhangup" => SYS_vhangup,
        _ => return x86_only(name),
    };
    Some(nr)
}

#[cfg(target_arch = "x86_64")]
fn x86_only(name: &str) -> Option<i64> {
    use libc::*;
    Some(match name {
        "chmod" => SYS_chmod,
        "creat" => SYS_creat,
        "ioperm" => SYS_ioperm,
        "iopl" => SYS_iopl,
        "mkdir" => SYS_mkdir,
        "mknod" => SYS_mknod,
        "modify_ldt" => SYS_modify_ldt,
        "open" => SYS_open,
        "uselib" => SYS_uselib,
        _ => return None,
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn x86_only(_name: &str) -> Option<i64> {
    None
}

/// Whether `name` is a syscall that exists only on other architectures (and is therefore
/// skipped, not refused, when the policy names it).
pub fn is_foreign_only(name: &str) -> bool {
    matches!(
        name,
        "ioperm"
            | "iopl"
            | "modify_ldt"
            | "uselib"
            | "chmod"
            | "creat"
            | "mkdir"
            | "mknod"
            | "open"
    ) && x86_only(name).is_none()
}

/// The value of a named argument constant.
pub fn constant(name: &str) -> Option<u64> {
    let v: u64 = match name {
        "CLONE_NEWNS" => 0x0002_0000,
        "CLONE_NEWCGROUP" => 0x0200_0000,
        "CLONE_NEWUTS" => 0x0400_0000,
        "CLONE_NEWIPC" => 0x0800_0000,
        "CLONE_NEWUSER" => 0x1000_0000,
        "CLONE_NEWPID" => 0x2000_0000,
        "CLONE_NEWNET" => 0x4000_0000,
        "AF_UNIX" => 1,
        "AF_INET" => 2,
        "AF_INET6" => 10,
        "AF_NETLINK" => 16,
        "TIOCSTI" => 0x5412,
        "TIOCLINUX" => 0x541C,
        "PER_LINUX" => 0,
        "PER_LINUX32" => 0x0008,
        "ADDR_NO_RANDOMIZE" => 0x0004_0000,
        "PER_LINUX32_ADDR_NO_RANDOMIZE" => 0x0004_0008,
        "PERSONALITY_QUERY" => 0xffff_ffff,
        "S_ISUID" => 0o4000,
        "S_ISGID" => 0o2000,
        "O_CREAT" => 0o100,
        // __O_TMPFILE | O_DIRECTORY: the flag as user space passes it.
        "O_TMPFILE" => 0o2020_0000,
        _ => return None,
    };
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_libc() {
        let c = |n| constant(n).unwrap();
        assert_eq!(c("CLONE_NEWNS"), libc::CLONE_NEWNS as u64);
        assert_eq!(c("CLONE_NEWCGROUP"), libc::CLONE_NEWCGROUP as u64);
        assert_eq!(c("CLONE_NEWUTS"), libc::CLONE_NEWUTS as u64);
        assert_eq!(c("CLONE_NEWIPC"), libc::CLONE_NEWIPC as u64);
        assert_eq!(c("CLONE_NEWUSER"), libc::CLONE_NEWUSER as u64);
        assert_eq!(c("CLONE_NEWPID"), libc::CLONE_NEWPID as u64);
        assert_eq!(c("CLONE_NEWNET"), libc::CLONE_NEWNET as u64);
        assert_eq!(c("AF_UNIX"), libc::AF_UNIX as u64);
        assert_eq!(c("AF_INET"), libc::AF_INET as u64);
        assert_eq!(c("AF_INET6"), libc::AF_INET6 as u64);
        assert_eq!(c("AF_NETLINK"), libc::AF_NETLINK as u64);
        assert_eq!(c("TIOCSTI"), libc::TIOCSTI);
        assert_eq!(c("TIOCLINUX"), libc::TIOCLINUX);
        assert_eq!(c("ADDR_NO_RANDOMIZE"), libc::ADDR_NO_RANDOMIZE as u64);
        assert_eq!(c("S_ISUID"), u64::from(libc::S_ISUID));
        assert_eq!(c("S_ISGID"), u64::from(libc::S_ISGID));
        assert_eq!(c("O_CREAT"), libc::O_CREAT as u64);
        assert_eq!(c("O_TMPFILE"), libc::O_TMPFILE as u64);
    }
}
