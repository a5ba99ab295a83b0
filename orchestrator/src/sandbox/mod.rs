//! Sandbox backends: where a session's agent runs and how it is confined (layer 2).
//!
//! A backend starts one sandbox per session from a [`SandboxSpec`] and returns a
//! [`Sandbox`]: a handshaken [`AgentClient`] plus a handle that tears the sandbox down.
//! - [`local`]: the embedded default; the agent in its own user, mount, pid, ipc, uts and
//!   network namespaces, no Docker needed.
//! - [`docker`]: one container per session through bollard.

use std::path::{Path, PathBuf};

use sandbox_agent::cgroup::SessionLimits;
use sandbox_agent::client::AgentClient;
use sandbox_agent::error::AgentError;

pub mod additional;
pub mod deny;
pub mod docker;
pub mod footprint;
pub mod freeze;
pub mod local;
pub mod supervisor;

pub use footprint::Footprint;
pub use supervisor::Supervisor;

/// Which backend runs a session's sandbox.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Local,
    Docker,
}

/// What one session's sandbox must provide.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// Stable id of the session (names sockets, containers, labels).
    pub session_id: String,
    /// The user's project: bind-mounted read-write at the same absolute path.
    pub workspace: PathBuf,
    /// Whether sandboxed processes may open internet sockets (set with `egress`: the
    /// namespace still has no route but its loopback).
    pub network: bool,
    /// The way out through the egress proxy (`None`: no network at all).
    pub egress: Option<crate::network::EgressSpec>,
    /// Start even when the kernel cannot enforce every layer (reported, never silent).
    pub best_effort: bool,
    /// Docker image to use (docker backend only); `None` means the default image.
    pub image: Option<String>,
    /// Tenant the session belongs to (labels, uid allocation on shared hosts).
    pub tenant: Option<String>,
    /// Absolute paths inside the workspace no sandboxed process may read: `Read(...)`
    /// deny rules bound in the kernel (resolved by [`deny::resolve`] before the start).
    /// Both backends bind them (local: the launcher's mounts; docker: [`docker::masks`]).
    pub denied_read: Vec<PathBuf>,
    /// Absolute paths inside the workspace no sandboxed process may change: `Edit(...)`
    /// deny rules bound in the kernel.
    pub denied_write: Vec<PathBuf>,
    /// Memory, pids and CPU of the whole session (`sandbox.limits` in the settings).
    /// Local: a session cgroup; Docker: the container's limits. `None` (for measuring
    /// what the cgroup set-up costs) makes no session cgroup on the local backend;
    /// Docker applies the defaults then. Every command-line path sets it.
    pub limits: Option<SessionLimits>,
    /// The user's toolchains shown read-only, the secrets in them hidden, Cordon's caches
    /// and the variables commands start with (local backend; a Docker image carries its
    /// own toolchains and ignores it). Empty by default; see [`crate::toolchains`].
    pub toolchains: crate::toolchains::Toolchains,
    /// How many commands may run at once (local backend: one per-command cgroup each,
    /// all made at start). `cordon sandbox` runs one.
    pub concurrent_commands: usize,
    /// Directories beside the workspace the session may write
    /// (`permissions.additionalDirectories` from the sources allowed to set them):
    /// mounted read-write at their own paths and protected as the workspace is, once
    /// [`checked_additional`] accepts them. Empty by default; a server tenant's
    /// sessions never get any.
    pub additional_dirs: Vec<PathBuf>,
}

impl SandboxSpec {
    pub fn new(session_id: impl Into<String>, workspace: impl Into<PathBuf>) -> Self {
        Self {
            session_id: session_id.into(),
            workspace: workspace.into(),
            network: false,
            egress: None,
            best_effort: false,
            image: None,
            tenant: None,
            denied_read: Vec::new(),
            denied_write: Vec::new(),
            limits: Some(SessionLimits::default()),
            toolchains: Default::default(),
            concurrent_commands: sandbox_agent::cgroup::slots::SLOT_COUNT,
            additional_dirs: Vec::new(),
        }
    }
}

impl SandboxSpec {
    /// Gives the sandbox a way out under `egress` (children may open INET sockets; only
    /// the loopback bridge leads anywhere).
    pub fn with_egress(mut self, egress: crate::network::EgressSpec) -> Self {
        self.network = true;
        self.egress = Some(egress);
        self
    }

    /// The agent's part of [`SandboxSpec::egress`], its proxy socket in `socket_dir` (the
    /// session's socket dir as the sandbox sees it) and the session CA's bundle (if any)
    /// at `ca_bundle` (where the backend has it made).
    pub fn egress_config(
        &self,
        socket_dir: &std::path::Path,
        ca_bundle: &std::path::Path,
    ) -> Option<sandbox_agent::egress::EgressConfig> {
        self.egress
            .as_ref()
            .map(|e| e.agent_config(socket_dir, ca_bundle))
    }
}

