//! The sandbox's mount namespace, let go of after the session is over rather than on its
//! way out.
//!
//! Why: when the last reference to a mount namespace goes, the kernel unmounts its tree,
//! and an overlay whose upper layer lies on a disk filesystem (the seeded caches) syncs
//! that whole filesystem as it goes (overlayfs's `sync_fs` at unmount). On a host busy
//! writing, that took from 20 ms to a second, paid by the exit of the sandbox's last
//! process and so by every session's end. The launcher holds the namespace from the
//! init's start; once every process of the sandbox is gone and the teardown is done, it
//! hands its reference to a detached process of its own, which drops it: the unmount and
//! its sync happen there, after the session is reported over.
//!
//! Why this is sound: by then the namespace has no process left (the pid namespace ended
//! with the init) and no reference but this one, so nothing can enter it (`setns` needs
//! this descriptor, which the detached process alone holds and only closes); and what it
//! syncs is already in the host's filesystem, visible to everyone: only its durability
//! waits, as it does for any program that writes without `fsync`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::unistd::Pid;

/// A reference to the mount namespace of `init` (a child of this process).
pub fn hold(init: Pid) -> Option<OwnedFd> {
    let path = format!("/proc/{}/ns/mnt", init.as_raw());
    std::fs::File::open(path).ok().map(OwnedFd::from)
}

/// Drops `ns` in a detached grandchild, which pays for the unmount; this process goes on
/// at once. Where the fork fails, `ns` is dropped here (the cost, not the namespace, is
/// what changes).
pub fn release_detached(ns: OwnedFd) {
    let Ok((ready_r, ready_w)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        return;
    };
    // SAFETY: the launcher is single-threaded (it clones the init, see `run_launcher`);
    // the children only make system calls on descriptors they own, then _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above; the middle child forks once more and leaves, so the
        // grandchild is nobody's to reap here.
        unsafe {
            if libc::fork() == 0 {
                grandchild(&ns, &ready_r);
            }
            libc::_exit(0)
        }
    }
    if pid > 0 {
        // The middle child's copies are closed once it is reaped; then this one: the
        // grandchild's is the last, so its close is the one that unmounts.
        let _ = nix::sys::wait::waitpid(Pid::from_raw(pid), None);
    }
    drop(ns);
    drop(ready_r);
    let _ = nix::unistd::write(&ready_w, &[1]);
}

/// Waits until the launcher has closed its copy, then closes the last one and exits.
/// Alloc-free.
fn grandchild(ns: &OwnedFd, ready: &OwnedFd) -> ! {
    // SAFETY: plain system calls on this process's own descriptors. Standard streams go
    // to /dev/null and every other descriptor is closed first, so nothing the launcher's
    // parent waits on (its output pipes, the lifeline) stays open here.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        let (ns_fd, ready_fd) = (3, 4);
        libc::dup2(ns.as_raw_fd(), ns_fd);
        libc::dup2(ready.as_raw_fd(), ready_fd);
        libc::syscall(libc::SYS_close_range, 5u32, u32::MAX, 0u32);
        let mut byte = 0u8;
        while libc::read(ready_fd, (&raw mut byte).cast(), 1) < 0
            && *libc::__errno_location() == libc::EINTR
        {}
        drop(OwnedFd::from_raw_fd(ns_fd));
        libc::_exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the grandchild is handed is closed by it, and by then by nobody else: the
    /// reader of a pipe whose write end was handed over sees its end once, and this
    /// process keeps no copy (the read would block forever if it did).
    #[test]
    fn the_last_reference_is_dropped_by_the_detached_process() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        release_detached(w);
        let mut file = std::fs::File::from(r);
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut buf).unwrap();
        assert!(buf.is_empty());
    }
}
