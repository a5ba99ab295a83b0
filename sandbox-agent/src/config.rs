//! [`AgentConfig`]: what one agent enforces, handed to it by the backend that starts it
//! (as JSON on the command line or in a file). Unknown fields are refused so that a typo
//! in a policy never silently widens it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Everything the agent needs to serve one session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Where the agent listens for its one controller.
    pub socket_path: PathBuf,
    /// The session's workspace: writable, and the first working directory.
    pub workspace: PathBuf,
    /// The sandbox's private temp dir: writable; full outputs of long commands go here.
    pub tmp_dir: PathBuf,
    /// Further writable directories (rarely needed).
    #[serde(default)]
    pub extra_writable: Vec<PathBuf>,
    /// Host paths shown read-only outside the writable roots (the user's toolchains on
    /// the local backend): Landlock grants read and execute beneath them.
    #[serde(default)]
    pub extra_readable: Vec<PathBuf>,
    /// Variables every command starts with, over the base environment (the toolchains'
    /// PATH, RUSTUP_HOME, the caches' CARGO_HOME, ...); a request's own variables still
    /// override them.
    #[serde(default)]
    pub command_env: Vec<(String, String)>,
    /// Paths inside writable roots that the backend made read-only (reported in the
    /// handshake; the mounts themselves are the backend's job).
    #[serde(default)]
    pub protected_paths: Vec<PathBuf>,
    /// Whether children may open AF_INET/AF_INET6 sockets.
    #[serde(default)]
    pub network: bool,
    /// The way out through the egress proxy (implies `network` for children, whose
    /// namespace has no route but its loopback): the bridge, the DNS stub, the variables.
    #[serde(default)]
    pub egress: Option<crate::egress::EgressConfig>,
    /// Start even when the kernel cannot enforce every layer (reported in the handshake).
    /// Off by default: the agent fails closed.
    #[serde(default)]
    pub best_effort: bool,
    /// Resource limits applied to every child.
    #[serde(default)]
    pub rlimits: Rlimits,
    /// How many bytes the workspace may grow this session (see [`crate::exec::disk`]).
    #[serde(default)]
    pub disk_budget_bytes: Option<u64>,
    /// The delegated parent of per-command cgroups (local backend): every command runs
    /// in its own and is killed through it. `None`: commands are killed by a /proc scan.
    #[serde(default)]
    pub exec_cgroup: Option<crate::cgroup::ExecCgroupConfig>,
    /// Refuse controllers whose pid is visible from inside (set by backends that run the
    /// agent in its own pid namespace, where the orchestrator is never visible).
    #[serde(default)]
    pub require_outside_peer: bool,
}

impl AgentConfig {
    /// All writable roots: file operations resolve beneath these only.
    pub fn writable_roots(&self) -> Vec<PathBuf> {
        let mut roots = vec![self.workspace.clone(), self.tmp_dir.clone()];
        roots.extend(self.extra_writable.iter().cloned());
        roots
    }
}

/// rlimits for children. Defaults suit a coding session; `None` leaves the inherited value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Rlimits {
    /// Open files per process.
    pub nofile: Option<u64>,
    /// Largest file a process may write, in bytes.
    pub fsize: Option<u64>,
    /// Processes (threads) for the sandbox uid.
    pub nproc: Option<u64>,
    /// Core dumps are always off; this is not configurable.
    #[serde(skip)]
    pub core: (),
}

impl Default for Rlimits {
    fn default() -> Self {
        Self {
            nofile: Some(4096),
            fsize: Some(8 * 1024 * 1024 * 1024),
            nproc: Some(4096),
            core: (),
        }
    }
}