/// Why a sandbox could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the {backend} backend cannot confine on this host: {why}")]
    Unsupported { backend: &'static str, why: String },
    #[error("preparing the sandbox failed at {step}: {source}")]
    Setup {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the sandbox agent did not come up: {0}")]
    Agent(#[from] AgentError),
    #[error("docker: {0}")]
    Docker(String),
    #[error("the session's sandbox was shut down")]
    Closed,
    #[error("{0}")]
    Workspace(#[from] crate::workspace_location::LocationError),
    #[error(transparent)]
    AdditionalDirectory(#[from] additional::AdditionalDirError),
}

/// The spec's workspace, canonical, once it passed the location policy
/// ([`crate::workspace_location`]) for this process and for the backend's own state
/// directory `data_dir`: every backend starts a sandbox only on a checked one.
pub fn checked_workspace(workspace: &Path, data_dir: &Path) -> Result<PathBuf, SandboxError> {
    let canonical = std::fs::canonicalize(workspace).map_err(|source| SandboxError::Setup {
        step: "resolving the workspace",
        source,
    })?;
    crate::workspace_location::Forbidden::from_env()
        .with_data_dir(data_dir)
        .check(&canonical)?;
    Ok(canonical)
}

/// The spec's additional directories, canonical, once each passed the workspace's
/// location policy for this process and `data_dir` (see [`additional`]); entries inside
/// `workspace` (canonical, from [`checked_workspace`]) are dropped as already covered.
pub fn checked_additional(
    spec: &SandboxSpec,
    workspace: &Path,
    data_dir: &Path,
) -> Result<Vec<PathBuf>, SandboxError> {
    let forbidden = crate::workspace_location::Forbidden::from_env().with_data_dir(data_dir);
    Ok(additional::checked(
        &spec.additional_dirs,
        workspace,
        &forbidden,
    )?)
}

/// Tears a sandbox down. Dropping a handle without calling `destroy` must still not leak:
/// implementations kill what they started in `Drop` as a last resort.
#[tonic::async_trait]
pub trait SandboxHandle: Send + Sync {
    /// Stops every process, removes mounts, sockets and containers of this sandbox.
    async fn destroy(self: Box<Self>) -> Result<(), SandboxError>;
    /// Whether the sandbox is still running.
    fn is_alive(&self) -> bool;
    /// Stops every process of the sandbox (the agent included) and returns once none
    /// runs, so the host can work on the workspace without a sandbox process racing it.
    async fn freeze(&self) -> Result<(), SandboxError>;
    /// Lets the processes [`SandboxHandle::freeze`] stopped run again.
    async fn thaw(&self) -> Result<(), SandboxError>;
}

/// A running sandbox: a ready agent and the handle that ends it.
pub struct Sandbox {
    pub client: AgentClient,
    pub handle: Box<dyn SandboxHandle>,
    /// Taken from a warm pool (started ahead of its session), not started for it.
    pub warm: bool,
}

impl Sandbox {
    pub async fn destroy(self) -> Result<(), SandboxError> {
        let Sandbox {
            mut client, handle, ..
        } = self;
        // A polite shutdown first; the handle kills whatever remains either way.
        let _ = client.shutdown().await;
        handle.destroy().await
    }
}

/// Starts sandboxes of one kind.
#[tonic::async_trait]
pub trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;
    async fn start(&self, spec: &SandboxSpec) -> Result<Sandbox, SandboxError>;
    /// Whether this backend starts `spec` exactly as asked. A backend kept across
    /// sessions was configured once (the Docker backend's limits and image); a spec it
    /// would start otherwise goes to a backend made for it.
    fn starts_as_asked(&self, _spec: &SandboxSpec) -> bool {
        true
    }
    /// Sandboxes started ahead and waiting (`None`: this backend keeps no pool).
    fn warm_pool_size(&self) -> Option<usize> {
        None
    }
    /// Ends what the backend keeps between sessions (a warm pool's idle containers).
    async fn shutdown(&self) {}
}

/// Starts a sandbox for `spec` on the backend of `kind`, configured from the environment.
pub async fn start(kind: BackendKind, spec: &SandboxSpec) -> Result<Sandbox, SandboxError> {
    backend(kind, spec).await?.start(spec).await
}

/// Starts a session's sandbox under a [`Supervisor`], which replaces it when it dies.
pub async fn supervise(
    kind: BackendKind,
    spec: &SandboxSpec,
) -> Result<std::sync::Arc<Supervisor>, SandboxError> {
    Supervisor::start(backend(kind, spec).await?.into(), spec.clone()).await
}

/// A backend of `kind` to keep across many sessions (a long-lived server): Docker with
/// its warm pool, the default image built first. `None` for the local backend, which
/// keeps nothing between sessions.
pub async fn long_lived(
    kind: BackendKind,
) -> Result<Option<std::sync::Arc<dyn Backend>>, SandboxError> {
    match kind {
        BackendKind::Local => Ok(None),
        BackendKind::Docker => {
            let config = docker::DockerConfig::default();
            let docker = docker::connect().await?;
            docker::images::ensure(&docker, &config.default_image, |line| {
                eprintln!("cordon: {line}");
            })
            .await?;
            Ok(Some(std::sync::Arc::new(
                docker::DockerBackend::new(config).await?,
            )))
        }
    }
}

/// The backend of `kind`, configured from the environment, ready to start `spec`.
pub async fn backend(
    kind: BackendKind,
    spec: &SandboxSpec,
) -> Result<Box<dyn Backend>, SandboxError> {
    match kind {
        BackendKind::Local => Ok(Box::new(local::LocalBackend::from_env()?)),
        BackendKind::Docker => {
            // One-shot use (a CLI command, one session): no warm pool, which only pays off
            // in a long-lived server that starts many sessions.
            let limits = spec.limits.unwrap_or_default();
            #[allow(clippy::cast_possible_wrap, clippy::cast_precision_loss)]
            let config = docker::DockerConfig {
                pool_size: 0,
                memory_bytes: limits.memory_bytes as i64,
                pids_limit: limits.pids as i64,
                cpus: limits.cpu_millis as f64 / 1000.0,
                ..docker::DockerConfig::default()
            };
            let backend = docker::DockerBackend::new(config).await?;
            let image = spec
                .image
                .clone()
                .unwrap_or_else(|| backend.config().default_image.clone());
            // A missing Cordon image is built on the spot (seconds for the minimal one),
            // with its progress on stderr: what a CLI user expects from a first run.
            docker::images::ensure(backend.docker(), &image, |line| {
                eprintln!("cordon: {line}");
            })
            .await?;
            Ok(Box::new(backend))
        }
    }
}
