//! The agent's per-command cgroups ("slots"), children of the session's delegated
//! per-command parent, and the kill that cannot be outrun.
//!
//! The agent confines itself with Landlock before it serves, and no Landlock rule of the
//! agent (nor of its commands) covers the cgroup filesystem: so the slots are made and
//! their files opened *before* confinement, once, and reused. A command is born in its
//! slot where the kernel allows it: on v2 the agent starts it with
//! `clone3(CLONE_INTO_CGROUP)` on the slot's directory descriptor (see
//! [`crate::exec::clone_into`]), so no migration happens at all. Otherwise the command
//! enters its slot between fork and exec by writing `0` ("myself") through a descriptor
//! the agent opened (Landlock checks opens, not writes through an open descriptor): v2's
//! `cgroup.procs`, or v1's `tasks`. Either way every process it starts later is born in
//! the slot and none can leave: the cgroup files are out of every command's reach
//! (Landlock) and of its rights (only the agent's descriptors can write them).
//!
//! Why not always the write: moving a process with `cgroup.procs` takes the kernel's
//! global threadgroup lock for writing, which waits for an RCU grace period unless the
//! host mounted cgroup2 with `favordynmods` (measured here: 1 to 11 ms per command, by
//! machine load). Moving only the calling thread (v1 `tasks`, pid 0) skips that lock,
//! and right after fork the child has a single thread, so the thread is the process;
//! v2 allows thread moves only inside a threaded subtree, hence clone3 there.
//!
//! Kill: v2 writes `1` to `cgroup.kill`, which the kernel applies to every member,
//! including ones forked while the kill runs. v1 freezes the slot (no member runs, so
//! none forks), SIGKILLs every listed member, and thaws so the kills land. Either way the
//! agent then waits until the slot lists no process before it is handed out again; a
//! slot that will not empty is retired, never reused.
//!
//! Members are listed by opening `cgroup.procs` afresh each time (the agent's Landlock
//! domain may read the per-command parent, `policies/landlock/default.json`): v1 caches
//! a pid list per open file for as long as it is read again within a second, so a
//! listing through a descriptor kept open would never change.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{CgroupError, ExecCgroupConfig, KillMethod, io_err, parse_pids};

/// Slots made per session: the most commands that may run at once.
pub const SLOT_COUNT: usize = 16;
/// How long a kill waits for the members to exit.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Freeze, kill, thaw rounds before a v1 slot is given up (one round is the rule: a
/// frozen slot cannot gain members).
const FREEZER_ROUNDS: u32 = 20;

/// One per-command cgroup and the descriptors opened while the agent could.
#[derive(Debug)]
pub struct Slot {
    name: String,
    dir: PathBuf,
    /// Write-only: commands enter through it (v2 `cgroup.procs`, v1 `tasks`).
    entry: File,
    /// The slot directory itself (`O_PATH`), for `clone3(CLONE_INTO_CGROUP)`; v2 only.
    dir_fd: Option<File>,
    /// Whether a command may still be born in the slot by clone3: cleared by the slot's
    /// first `cgroup.kill` (see [`Lease::cgroup_fd`]).
    births: AtomicBool,
    control: File,
    method: KillMethod,
}

/// The free slots of a session.
#[derive(Debug)]
pub struct ExecSlots {
    free: Mutex<Vec<Slot>>,
    pub method: KillMethod,
}

impl ExecSlots {
    /// Makes `count` slots under `cfg.dir` and opens their files. Call before the agent
    /// confines itself.
    pub fn prepare(cfg: &ExecCgroupConfig, count: usize) -> Result<ExecSlots, CgroupError> {
        let mut free = Vec::with_capacity(count);
        for i in (0..count).rev() {
            let name = format!("exec-{i}");
            let dir = cfg.dir.join(&name);
            // A slot left by an earlier agent of the session may have been killed, which
            // would make clone3 births into it die (see `Lease::cgroup_fd`): only a slot
            // made here offers clone3.
            let fresh = match std::fs::create_dir(&dir) {
                Ok(()) => true,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(io_err("creating the command cgroup", &dir)(e)),
            };
            let (control, entry, dir_fd) = match cfg.kill {
                KillMethod::CgroupKill => (
                    open(&dir.join("cgroup.kill"), false)?,
                    open(&dir.join("cgroup.procs"), false)?,
                    Some(open_dir(&dir)?),
                ),
                KillMethod::Freezer => (
                    open(&dir.join("freezer.state"), true)?,
                    open(&dir.join("tasks"), false)?,
                    None,
                ),
            };
            free.push(Slot {
                name,
                entry,
                dir_fd,
                births: AtomicBool::new(fresh),
                dir,
                control,
                method: cfg.kill,
            });
        }
        Ok(ExecSlots {
            free: Mutex::new(free),
            method: cfg.kill,
        })
    }

