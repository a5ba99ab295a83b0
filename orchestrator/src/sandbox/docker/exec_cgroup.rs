//! Per-command cgroups inside a session container: each command the agent starts runs in a
//! cgroup of its own and is killed through it (`cgroup.kill` on v2, freeze-kill-thaw on
//! v1's freezer), so no process of a call survives the call, however it forks. The agent
//! side is the local backend's ([`sandbox_agent::cgroup::slots`]); this module gives it a
//! delegated parent below the container's own cgroup.
//!
//! At a claim (the host is root and the container's init is known), before the agent has
//! read its configuration:
//! 1. the container's cgroup is read from `/proc/<init>/cgroup` against the host's mounts;
//!    the hierarchy used is v1's freezer where the container has one (entering it costs
//!    no RCU grace period, see [`plan`]), else v2 where it offers `cgroup.kill` (Linux
//!    5.14), and only a cgroup whose path names the container (never a shared one);
//! 2. `cordon-exec/` is made below it and handed to the sandbox uid (the directory and its
//!    `cgroup.procs`: the agent makes its slots there, and v2 moves a process only with
//!    write access to the common ancestor's `cgroup.procs`); the limit files stay root's;
//! 3. the agent (the init's child, blocked on its start FIFO) is moved into `cordon-exec/`,
//!    so that parent is the common ancestor of every move the agent makes;
//! 4. the directory is injected into the container at
//!    [`sandbox_agent::cgroup::EXEC_CGROUP_IN_SANDBOX`] with the workspace (see
//!    [`super::pool`]): Docker mounts the container's own cgroup read-only inside.
//!
//! The container's limits (memory, pids, cpu) stay on its own cgroup, which holds
//! `cordon-exec/` and everything below. Any failure leaves the session on the agent's
//! fallback, the kill(-1) sweep of the container's pid namespace once no command runs
//! (`sandbox_agent::exec::kill::sweep_namespace_if_idle`), and says so in the log. The
//! engine removes the container's cgroup with the container; [`remove`] makes sure of
//! `cordon-exec/` first.

use std::path::{Path, PathBuf};

use sandbox_agent::cgroup::session::remove_dir_tree;
use sandbox_agent::cgroup::{KillMethod, Layout};

/// The per-command parent's name below the container's cgroup.
pub const EXEC_PARENT: &str = "cordon-exec";

/// A container's delegated per-command parent, on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecCgroup {
    /// `<container's cgroup>/cordon-exec` on the host.
    pub dir: PathBuf,
    pub kill: KillMethod,
}

