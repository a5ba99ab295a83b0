//! One session's round trip on one CPU: the controller's session thread and the agent's
//! serving thread share a CPU, and every other thread and every command keeps the CPUs
//! the process was started with.
//!
//! Why: a tool call is two wake-ups (the request, the answer), each of a thread that
//! waits on the other. When the wakee's CPU is idle, the wake-up is an interrupt to that
//! CPU and, on a virtual machine, its exit from halt through the hypervisor: tens of
//! microseconds, more than the Read itself (BENCHMARKS.md, thirteenth session: a confined
//! 4 KiB Read's work is about 22 µs, its round trip 211 to 252 µs unpinned and 139 to 144
//! µs with both ends on one CPU). On one CPU the writer's block hands the CPU straight to
//! the reader.
//!
//! What is pinned: the threads that wait on each other and do only short work (a session
//! runtime's one thread, the agent's serving thread). What is not: a runtime's
//! blocking pool (its `on_thread_start` calls [`unpin_current_thread`]) and every process
//! started from a pinned thread ([`restore`] between fork and exec where the spawn forks
//! anyway, [`with_every_cpu`] around it where it must stay `posix_spawn`): commands,
//! builds, git and hooks run wherever the scheduler puts them, on every CPU the process
//! was given.
//!
//! A process that never pins (the team server, the tests) is untouched: nothing here
//! acts before [`pin_to`] or [`pin_here`] was called once.

use std::sync::OnceLock;

use nix::sched::{CpuSet, sched_getaffinity, sched_getcpu, sched_setaffinity};
use nix::unistd::Pid;

/// The calling thread's mask as it was before this process pinned anything: what every
/// other thread and child gets back.
static ORIGINAL: OnceLock<CpuSet> = OnceLock::new();

fn this_thread() -> Pid {
    // Pid 0: the calling thread (sched_setaffinity acts on a thread, not the process).
    Pid::from_raw(0)
}

fn remember_original() -> std::io::Result<CpuSet> {
    if let Some(set) = ORIGINAL.get() {
        return Ok(*set);
    }
    let set = sched_getaffinity(this_thread())?;
    Ok(*ORIGINAL.get_or_init(|| set))
}

/// The CPUs in `set`.
fn cpus(set: &CpuSet) -> impl Iterator<Item = usize> + '_ {
    (0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false))
}

/// Pins the calling thread to `cpu`, remembering the process's mask first. The kernel
/// refuses a CPU outside the process's cpuset (EINVAL); the thread then stays as it was.
pub fn pin_to(cpu: usize) -> std::io::Result<()> {
    remember_original()?;
    let mut one = CpuSet::new();
    one.set(cpu)?;
    sched_setaffinity(this_thread(), &one)?;
    Ok(())
}

/// Pins the calling thread to the CPU it runs on now; returns that CPU. `None` (and
/// nothing changed) when the process may use only one CPU anyway, or the kernel refuses.
pub fn pin_here() -> Option<usize> {
    let original = remember_original().ok()?;
    // A second CPU, or nothing to choose between.
    cpus(&original).nth(1)?;
    let cpu = sched_getcpu().ok()?;
    pin_to(cpu).ok()?;
    Some(cpu)
}

/// The CPU the calling thread was pinned to by this process, if it was: where the other
/// end of its round trips should serve.
#[must_use]
pub fn pinned_cpu() -> Option<usize> {
    let original = ORIGINAL.get()?;
    let now = sched_getaffinity(this_thread()).ok()?;
    let mut set = cpus(&now);
    let cpu = set.next()?;
    (set.next().is_none() && now != *original).then_some(cpu)
}

/// Gives the calling thread back the process's mask (a no-op in a process that never
/// pinned). For a runtime's `on_thread_start`: a new thread inherits its spawner's pin.
pub fn unpin_current_thread() {
    if let Some(original) = ORIGINAL.get() {
        // Best effort: a thread left pinned runs slower, never wrong.
        let _ = sched_setaffinity(this_thread(), original);
    }
}

/// The mask a child must get back between fork and exec, if this process pinned
/// anything: capture it before the fork and pass it to [`restore`].
#[must_use]
pub fn original() -> Option<CpuSet> {
    ORIGINAL.get().copied()
}

/// Sets the calling thread's mask to `set`, best effort: a mask the kernel refuses (its
/// CPUs all gone from the cpuset since) leaves the thread as it was, which runs slower,
/// never wrong. Async-signal-safe (one system call on a value the caller owns), so it may
/// run in a `pre_exec` closure.
pub fn restore(set: &CpuSet) {
    let _ = sched_setaffinity(this_thread(), set);
}

/// Runs `f` (a spawn, or a short wait on a child) with the calling thread given back every
/// CPU this process was started with, then pins it again: a child started in `f` inherits
/// the wide mask. For spawns that must stay `posix_spawn`: a `pre_exec` closure would make
/// the standard library fork this whole process instead (a copy of its page tables, some
/// milliseconds here). A no-op wrapper on a thread this process did not pin.
pub fn with_every_cpu<R>(f: impl FnOnce() -> R) -> R {
    let Some(original) = ORIGINAL.get() else {
        return f();
    };
    match sched_getaffinity(this_thread()) {
        Ok(pinned) if pinned != *original => {
            restore(original);
            let result = f();
            // The same mask again; refused (its CPU gone), the thread stays unpinned.
            restore(&pinned);
            result
        }
        _ => f(),
    }
}

#[cfg(test)]
#[path = "affinity_tests.rs"]
mod tests;
