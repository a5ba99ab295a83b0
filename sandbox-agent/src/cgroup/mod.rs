//! Cgroups for the local backend: one per session, holding memory (and swap), pids and
//! CPU limits, and one per command inside it, so a command's processes are killed all at
//! once however fast they fork.
//!
//! # Layout
//!
//! - [`layout`]: which hierarchies this host mounts (cgroup v2, v1, or both: "hybrid")
//!   and where the calling process sits in each.
//! - [`session`]: the session cgroup, made by the launcher on the host side before the
//!   sandbox starts: limits, delegation of the per-command part to the sandbox user,
//!   removal at teardown and for dead sessions.
//! - [`slots`]: the agent's per-command cgroups ("slots") and the kill that cannot be
//!   outrun: `cgroup.kill` on v2, freeze, kill, thaw on v1's freezer.
//!
//! # Why per-command cgroups, not per-command pid namespaces
//!
//! A pid namespace per command would also end every process of the command with its
//! init, but it costs a fork of a namespace init per call, hides the command's processes
//! from the agent (no orphan reaping, no per-command accounting) and needs namespace
//! creation inside the sandbox, which seccomp denies to everything the agent starts. A
//! cgroup is a set the kernel maintains for us: a process cannot leave it (its files are
//! outside every Landlock rule a command has) and `cgroup.kill` (or a frozen cgroup)
//! reaches every member at once, so a process that forks and exits in a loop has nowhere
//! to hop to. Where the host has no usable hierarchy the agent falls back to its /proc
//! scan and the handshake says so.

pub mod layout;
pub mod session;
pub mod slots;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use layout::Layout;
pub use session::SessionCgroup;
pub use slots::{ExecSlots, Slot};

/// Name of the directory, under this process's place in each hierarchy, that holds the
/// session cgroups.
pub const PARENT_NAME: &str = "cordon";
/// Where the session's per-command cgroup parent appears inside the sandbox.
pub const EXEC_CGROUP_IN_SANDBOX: &str = "/run/cordon-cgroup";

/// Resource limits of one session, the same defaults as the Docker backend's.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SessionLimits {
    /// Memory of the whole session, page cache and tmpfs included; swap is not allowed
    /// beyond it (like Docker's `memory_swap == memory`).
    pub memory_bytes: u64,
    /// Processes and threads of the whole session.
    pub pids: u64,
    /// CPU time, in thousandths of a CPU (1000: one CPU).
    pub cpu_millis: u64,
    /// How many bytes the session may add to its workspace (checked after each command,
    /// see `exec::disk`); `None`: no budget.
    #[serde(default)]
    pub disk_bytes: Option<u64>,
    /// Start without limits (reported) when this host cannot make the cgroups; off by
    /// default: the session refuses to start.
    #[serde(default)]
    pub best_effort: bool,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 1024 * 1024 * 1024,
            pids: 512,
            cpu_millis: 1000,
            disk_bytes: None,
            best_effort: false,
        }
    }
}

/// How the agent kills a command's cgroup.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KillMethod {
    /// cgroup v2's `cgroup.kill` (Linux 5.14): one write kills every member.
    CgroupKill,
    /// cgroup v1's freezer: freeze, SIGKILL every member, thaw.
    Freezer,
}

/// The per-command cgroup parent handed to the agent (see [`slots`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ExecCgroupConfig {
    /// The delegated directory, as the agent sees it.
    pub dir: PathBuf,
    pub kill: KillMethod,
    /// How many commands may run at once: one slot cgroup each, all made at start (the
    /// confined agent cannot make more later). A one-command sandbox needs one.
    #[serde(default = "default_slots")]
    pub slots: usize,
}

fn default_slots() -> usize {
    slots::SLOT_COUNT
}

/// A cgroup step that failed, naming the step and the path.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("reading the cgroup layout: {0}")]
    Layout(#[source] std::io::Error),
    #[error("cannot enforce {what}: {why}")]
    Unavailable { what: String, why: String },
    #[error("{step} {}: {source}", path.display())]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + use<> {
    let path = path.to_path_buf();
    move |source| CgroupError::Io { step, path, source }
}

/// What a session cgroup would enforce on this host, as this process: makes one (with
/// the default limits) under `cordon/`, reads what it got, and removes it.
pub fn probe() -> Result<session::Enforced, CgroupError> {
    let layout = Layout::detect()?;
    let id = format!("probe-{}", std::process::id());
    let cg = SessionCgroup::create(&layout, &id, &SessionLimits::default())?;
    let enforced = cg.enforced;
    cg.remove();
    Ok(enforced)
}

/// Writes `value` to the cgroup file `dir/name` in one write(2), as cgroupfs expects.
fn write_file(dir: &Path, name: &str, value: &str) -> Result<(), CgroupError> {
    let path = dir.join(name);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(io_err("writing", &path))
}

/// The pids listed in a `cgroup.procs` text.
fn parse_pids(text: &str) -> Vec<i32> {
    text.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[cfg(test)]
pub(crate) mod test_support;
