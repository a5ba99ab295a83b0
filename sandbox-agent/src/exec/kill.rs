//! Tracking running commands, killing whole process trees, and reaping orphans.
//!
//! A command with its own cgroup is killed through it ([`kill_slot`]); the rest of this
//! module is the fallback where the backend delegated none (Docker), and the reaper. On
//! Docker, where the agent has the container's pid namespace to itself, everything left
//! once no command runs is killed in one pass ([`sweep_namespace_if_idle`]).
//!
//! Every command leads its own session and process group, but a process can leave the
//! group (setsid) or orphan itself (double fork). So killing is done in rounds until a
//! scan of /proc finds nothing left: the process group, every descendant of the leader,
//! and every child of the agent (a child subreaper, so orphans reparent to it) that
//! carries this command's marker in its environment, or any such orphan at all when only
//! one command is running.
//!
//! Exit codes are never lost: a leader is reaped only by its own command's waiter; the
//! orphan reaper skips registered leaders, and the registry lock is held from before fork
//! until the leader is registered.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::sync::Notify;

use crate::cgroup::slots::Lease;

/// Environment variable that marks every process of one command with its token.
pub const MARKER_ENV: &str = "CORDON_EXEC_ID";

/// Most kill rounds before giving up (a fork bomb can outpace one round, not hundreds).
const MAX_ROUNDS: u32 = 200;
/// How often orphans are reaped.
const REAP_INTERVAL: Duration = Duration::from_millis(250);
/// Whether an unmarked orphan is attributed to the only running command. Off in unit
/// tests, where the test harness's own children (forked confinement tests) are children
/// of the same process; in the agent every child is a command.
const ATTRIBUTE_UNMARKED_ORPHANS: bool = !cfg!(test);

/// One running command.
#[derive(Debug)]
pub struct Entry {
    /// The executor that started it (one per agent; several in tests).
    pub owner: u64,
    pub leader: i32,
    pub marker: String,
    /// The command's own cgroup, if it has one.
    pub slot: Option<Arc<Lease>>,
    pub cancel: Arc<Notify>,
    pub cancelled: Arc<AtomicBool>,
}

/// Every running command of this process, keyed by exec id. Process-wide, because the
/// subreaper role and the orphans are.
#[derive(Debug, Default)]
pub struct Registry {
    entries: Mutex<HashMap<String, Entry>>,
}

pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

impl Registry {
    /// Holds the registry; spawn under this guard so the reaper cannot touch the new
    /// leader before it is registered.
    pub fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn remove(&self, exec_id: &str) {
        self.lock().remove(exec_id);
    }

    /// Marks the command cancelled and wakes its driver. False when no such command runs.
    pub fn cancel(&self, exec_id: &str) -> bool {
        match self.lock().get(exec_id) {
            Some(e) => {
                e.cancelled.store(true, Ordering::SeqCst);
                e.cancel.notify_one();
                true
            }
            None => false,
        }
    }

    /// Cancels every command of `owner` and kills their trees now (for shutdown, which
    /// may exit the process before the drivers run).
    pub fn kill_all(&self, owner: u64) {
        let targets: Vec<(i32, String, Option<Arc<Lease>>)> = {
            let entries = self.lock();
            entries
                .values()
                .filter(|e| e.owner == owner)
                .map(|e| {
                    e.cancelled.store(true, Ordering::SeqCst);
                    e.cancel.notify_one();
                    (e.leader, e.marker.clone(), e.slot.clone())
                })
                .collect()
        };
        for (leader, marker, slot) in targets {
            match slot {
                Some(slot) => kill_slot(leader, &slot),
                None => kill_tree(leader, &marker),
            }
        }
    }

    fn leaders(&self) -> HashMap<i32, String> {
        self.lock()
            .values()
            .map(|e| (e.leader, e.marker.clone()))
            .collect()
    }
}

/// Where the agent has a pid namespace of its own and no per-command cgroups (Docker):
/// once no command runs, every process in the namespace other than the agent and the
/// namespace's init is a leftover of a command that ended, so all of them are killed with
/// one `kill(-1, SIGKILL)`. The kernel delivers that in a single pass over the namespace's
/// tasks under the tasklist lock, which fork also takes, so a process that forks and exits
/// in a loop (a pid hopper, which outruns any /proc scan) cannot slip past it. The
/// registry lock is held across the check and the kill, and every spawn holds it from
/// before fork until its leader is registered, so no starting command is caught.
///
/// Sound only in a pid namespace of the agent's own, where -1 reaches the sandbox alone:
/// callers enable it only when the backend says so (`require_outside_peer`). Orphans left
/// as zombies are collected by the reaper.
pub fn sweep_namespace_if_idle() {
    let entries = registry().lock();
    if entries.is_empty() {
        let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    }
}

/// One line of /proc/<pid>/stat, the fields we need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub state: u8,
}

impl ProcInfo {
    fn alive(&self) -> bool {
        !matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parses "pid (comm) S ppid pgrp ..."; comm may contain spaces and parentheses.
pub fn parse_stat(text: &str) -> Option<ProcInfo> {
    let (head, rest) = text.rsplit_once(')')?;
    let pid = head.split_once(' ')?.0.trim().parse().ok()?;
    let mut fields = rest.split_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(ProcInfo {
        pid,
        ppid,
        pgid,
        state,
    })
}

/// Every process visible in /proc.
pub fn scan() -> Vec<ProcInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .as_encoded_bytes()
                .iter()
                .all(u8::is_ascii_digit)
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|s| parse_stat(&s))
        .collect()
}