    /// A free slot for one command, or `None` when every slot is busy.
    pub fn acquire(self: &Arc<Self>) -> Option<Lease> {
        let slot = self.lock().pop()?;
        Some(Lease {
            slot: Some(slot),
            pool: self.clone(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn open(path: &Path, read: bool) -> Result<File, CgroupError> {
    std::fs::OpenOptions::new()
        .read(read)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err("opening", path))
}

/// The directory itself, as clone3's `cgroup` argument wants it (a path descriptor is
/// enough: the kernel checks the caller's write access to the cgroups, not the open).
fn open_dir(path: &Path) -> Result<File, CgroupError> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err("opening", path))
}

/// A slot held by one command; back to the pool when dropped, if empty.
#[derive(Debug)]
pub struct Lease {
    slot: Option<Slot>,
    pool: Arc<ExecSlots>,
}

impl Lease {
    fn slot(&self) -> &Slot {
        // The slot is only taken out in drop.
        match &self.slot {
            Some(s) => s,
            None => unreachable!("a lease holds its slot until dropped"),
        }
    }

    /// The descriptor a new command writes `0` to, before exec, to enter the slot (with
    /// a single thread, which a child between fork and exec has).
    pub fn entry_fd(&self) -> RawFd {
        self.slot().entry.as_raw_fd()
    }

    /// The slot's directory, for a child started straight inside it (v2 only), while
    /// that is still safe here.
    ///
    /// Why not after a kill: the kernel (seen on 6.18) records in each fork the kill
    /// generation of the *parent's* cgroup, before it looks at `CLONE_INTO_CGROUP`'s
    /// target, then compares it with the target's after the fork; once a slot has been
    /// killed the two differ for good, and every child born in it by clone3 is SIGKILLed
    /// at birth. A child that enters by a write was forked in the agent's own cgroup,
    /// so the write path is unaffected; a killed slot uses it from then on.
    pub fn cgroup_fd(&self) -> Option<RawFd> {
        let slot = self.slot();
        if !slot.births.load(Ordering::Relaxed) {
            return None;
        }
        slot.dir_fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The slot's name (for logs).
    pub fn name(&self) -> &str {
        &self.slot().name
    }

    /// The pids in the slot, as this process's pid namespace numbers them; `None` when
    /// the listing cannot be read.
    pub fn members(&self) -> Option<Vec<i32>> {
        members(&self.slot().dir)
    }

    /// Kills every process in the slot and waits until none is left. Blocking. True
    /// when the slot is empty.
    pub fn kill_all(&self) -> bool {
        let slot = self.slot();
        match slot.method {
            KillMethod::CgroupKill => {
                // Before the write: a kill that half happened still moves the kernel's
                // kill generation (see `cgroup_fd`).
                slot.births.store(false, Ordering::Relaxed);
                if let Err(e) = slot.control.write_at(b"1", 0) {
                    tracing::warn!(slot = %slot.name, error = %e, "cgroup.kill failed");
                }
            }
            KillMethod::Freezer => freeze_kill_thaw(slot),
        }
        drained(&slot.dir)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        if members(&slot.dir).is_some_and(|m| m.is_empty()) {
            self.pool.lock().push(slot);
        } else {
            // Never hand out a slot whose processes could be mistaken for the next
            // command's; the session's teardown removes it.
            tracing::warn!(slot = %slot.name, "command cgroup did not empty; retired");
        }
    }
}

/// Writes `0` to `entry_fd` (a `cgroup.procs` or v1 `tasks`): moves the calling process
/// (through `tasks`: the calling thread, the whole process when it has one) into that
/// cgroup. Alloc-free, for the pre-exec hook.
pub fn enter(entry_fd: RawFd) -> std::io::Result<()> {
    // SAFETY: write(2) from a valid static buffer of one byte to a descriptor the caller
    // owns; no allocation.
    let n = unsafe { libc::write(entry_fd, b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Reads a cgroup file through a descriptor held open (`freezer.state`).
fn read_all(file: &File) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match file.read_at(&mut buf, out.len() as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn members(dir: &Path) -> Option<Vec<i32>> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .ok()
        .map(|t| parse_pids(&t))
}

/// Waits until the slot lists no process (killed processes take a moment to exit).
fn drained(dir: &Path) -> bool {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    let mut pause = Duration::from_micros(200);
    loop {
        if members(dir).is_some_and(|m| m.is_empty()) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// v1: freeze (no member runs, so none forks), SIGKILL every member, thaw so the kills
/// are delivered; repeat while the listing still shows members that were not frozen in
/// time.
fn freeze_kill_thaw(slot: &Slot) {
    for _ in 0..FREEZER_ROUNDS {
        let _ = slot.control.write_at(b"FROZEN", 0);
        let deadline = Instant::now() + Duration::from_secs(1);
        while read_all(&slot.control).trim() != "FROZEN" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let pids = members(&slot.dir).unwrap_or_default();
        for &pid in &pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = slot.control.write_at(b"THAWED", 0);
        if drained(&slot.dir) {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
