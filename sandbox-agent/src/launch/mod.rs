//! The local backend's namespace launcher.
//!
//! `sandbox-agent --launch-config FILE` runs this module instead of serving. The launcher is
//! a fresh, single-threaded process (the orchestrator never sets up namespaces after a fork
//! of its own multi-threaded runtime). It:
//!
//! 1. prepares the host side: the session's socket dir, placeholders for protected paths
//!    that do not exist yet ([`protected`]) including the git control files of every git
//!    dir in the workspace ([`gitguard`]), and, when running as host root, an idmapped
//!    clone of the workspace ([`userns`], [`mounts`]);
//! 2. clones the sandbox's init with new user, mount, pid, ipc, uts, net and cgroup
//!    namespaces, moves it into the session's cgroup (limits; made before the clone, see
//!    [`crate::cgroup`]) and writes its uid/gid maps ([`userns`]);
//! 3. the init ([`child`]) builds a fresh root (read-only system dirs, private /tmp, the
//!    workspace at the same absolute path, the socket dir at `/run/cordon`), makes the
//!    protected paths read-only, drops to the unprivileged sandbox uid with no capabilities
//!    and no_new_privs, then starts the agent in serve mode and reaps orphans as pid 1
//!    (or, for a one-shot run, confines and starts one command itself, see [`oneshot`]);
//! 4. supervises ([`supervise`]): when the orchestrator's lifeline pipe closes, or on
//!    SIGTERM/SIGINT/SIGHUP, it kills the namespace's init (the kernel then kills every
//!    process in the pid namespace), vets the git dirs the session made ([`gitvet`]) and
//!    cleans the host side up ([`state`]), the session's cgroup included.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroup::{CgroupError, SessionLimits};
use crate::config::AgentConfig;

mod caps;
mod child;
pub mod denied;
pub mod gitguard;
pub mod gitvet;
pub mod host_view;
pub mod inline;
pub(crate) mod light;
mod linger;
pub mod mounts;
pub mod oneshot;
pub mod protected;
pub mod state;
mod supervise;
pub mod trees;
pub mod userns;

pub use linger::RELEASE_NAME;
pub use protected::{EntryKind, ProtectedPath};
pub use supervise::{STRIPPED_LOG_PREFIX, run_launcher};

/// The uid and gid sandboxed processes run as, inside the sandbox's user namespace.
pub const SANDBOX_UID: u32 = 1000;
pub const SANDBOX_GID: u32 = 1000;
/// Where the session's socket dir appears inside the sandbox.
pub const SOCKET_DIR_IN_SANDBOX: &str = "/run/cordon";
/// The socket's file name, in the socket dir.
pub const SOCKET_NAME: &str = "agent.sock";
/// Where the agent binary appears (read-only) inside the sandbox.
pub const AGENT_IN_SANDBOX: &str = "/run/cordon-agent/sandbox-agent";
/// Default base of the host uid ranges given to sandboxes when the launcher runs as root.
pub const DEFAULT_UID_BASE: u32 = 1_000_000;

/// What the orchestrator hands the launcher (as a JSON file).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LaunchConfig {
    /// Names the session; `[A-Za-z0-9_-]{1,64}`.
    pub session_id: String,
    /// Host dir holding this session's state: `sock/`, placeholders record, log.
    pub state_dir: PathBuf,
    /// The workspace: absolute and canonical; mounted writable at the same path.
    pub workspace: PathBuf,
    /// Paths relative to the workspace that sandboxed processes may not write.
    #[serde(default)]
    pub protected: Vec<ProtectedPath>,
    /// Absolute host paths inside the workspace hidden behind an empty read-only tmpfs
    /// (Cordon's own data directory when it lies inside the workspace).
    #[serde(default)]
    pub masked: Vec<PathBuf>,
    /// Absolute paths inside the workspace no sandboxed process may read (a `Read` deny
    /// rule bound in the kernel): files are covered by an empty mode-0000 read-only file,
    /// directories by an empty mode-0000 read-only tmpfs. Missing paths are skipped: there
    /// is nothing to hide (see [`denied`]).
    #[serde(default)]
    pub denied_read: Vec<PathBuf>,
    /// Absolute paths inside the workspace no sandboxed process may change (an `Edit`
    /// deny rule bound in the kernel): made read-only like protected paths, placeholders
    /// included.
    #[serde(default)]
    pub denied_write: Vec<PathBuf>,
    /// Base of the host uid/gid ranges used when the launcher runs as host root.
    #[serde(default = "default_uid_base")]
    pub uid_base: u32,
    /// Size cap of the sandbox's private /tmp, in MiB.
    #[serde(default = "default_tmp_mib")]
    pub tmp_size_mib: u64,
    /// An inherited fd whose EOF (the orchestrator died or let go) ends the sandbox.
    #[serde(default)]
    pub lifeline_fd: Option<i32>,
    /// The session's resource limits, enforced by a session cgroup the launcher makes
    /// (see [`crate::cgroup::session`]); `None`: no cgroup at all.
    #[serde(default)]
    pub limits: Option<SessionLimits>,
    /// Host paths outside the workspace the sandbox sees: toolchains read-only, secrets
    /// in them hidden, Cordon's caches writable (see [`host_view`]).
    #[serde(default)]
    pub host: host_view::HostView,
    /// How many commands may run at once in the sandbox (one per-command cgroup each,
    /// made at start).
    #[serde(default = "default_concurrent_commands")]
    pub concurrent_commands: usize,
    /// Directories beside the workspace the session may write
    /// (`permissions.additionalDirectories`): absolute, canonical, outside the workspace;
    /// each mounted read-write at its own path and protected as the workspace is (see
    /// [`trees`]).
    #[serde(default)]
    pub additional: Vec<PathBuf>,
    /// Extra environment variables for the agent (e.g. its log filter).
    #[serde(default)]
    pub agent_env: Vec<(String, String)>,
    /// What the agent serves with; `socket_path` must be inside [`SOCKET_DIR_IN_SANDBOX`].
    /// A one-shot run confines its command with it as the agent would.
    pub agent: AgentConfig,
    /// Run this one command instead of the agent (see [`oneshot`]): `cordon sandbox` on
    /// the local backend, where that is equivalent.
    #[serde(default)]
    pub oneshot: Option<oneshot::OneShot>,
}

