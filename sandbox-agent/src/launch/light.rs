//! Children that share this process's memory: `clone(CLONE_VM)` onto a stack of their
//! own, for the launcher's helpers that only wait and make system calls (the holder of a
//! user namespace while its maps are written, see [`super::userns`], and the in-process
//! launcher's guardian, see [`super::inline`]).
//!
//! Why not fork: a fork copies this process's page tables, and every page either side
//! writes afterwards takes a copy-on-write fault. On this project's machines (a VM, where
//! a fault costs microseconds) that is 0.2 to 0.7 ms for a launcher-sized process and more
//! for the orchestrator's, against tens of microseconds for a light child.
//!
//! What a light child's function may do (the contract of [`Light::spawn`]): raw system
//! calls on data prepared before the clone, through `libc` (no allocation, no lock, no
//! Rust I/O: the heap and its locks are the parent's, used concurrently), on its own small
//! stack; it never unwinds. It shares the parent's thread-local storage too, so a failing
//! call writes the parent's `errno`: the functions here read `errno` only in paths where
//! the parent no longer runs, or not at all.

use std::ffi::{c_int, c_void};
use std::io;

/// The stack each light child runs on: its functions make a handful of system calls.
const STACK_BYTES: usize = 64 * 1024;
/// Below the stack, never accessible: an overflow faults instead of writing over
/// whatever this process mapped below (the child shares its memory).
const GUARD_BYTES: usize = 4096;
/// The whole mapping: guard page and stack.
const MAP_BYTES: usize = GUARD_BYTES + STACK_BYTES;

/// A running light child and the stack it runs on. Dropped without [`Light::wait`], the
/// stack stays mapped (the child may still run on it): a 64 KiB leak, on error paths.
#[derive(Debug)]
pub struct Light {
    pid: libc::pid_t,
    stack: *mut c_void,
}