/// Why a container gets no per-command cgroups (logged; the sweep is the fallback).
#[derive(Debug, thiserror::Error)]
pub enum ExecCgroupError {
    #[error("reading the container's cgroups: {0}")]
    Read(#[source] std::io::Error),
    #[error("no cgroup of the container {0} offers cgroup.kill or a v1 freezer")]
    NoHierarchy(String),
    #[error("{step} {}: {source}", path.display())]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where the per-command parent of the container `id` (init `init_pid`) goes, from the
/// texts of the host's `/proc/self/mountinfo` and the init's `/proc/PID/cgroup`.
pub fn plan(mountinfo: &str, cgroup: &str, id: &str) -> Option<ExecCgroup> {
    let layout = Layout::parse(mountinfo, cgroup);
    // Only the container's own cgroup: one shared with the host or another container
    // would put two sessions' slots side by side.
    let own = |h: &sandbox_agent::cgroup::layout::Hierarchy| {
        h.own
            .file_name()
            .is_some_and(|n| !id.is_empty() && n.to_string_lossy().contains(id))
            .then(|| h.own_dir())
    };
    // The v1 freezer first where the container has one (a hybrid host): a command enters
    // its slot by writing `0` to `tasks`, a move of its one thread that skips the kernel's
    // threadgroup lock, while a v2 `cgroup.procs` move waits for an RCU grace period (1 to
    // 11 ms here) and clone3, which avoids it on the local backend, stays refused to the
    // agent in a container (its namespace counts cannot be capped there).
    if let Some(dir) = layout.v1("freezer").and_then(own) {
        return Some(ExecCgroup {
            dir: dir.join(EXEC_PARENT),
            kill: KillMethod::Freezer,
        });
    }
    layout
        .unified
        .as_ref()
        .and_then(own)
        .filter(|dir| dir.join("cgroup.kill").exists())
        .map(|dir| ExecCgroup {
            dir: dir.join(EXEC_PARENT),
            kill: KillMethod::CgroupKill,
        })
}

/// Makes the per-command parent of container `id` for `uid` and moves the init's
/// children (the waiting agent) into it. On error nothing made stays.
pub fn prepare(init_pid: i32, id: &str, uid: u32) -> Result<ExecCgroup, ExecCgroupError> {
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(ExecCgroupError::Read)?;
    let cgroup = std::fs::read_to_string(format!("/proc/{init_pid}/cgroup"))
        .map_err(ExecCgroupError::Read)?;
    let exec =
        plan(&mountinfo, &cgroup, id).ok_or_else(|| ExecCgroupError::NoHierarchy(id.into()))?;
    match make(&exec, init_pid, uid) {
        Ok(()) => Ok(exec),
        Err(e) => {
            remove(&exec);
            Err(e)
        }
    }
}

fn make(exec: &ExecCgroup, init_pid: i32, uid: u32) -> Result<(), ExecCgroupError> {
    let io = |step, path: &Path| {
        let path = path.to_path_buf();
        move |source| ExecCgroupError::Io { step, path, source }
    };
    let dir = &exec.dir;
    std::fs::create_dir(dir).map_err(io("creating", dir))?;
    // Delegation: the directory (the agent makes its slots in it) and cgroup.procs (the
    // common ancestor of every move the agent makes). Nothing else: no limit file.
    for path in [dir.clone(), dir.join("cgroup.procs")] {
        std::os::unix::fs::chown(&path, Some(uid), Some(uid)).map_err(io("delegating", &path))?;
    }
    let children = agent_pids(init_pid).map_err(io("finding the agent", Path::new("/proc")))?;
    let procs = dir.join("cgroup.procs");
    for pid in children.split_whitespace() {
        // One write per pid, as cgroupfs expects; the agent's threads move with it.
        std::fs::write(&procs, pid).map_err(io("moving the agent into", &procs))?;
    }
    Ok(())
}

/// The children of the container's init (the agent): right after a cold start the init
/// may not have forked it yet, so this waits for it a little. Its slots would otherwise
/// be unusable: a command could not move from the container's cgroup, which stays root's.
fn agent_pids(init_pid: i32) -> std::io::Result<String> {
    let path = format!("/proc/{init_pid}/task/{init_pid}/children");
    for _ in 0..AGENT_WAIT_ROUNDS {
        let text = std::fs::read_to_string(&path)?;
        if !text.trim().is_empty() {
            return Ok(text);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Err(std::io::Error::other(
        "the container's init started no agent",
    ))
}

/// How long [`agent_pids`] waits, in 5 ms rounds.
const AGENT_WAIT_ROUNDS: u32 = 400;

/// Removes the per-command parent (killing what is left in it): once the container is
/// gone, or after a failed claim. Missing is fine; a failure is logged. The container's
/// own cgroup goes with the container (the engine removes it; if the engine left it
/// because of our child, the `rmdir` here takes it, and fails harmlessly while a process
/// of the container still lives in it).
pub fn remove(exec: &ExecCgroup) {
    if let Err(e) = remove_dir_tree(&exec.dir) {
        tracing::warn!(dir = %exec.dir.display(), error = %e, "per-command cgroups left behind");
    }
    if let Some(container) = exec.dir.parent() {
        let _ = std::fs::remove_dir(container);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
26 25 0:24 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
28 25 0:26 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
30 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn only_a_cgroup_naming_the_container_is_used() {
        let cg = "8:pids:/docker/abc123\n6:freezer:/docker/abc123\n0::/\n";
        // The unified path is the root (shared): the freezer is used.
        let exec = plan(HYBRID, cg, "abc123").unwrap();
        assert_eq!(
            exec,
            ExecCgroup {
                dir: PathBuf::from("/sys/fs/cgroup/freezer/docker/abc123/cordon-exec"),
                kill: KillMethod::Freezer
            }
        );
        // Named in both: the freezer still (cheaper to enter).
        let both = "8:pids:/docker/abc123\n6:freezer:/docker/abc123\n0::/docker/abc123\n";
        assert_eq!(
            plan(HYBRID, both, "abc123").unwrap().kill,
            KillMethod::Freezer
        );
        // Another container's id, or a cgroup shared with the host: nothing.
        assert_eq!(plan(HYBRID, cg, "other"), None);
        assert_eq!(plan(HYBRID, "6:freezer:/\n0::/\n", "abc123"), None);
        assert_eq!(plan(HYBRID, cg, ""), None);
    }
}