fn has_marker(pid: i32, marker: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let want = format!("{MARKER_ENV}={marker}");
    environ.split(|b| *b == 0).any(|kv| kv == want.as_bytes())
}

/// The processes of the command led by `leader` (see the module docs), alive ones only.
fn members(leader: i32, marker: &str, procs: &[ProcInfo]) -> HashSet<i32> {
    let me = std::process::id() as i32;
    let others: HashMap<i32, String> = registry()
        .leaders()
        .into_iter()
        .filter(|(pid, m)| *pid != leader && m != marker)
        .collect();
    let sole = ATTRIBUTE_UNMARKED_ORPHANS && others.is_empty();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for p in procs.iter().filter(|p| p.alive()) {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut found: HashSet<i32> = procs
        .iter()
        .filter(|p| p.alive() && p.pid != me && !others.contains_key(&p.pid))
        .filter(|p| {
            p.pid == leader
                || p.pgid == leader
                || (p.ppid == me && (sole || has_marker(p.pid, marker)))
        })
        .map(|p| p.pid)
        .collect();
    let mut stack: Vec<i32> = found.iter().copied().chain([leader]).collect();
    while let Some(pid) = stack.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if child != me && !others.contains_key(&child) && found.insert(child) {
                stack.push(child);
            }
        }
    }
    found
}

/// One kill round: SIGKILLs the command's process group and reports whether anything of
/// its tree is still alive. Cheap (one /proc scan); safe on an async thread.
pub fn nothing_left(leader: i32, marker: &str) -> bool {
    let _ = kill(Pid::from_raw(-leader), Signal::SIGKILL);
    members(leader, marker, &scan()).is_empty()
}

/// SIGKILLs the command's whole tree, in rounds, until a scan finds none of it alive.
/// Blocking: call from a blocking thread.
pub fn kill_tree(leader: i32, marker: &str) {
    for round in 0..MAX_ROUNDS {
        let _ = kill(Pid::from_raw(-leader), Signal::SIGKILL);
        let targets = members(leader, marker, &scan());
        if targets.is_empty() {
            return;
        }
        for pid in targets {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(u64::from(round.min(20))));
    }
    tracing::warn!(
        leader,
        "process tree still alive after {MAX_ROUNDS} kill rounds"
    );
}

/// The first step of [`kill_slot`]: SIGKILL to the leader's process group, then whether
/// the slot lists no process. One signal and one read of a cgroup file, quick enough for
/// an async task: the common case, a command that left nothing behind, ends here.
pub fn slot_left_empty(leader: i32, slot: &Lease) -> bool {
    let _ = kill(Pid::from_raw(-leader), Signal::SIGKILL);
    slot.members().is_some_and(|m| m.is_empty())
}

/// Kills a command that runs in its own cgroup: every process in it at once, whatever
/// it forked, and waits until the cgroup is empty. Blocking.
pub fn kill_slot(leader: i32, slot: &Lease) {
    if slot_left_empty(leader, slot) {
        return;
    }
    if !slot.kill_all() {
        tracing::warn!(
            leader,
            slot = slot.name(),
            "command cgroup still populated after the kill"
        );
    }
}

/// Reaps zombie children that are not registered leaders (reparented orphans). Only
/// zombies already seen by the previous pass (`seen`) are reaped: a parent blocked in
/// waitpid reaps its child at once, so a zombie that lingers a whole interval has no
/// waiter whose exit status we could steal.
pub fn reap_orphans(seen: &mut HashSet<i32>) {
    let me = std::process::id() as i32;
    let zombies: HashSet<i32> = scan()
        .into_iter()
        .filter(|p| p.ppid == me && p.state == b'Z')
        .map(|p| p.pid)
        .collect();
    let lingering: Vec<i32> = zombies.intersection(seen).copied().collect();
    *seen = zombies;
    if lingering.is_empty() {
        return;
    }
    let entries = registry().lock();
    let leaders: HashSet<i32> = entries.values().map(|e| e.leader).collect();
    for pid in lingering.into_iter().filter(|p| !leaders.contains(p)) {
        let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
    }
}

/// Starts the process-wide orphan reaper thread once.
pub fn start_reaper() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("cordon-reaper".into())
            .spawn(|| {
                // Started from the serving thread: not on its pin.
                crate::affinity::unpin_current_thread();
                let mut seen = HashSet::new();
                loop {
                    std::thread::sleep(REAP_INTERVAL);
                    reap_orphans(&mut seen);
                }
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the orphan reaper: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let p = parse_stat("42 (a b) c)) S 7 42 42 0 -1").unwrap();
        assert_eq!(
            p,
            ProcInfo {
                pid: 42,
                ppid: 7,
                pgid: 42,
                state: b'S'
            }
        );
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn the_scan_sees_this_process() {
        let me = std::process::id() as i32;
        assert!(scan().iter().any(|p| p.pid == me));
    }
}
