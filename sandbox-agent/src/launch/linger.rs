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

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd};

use nix::unistd::Pid;

use super::light::Light;

/// A reference to the mount namespace of `init` (a child of this process).
pub fn hold(init: Pid) -> Option<OwnedFd> {
    let path = format!("/proc/{}/ns/mnt", init.as_raw());
    std::fs::File::open(path).ok().map(OwnedFd::from)
}

/// Drops `ns` in a detached light child (see [`super::light`]: no copy of this process's
/// page tables), which pays for the unmount; this process goes on at once. Where the clone
/// fails, `ns` is dropped here (the cost, not the namespace, is what changes).
pub fn release_detached(ns: OwnedFd) {
    let Ok((ready_r, ready_w)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        return;
    };
    // Read by the child, which may outlive this process: leaked (two numbers).
    let args = Box::leak(Box::new(Release {
        ns: ns.as_raw_fd(),
        ready: ready_r.as_raw_fd(),
    }));
    // The child is born with its own name: a clone copies the calling thread's `comm`,
    // so this thread wears the name across the clone and takes its own back after. Named
    // by the child instead, it would show the launcher's name until it first ran, which
    // on a busy host can be after the launcher has ended (and a watcher counted it as a
    // leftover of the session).
    let own = thread_name();
    // SAFETY: PR_SET_NAME copies at most 16 bytes from a NUL-terminated string.
    unsafe { libc::prctl(libc::PR_SET_NAME, RELEASE_NAME.as_ptr()) };
    // SAFETY: `release` keeps the light-child contract (raw system calls on its own
    // descriptors, numbered by `args`, which is never freed); the child is never waited
    // for: it outlives this call, its stack and `args` stay mapped.
    let _ = unsafe { Light::spawn(0, release, (&raw mut *args).cast::<c_void>()) };
    // SAFETY: as above; `own` is NUL-terminated (PR_GET_NAME writes at most 16 bytes,
    // the last a NUL, into the 16 zeroed ones).
    unsafe { libc::prctl(libc::PR_SET_NAME, own.as_ptr()) };
    // The child's copies of both were made by the clone (its descriptor table is a copy):
    // this one's go now, then the byte tells the child its copy of `ns` is the last.
    drop(ns);
    drop(ready_r);
    let _ = nix::unistd::write(&ready_w, &[1]);
}

/// The releasing child's name (its `comm`, what `ps -e` and `pgrep` show): it may outlive
/// the launcher by the unmount's sync, showing the launcher's command line (it shares the
/// launcher's memory), so its own name says what it is.
pub const RELEASE_NAME: &std::ffi::CStr = c"cordon-unmount";

/// The calling thread's name, NUL-terminated.
fn thread_name() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into the buffer given.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    name
}

/// What the releasing child holds, by number in its own descriptor table.
struct Release {
    ns: c_int,
    ready: c_int,
}

/// Out of this process's session and streams, waits until this process has closed its
/// copy, then closes the last one (the unmount happens here) and ends.
extern "C" fn release(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the leaked `Release`; plain system calls on this child's own
    // descriptors. Standard streams go to /dev/null and every other descriptor is closed
    // first, so nothing the launcher's parent waits on (its output pipes, the lifeline)
    // stays open here.
    unsafe {
        let args = &*arg.cast::<Release>();
        let (ns_fd, ready_fd) = (3, 4);
        if !super::light::detach(&[args.ns, args.ready]) {
            // Every descriptor here is closed: the namespace goes with the launcher's own
            // copy, as where the clone fails.
            return 0;
        }
        let mut byte = 0u8;
        // Interrupted or not, a return is the launcher's byte or its end: either way
        // this copy is the last one once the read returns (errno is not ours to read).
        libc::read(ready_fd, (&raw mut byte).cast(), 1);
        libc::close(ns_fd);
    }
    0
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

    /// The launcher's thread lends its name to the clone only: it has its own back after.
    #[test]
    fn the_launcher_keeps_its_own_name() {
        std::thread::Builder::new()
            .name("launcher-here".into())
            .spawn(|| {
                let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
                release_detached(w);
                drop(r);
                let name = thread_name();
                assert_eq!(&name[..14], b"launcher-here\0");
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