fn default_uid_base() -> u32 {
    DEFAULT_UID_BASE
}

fn default_concurrent_commands() -> usize {
    crate::cgroup::slots::SLOT_COUNT
}

fn default_tmp_mib() -> u64 {
    1024
}

impl LaunchConfig {
    /// The host dir bind-mounted at [`SOCKET_DIR_IN_SANDBOX`].
    pub fn socket_dir(&self) -> PathBuf {
        self.state_dir.join("sock")
    }

    /// Where the orchestrator connects, on the host.
    pub fn host_socket_path(&self) -> PathBuf {
        self.socket_dir().join(SOCKET_NAME)
    }

    /// Checks what the launcher relies on before it touches anything.
    pub fn validate(&self) -> Result<(), LaunchError> {
        if !valid_session_id(&self.session_id) {
            return Err(LaunchError::Config(format!(
                "session id {:?} must be 1-64 of [A-Za-z0-9_-]",
                self.session_id
            )));
        }
        if !self.workspace.is_absolute() || self.workspace == Path::new("/") {
            return Err(LaunchError::Config(
                "workspace must be an absolute path other than /".into(),
            ));
        }
        if !self.state_dir.is_absolute() {
            return Err(LaunchError::Config("state dir must be absolute".into()));
        }
        if self.agent.workspace != self.workspace {
            return Err(LaunchError::Config(
                "agent workspace must equal the launch workspace".into(),
            ));
        }
        if self.agent.socket_path.parent() != Some(Path::new(SOCKET_DIR_IN_SANDBOX)) {
            return Err(LaunchError::Config(format!(
                "agent socket must be in {SOCKET_DIR_IN_SANDBOX}"
            )));
        }
        for p in &self.protected {
            p.validate()?;
        }
        for p in self.denied_read.iter().chain(&self.denied_write) {
            denied::relative(&self.workspace, p)?;
        }
        self.host.validate(&self.workspace, &self.state_dir)?;
        if let Some(shot) = &self.oneshot {
            shot.validate(self)?;
        }
        trees::validate(self)
    }
}

/// Whether `id` is safe as a path component and a label.
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Why the launcher failed; each variant names the step.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("invalid launch config: {0}")]
    Config(String),
    #[error("reading the launch config {path}: {source}")]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("preparing the session state at {path}: {source}")]
    State {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("protected path {path}: {why}")]
    Protected { path: PathBuf, why: String },
    #[error(transparent)]
    HardLinks(#[from] crate::hostside::hardlinks::HardLinkError),
    #[error("creating a user namespace: {0}")]
    UserNs(String),
    #[error("idmapping the workspace {path}: {source}")]
    Idmap {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot enforce the session's resource limits: {0}; run Cordon as root or inside a \
         delegated cgroup (systemd-run --user -p Delegate=yes --scope ...), or set \
         sandbox.limits.bestEffort to start without them"
    )]
    Limits(#[source] CgroupError),
    #[error("cloning the sandbox init: {0}")]
    Clone(std::io::Error),
    #[error("supervising the sandbox: {0}")]
    Supervise(std::io::Error),
    #[error("sandbox setup failed: {0}")]
    Setup(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_path_safe() {
        assert!(valid_session_id("abc-DEF_123"));
        assert!(!valid_session_id(""));
        assert!(!valid_session_id("../x"));
        assert!(!valid_session_id("a/b"));
        assert!(!valid_session_id(&"a".repeat(65)));
    }
}