impl Light {
    /// Starts `f(arg)` in a child sharing this process's memory, with `flags` added to
    /// `CLONE_VM` (namespaces, say); the child's exit is reported with SIGCHLD.
    ///
    /// # Safety
    /// `f` keeps the module's contract, and what `arg` points to stays valid and unmoved
    /// for as long as the child runs (until [`Light::wait`], or for good if it is never
    /// waited for).
    pub unsafe fn spawn(
        flags: c_int,
        f: extern "C" fn(*mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> io::Result<Light> {
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let stack = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAP_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if stack == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the lowest page of the mapping just made; nothing uses it.
        if unsafe { libc::mprotect(stack, GUARD_BYTES, libc::PROT_NONE) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: the mapping just made; nothing refers to it.
            unsafe { libc::munmap(stack, MAP_BYTES) };
            return Err(e);
        }
        // SAFETY: the stack grows down from its top, inside the mapping just made, which
        // stays mapped while the child may run (unmapped only after `wait` reaped it);
        // `f` and `arg` keep the caller's contract.
        let pid = unsafe {
            let top = stack.cast::<u8>().add(MAP_BYTES).cast::<c_void>();
            libc::clone(f, top, libc::CLONE_VM | flags | libc::SIGCHLD, arg)
        };
        if pid < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: no child was made: nothing runs on the stack.
            unsafe { libc::munmap(stack, MAP_BYTES) };
            return Err(e);
        }
        Ok(Light { pid, stack })
    }

    /// The child's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// For a child made with `CLONE_VFORK`, once [`Light::spawn`] has returned (the child
    /// has exec'd or exited, and runs on its stack no more): frees the stack and gives the
    /// pid, to wait for as any child's.
    pub fn release_after_vfork(self) -> libc::pid_t {
        // SAFETY: CLONE_VFORK returned only once the child exec'd (its memory is its own
        // now) or exited: nothing runs on this stack any more.
        unsafe { libc::munmap(self.stack, MAP_BYTES) };
        self.pid
    }

    /// Reaps the child (waiting for it to end) and frees its stack; its exit status.
    pub fn wait(self) -> io::Result<c_int> {
        let mut status = 0;
        loop {
            // SAFETY: waitpid on our own child with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL) };
            if r == self.pid {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                // Not ours to reap any more (or never was): its stack is left mapped, as
                // it may still be running on it.
                return Err(e);
            }
        }
        // SAFETY: the child is reaped: nothing runs on its stack any more.
        unsafe { libc::munmap(self.stack, MAP_BYTES) };
        Ok(status)
    }
}

/// For a light child that outlives its parent: a session of its own (no terminal's
/// signal reaches it), /dev/null as its standard streams, `keep` (at most four) moved to 3,
/// 4, ... in order and every other descriptor closed, so no copy of its parent's (a pipe
/// somebody waits on for its end) stays open in it. Alloc-free. False when a kept
/// descriptor could not be moved (the table was full): its number then holds nothing, and
/// the child should end rather than act on it.
#[must_use]
pub fn detach(keep: &[c_int]) -> bool {
    let kept = keep.len().min(4);
    // Out of the way first, above every target (3 .. 3 + kept) and the standard streams: a
    // kept number may be the target of another's move. Not some high number: F_DUPFD
    // refuses one at or above the soft RLIMIT_NOFILE, often 1024.
    let first_free: c_int = 3 + c_int::try_from(kept).unwrap_or(4);
    let mut high = [-1; 4];
    // SAFETY: setsid, open, fcntl, dup2 and close on this child's own descriptor table,
    // with a NUL-terminated literal path.
    unsafe {
        libc::setsid();
        for (slot, &fd) in high.iter_mut().zip(keep) {
            *slot = libc::fcntl(fd, libc::F_DUPFD, first_free);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        for (to, &fd) in (3..).zip(high.iter().take(kept)) {
            if fd < 0 || libc::dup2(fd, to) != to {
                close_range(0, u32::MAX);
                return false;
            }
        }
    }
    close_range(first_free.unsigned_abs(), u32::MAX);
    true
}

/// Closes every descriptor of the calling process but `keep` (alloc-free: for a light
/// child, whose table is a copy of its parent's).
pub fn close_all_but(keep: c_int) {
    let Ok(keep) = u32::try_from(keep) else {
        return close_range(0, u32::MAX);
    };
    if keep > 0 {
        close_range(0, keep - 1);
    }
    close_range(keep.saturating_add(1), u32::MAX);
}

/// Closes descriptors `first..=last` of the calling process (alloc-free): `close_range`
/// where the kernel has it (5.9), else one by one up to 65,535.
pub fn close_range(first: u32, last: u32) {
    if first > last {
        return;
    }
    // SAFETY: close_range takes integers and acts on this process's own table.
    if unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) } == 0 {
        return;
    }
    for fd in first..=last.min(65_535) {
        if let Ok(fd) = c_int::try_from(fd) {
            // SAFETY: close of a number in this process's own table.
            unsafe { libc::close(fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Runs `f(arg)` as a light child, waits for it and checks it ended with 7 (the test
    /// children's "all went well").
    ///
    /// # Safety
    /// As [`Light::spawn`]; `arg` outlives this call.
    unsafe fn run_to_seven(f: extern "C" fn(*mut c_void) -> c_int, arg: *mut c_void) {
        // SAFETY: forwarded from the caller.
        let child = unsafe { Light::spawn(0, f, arg) }.unwrap();
        let status = child.wait().unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7);
    }

    struct Echo {
        from: c_int,
        to: c_int,
    }

    extern "C" fn echo(arg: *mut c_void) -> c_int {
        // SAFETY: the test keeps `Echo` alive until the child is reaped; raw read/write.
        unsafe {
            let e = &*arg.cast::<Echo>();
            let mut b = 0u8;
            if libc::read(e.from, (&raw mut b).cast(), 1) != 1 {
                return 3;
            }
            b += 1;
            libc::write(e.to, (&raw const b).cast(), 1);
        }
        7
    }

    #[test]
    fn a_light_child_runs_on_its_own_stack_and_is_reaped() {
        let (a_r, a_w) = nix::unistd::pipe().unwrap();
        let (b_r, b_w) = nix::unistd::pipe().unwrap();
        let mut args = Echo {
            from: a_r.as_raw_fd(),
            to: b_w.as_raw_fd(),
        };
        nix::unistd::write(&a_w, &[41]).unwrap();
        // SAFETY: `echo` keeps the contract; `args` outlives the child (waited in there).
        unsafe { run_to_seven(echo, (&raw mut args).cast()) };
        let mut got = [0u8; 1];
        nix::unistd::read(&b_r, &mut got).unwrap();
        assert_eq!(got[0], 42);
    }

    struct Crossed {
        first: c_int,
        second: c_int,
    }

    extern "C" fn crossed(arg: *mut c_void) -> c_int {
        // SAFETY: the test keeps `Crossed` alive until the child is reaped; dup2, write and
        // fcntl on this child's own table.
        unsafe {
            let c = &*arg.cast::<Crossed>();
            // Each kept descriptor sits where the other is to go.
            libc::dup2(c.first, 4);
            libc::dup2(c.second, 3);
            if !detach(&[4, 3]) {
                return 5;
            }
            if libc::write(3, b"a".as_ptr().cast(), 1) != 1
                || libc::write(4, b"b".as_ptr().cast(), 1) != 1
            {
                return 3;
            }
            if libc::fcntl(5, libc::F_GETFD) != -1 {
                return 4;
            }
        }
        7
    }

    #[test]
    fn detach_moves_crossed_descriptors_in_order_and_closes_the_rest() {
        let (one_r, one_w) = nix::unistd::pipe().unwrap();
        let (two_r, two_w) = nix::unistd::pipe().unwrap();
        let mut args = Crossed {
            first: one_w.as_raw_fd(),
            second: two_w.as_raw_fd(),
        };
        // SAFETY: `crossed` keeps the contract; `args` outlives the child (waited in there).
        unsafe { run_to_seven(crossed, (&raw mut args).cast()) };
        let mut got = [0u8; 1];
        nix::unistd::read(&one_r, &mut got).unwrap();
        assert_eq!(&got, b"a", "the descriptor kept first (at 4) went to 3");
        nix::unistd::read(&two_r, &mut got).unwrap();
        assert_eq!(&got, b"b", "the descriptor kept second (at 3) went to 4");
    }
}
