//! The Docker backend: one container per session, through bollard.
//!
//! # Layout
//!
//! - [`DockerBackend`]: implements [`Backend`]; starts a session's container cold, or claims
//!   one from the warm [`pool`], and returns a handshaken agent.
//! - [`container`]: the container's confinement (create options), start, inspect, remove.
//! - [`images`]: building `cordon-minimal` and `cordon-dev` from `images/`, offline.
//! - [`pool`]: pre-started idle containers, claimed in one step, refilled in the background.
//! - [`adopt`]: after an orchestrator crash, finds labelled containers and removes them.
//! - [`seccomp_profile`]: the Docker-JSON seccomp profile, generated from `policies/seccomp`.
//! - [`access`]: per-session uids and how the workspace is made writable for them (an
//!   idmapped mount; an ACL grant, restored exactly afterwards, where that is impossible).
//! - [`footprint`]: what a session leaves in its workspace, from the run directories.
//! - [`masks`]: protected paths, denied-write and denied-read paths over the workspace,
//!   and files hard-linked outside it.
//! - [`exec_cgroup`]: each command in a cgroup of its own inside the container, killed
//!   through it, so none of its processes outlives the call.
//!
//! Security properties of every session container (see [`container::session_host_config`]):
//! network none (a session with egress reaches its proxy only through the Unix socket in
//! its run dir, which the agent bridges to the container's loopback; resolv.conf names the
//! agent's DNS stub, never the host's resolver), read-only root, the workspace at the same absolute path (injected as an
//! idmapped `nosuid,nodev` mount when Cordon runs as root, see [`pool`]), a
//! size-capped /tmp tmpfs, all capabilities dropped, no-new-privileges, the generated
//! seccomp profile, pids/memory/cpu limits, an init that reaps, a distinct non-root uid,
//! and only the session's own run directory (holding the agent socket) shared with the host;
//! the protected paths (`policies/protected-paths.json`) and the session's denied-write paths
//! read-only, its denied-read paths masked ([`masks`]).
//! The Docker socket is never mounted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bollard::Docker;
use sandbox_agent::client::AgentClient;
use sandbox_agent::hostside::privbits;

use super::{Backend, BackendKind, Sandbox, SandboxError, SandboxHandle, SandboxSpec};

pub mod access;
mod acl;
pub mod adopt;
mod ca_store;
pub mod container;
pub mod devcontainer;
pub mod elf_deps;
pub mod exec_cgroup;
pub mod footprint;
pub mod images;
pub mod masks;
pub mod pool;
pub mod seccomp_profile;
mod server_image;
pub mod user_image;

pub use images::{ImageSet, build_images};

/// Label keys set on every session container; [`adopt`] finds containers by them.
pub mod labels {
    pub const SESSION: &str = "cordon.session";
    pub const TENANT: &str = "cordon.tenant";
    pub const CREATED_AT: &str = "cordon.created-at";
    pub const AGENT_VERSION: &str = "cordon.agent-version";
    /// The sandbox uid: lets [`super::adopt`] revoke its workspace access after a crash.
    pub const UID: &str = "cordon.uid";
    /// The workspace path (same inside and outside).
    pub const WORKSPACE: &str = "cordon.workspace";
    /// The host run directory holding the agent socket.
    pub const RUN_DIR: &str = "cordon.run-dir";
    /// Set on idle pool containers (value: the pool slot); removed from nothing, since a
    /// claimed pool container keeps its labels: the session label says who owns it.
    pub const POOL: &str = "cordon.pool";
    /// Pid of the orchestrator process that created the container.
    pub const OWNER_PID: &str = "cordon.owner-pid";
    /// That process's start time (field 22 of /proc/PID/stat, clock ticks since boot):
    /// with the pid, names the process even after its pid is reused.
    pub const OWNER_START: &str = "cordon.owner-start";
}

/// Where the agent socket directory is mounted inside every container.
pub const CONTAINER_RUN_DIR: &str = "/run/cordon";
/// The agent socket's file name inside the run directory.
pub const SOCKET_NAME: &str = "agent.sock";
/// The default image for sessions that do not name one.
pub const DEFAULT_IMAGE: &str = "cordon-minimal";

/// Limits and knobs of the Docker backend.
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// Image for sessions whose spec names none.
    pub default_image: String,
    /// Most processes (threads) in one container (pids cgroup).
    pub pids_limit: i64,
    /// Memory cap in bytes; swap is capped to the same value (no swap beyond it).
    pub memory_bytes: i64,
    /// CPUs, e.g. 1.0.
    pub cpus: f64,
    /// Size of the /tmp tmpfs in bytes.
    pub tmpfs_bytes: u64,
    /// Idle containers kept per image by the warm pool (0 disables it).
    pub pool_size: usize,
    /// Host directory under which per-session run directories are made.
    pub run_root: PathBuf,
    /// First sandbox uid; each live session gets a distinct one above it.
    pub uid_base: u32,
    /// Where the cross-process uid locks live (see [`access::default_lock_dir`]).
    pub uid_lock_dir: PathBuf,
    /// How long to wait for the agent socket after the container starts.
    pub ready_timeout: Duration,
    /// Inject the workspace as an idmapped mount when the host can (see [`access`]);
    /// `false` always takes the ACL fallback (hosts whose idmapping misbehaves, tests).
    pub idmap: bool,
    /// Run each command in a cgroup of its own inside the container where the host allows
    /// (see [`exec_cgroup`]); `false` leaves the agent's namespace sweep alone (for
    /// measuring what the cgroups cost).
    pub exec_cgroups: bool,
}

impl Default for DockerConfig {
    fn default() -> Self {
        Self {
            default_image: DEFAULT_IMAGE.to_string(),
            pids_limit: 512,
            memory_bytes: 1024 * 1024 * 1024,
            cpus: 1.0,
            tmpfs_bytes: 256 * 1024 * 1024,
            pool_size: 2,
            // Not `$CORDON_HOME/run`: the local backend sweeps entries there that carry
            // no launcher pid file, which would take a live container's socket with them.
            run_root: run_root(&cordon_home()),
            uid_base: access::UID_BASE,
            uid_lock_dir: access::default_lock_dir(),
            ready_timeout: Duration::from_secs(15),
            idmap: true,
            exec_cgroups: true,
        }
    }
}

/// Where the per-container run directories of the Docker sessions under Cordon's data
/// directory `home` live.
pub fn run_root(home: &std::path::Path) -> PathBuf {
    home.join("docker/run")
}

/// `$CORDON_HOME`, default `~/.cordon` ([`crate::paths::cordon_home`]); `/root/.cordon`
/// when neither variable is set.
pub fn cordon_home() -> PathBuf {
    crate::paths::cordon_home().unwrap_or_else(|_| PathBuf::from("/root/.cordon"))
}

/// Maps a bollard error to the backend's error type, naming the step.
pub(crate) fn docker_err(step: &'static str) -> impl Fn(bollard::errors::Error) -> SandboxError {
    move |e| SandboxError::Docker(format!("{step}: {e}"))
}

/// Connects to the local engine and negotiates the API version (the engine here speaks
/// 1.41, older than bollard's default).
pub async fn connect() -> Result<Docker, SandboxError> {
    let docker = Docker::connect_with_local_defaults().map_err(docker_err("connect"))?;
    docker
        .negotiate_version()
        .await
        .map_err(docker_err("negotiate api version"))
}

/// What the engine offers, for `cordon doctor`.
#[derive(Debug, Clone, Default)]
pub struct DockerReport {
    /// Whether the engine answered at all.
    pub reachable: bool,
    /// Why not, when it did not.
    pub error: Option<String>,
    pub engine_version: Option<String>,
    pub api_version: Option<String>,
    /// Whether the engine was built with seccomp support.
    pub seccomp: bool,
    /// Whether the engine has an init binary (`HostConfig.init`).
    pub init_binary: bool,
    /// Cordon images present, with their labels.
    pub images: Vec<ImageReport>,
    /// Which container limits the engine says it can enforce (memory, swap, pids, cpu).
    pub limits: Vec<(&'static str, bool)>,
}

/// One Cordon image the engine holds.
#[derive(Debug, Clone)]
pub struct ImageReport {
    pub name: String,
    pub agent_version: Option<String>,
    pub agent_sha256: Option<String>,
    /// Whether its agent matches the binary `build_images` would use now.
    pub current: bool,
}

/// Probes the engine: versions, security options, Cordon images.
pub async fn probe() -> DockerReport {
    let docker = match connect().await {
        Ok(d) => d,
        Err(e) => {
            return DockerReport {
                error: Some(e.to_string()),
                ..DockerReport::default()
            };
        }
    };
    let mut report = DockerReport {
        reachable: true,
        ..DockerReport::default()
    };
    match docker.version().await {
        Ok(v) => {
            report.engine_version = v.version;
            report.api_version = v.api_version;
        }
        Err(e) => report.error = Some(format!("version: {e}")),
    }
    if let Ok(info) = docker.info().await {
        report.seccomp = info
            .security_options
            .unwrap_or_default()
            .iter()
            .any(|o| o.contains("seccomp"));
        report.init_binary = info.init_binary.is_some_and(|b| !b.is_empty());
        let yes = |b: Option<bool>| b.unwrap_or(false);
        report.limits = vec![
            ("memory", yes(info.memory_limit)),
            ("swap", yes(info.swap_limit)),
            ("pids", yes(info.pids_limit)),
            ("cpu", yes(info.cpu_cfs_quota)),
        ];
    }
    report.images = images::report(&docker).await;
    report
}

/// The Docker backend.
pub struct DockerBackend {
    docker: Docker,
    config: DockerConfig,
    uids: Arc<access::UidAllocator>,
    pool: Option<pool::WarmPool>,
    /// Each image's system CA roots, for the session CA of a cold start that is not root.
    image_roots: ca_store::ImageRoots,
}

impl DockerBackend {
    /// Connects, removes containers a crashed orchestrator left behind, and starts the warm
    /// pool for the default image when `config.pool_size > 0` and this process is root.
    pub async fn new(config: DockerConfig) -> Result<Self, SandboxError> {
        let docker = connect().await?;
        adopt::reconcile(&docker, &config.run_root, &Default::default()).await?;
        let uids = Arc::new(access::UidAllocator::new(
            config.uid_base,
            config.uid_lock_dir.clone(),
        ));
        // A claim injects the workspace into a running container (open_tree, setns,
        // move_mount), which needs root: a Cordon without it (the compose file's server
        // user) starts every session cold, with the workspace bound at creation.
        let pool = if config.pool_size > 0 && nix::unistd::geteuid().is_root() {
            Some(pool::WarmPool::start(
                docker.clone(),
                config.clone(),
                config.default_image.clone(),
                uids.clone(),
            ))
        } else {
            None
        };
        Ok(Self {
            docker,
            config,
            uids,
            pool,
            image_roots: ca_store::ImageRoots::default(),
        })
    }

    pub fn config(&self) -> &DockerConfig {
        &self.config
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The warm pool, if enabled.
    pub fn pool(&self) -> Option<&pool::WarmPool> {
        self.pool.as_ref()
    }

    /// Starts a container for `spec` without touching the pool. As root (and with
    /// [`DockerConfig::idmap`]), the container starts waiting for its workspace, which is
    /// then injected the warm pool's way (an idmapped, nosuid, nodev mount, or the ACL
    /// fallback where the host cannot idmap; see [`pool`]); otherwise [`Self::start_bound`].
    pub async fn start_cold(&self, spec: &SandboxSpec) -> Result<Sandbox, SandboxError> {
        if !(self.config.idmap && nix::unistd::geteuid().is_root()) {
            return self.start_bound(spec).await;
        }
        let image = self.image_for(spec);
        let slot = pool::new_slot(
            &self.docker,
            &self.config,
            &image,
            &self.uids,
            &spec.session_id,
            (container::Mode::Injected, spec.egress.is_some()),
            spec.tenant.as_deref(),
        )
        .await?;
        pool::claim_slot(&self.docker, &self.config, slot, spec).await
    }

    /// Starts a container with the workspace bind-mounted at create time and reachable by
    /// an ACL grant (see [`access`]): for a Cordon that cannot inject mounts (not root).
    /// Every failure after the grant restores the workspace's exact prior ACLs.
    pub async fn start_bound(&self, spec: &SandboxSpec) -> Result<Sandbox, SandboxError> {
        let image = self.image_for(spec);
        let mut session = container::Session::prepare(&self.config, &self.uids, spec)?;
        session.command_env = user_image::command_env(&self.docker, &image).await;
        if let Some(ca) = session.egress.as_ref().and_then(|e| e.ca.clone()) {
            // Without a view of the container's layer: the image's roots from the engine.
            let roots = self
                .image_roots
                .get(&self.docker, &image, &self.config.run_root)
                .await;
            session.ca_store =
                roots.and_then(|r| ca_store::bind_with(&session.sock_dir(), &ca, r.to_vec()));
        }
        let created = container::create_and_start(
            &self.docker,
            &self.config,
            &image,
            &session,
            container::Mode::Cold,
            session.egress.is_some(),
        )
        .await;
        let id = match created {
            Ok(id) => id,
            Err(e) => {
                // Restores the workspace's ACLs too: a failed creation leaves nothing.
                session.cleanup();
                return Err(e);
            }
        };
        finish(&self.docker, &self.config, session, id, spec).await
    }

    fn image_for(&self, spec: &SandboxSpec) -> String {
        spec.image
            .clone()
            .unwrap_or_else(|| self.config.default_image.clone())
    }
}

/// Starts the session's egress proxy (when `spec` has a way out), waits for the agent
/// and wraps everything in a [`Sandbox`]; on failure tears down.
pub(crate) async fn finish(
    docker: &Docker,
    config: &DockerConfig,
    session: container::Session,
    id: String,
    spec: &SandboxSpec,
) -> Result<Sandbox, SandboxError> {
    let started = std::time::Instant::now();
    let sock_dir = session.sock_dir();
    let mut handle = DockerSandboxHandle::new(docker.clone(), id, session);
    if let Some(egress) = &spec.egress {
        // On the host side of the dir the container sees at CONTAINER_RUN_DIR, where the
        // agent's bridge finds it; serving before any command can run.
        match egress.serve(&spec.session_id, &sock_dir) {
            Ok(task) => handle.proxy = Some(task),
            Err(source) => {
                let _ = Box::new(handle).destroy().await;
                return Err(SandboxError::Setup {
                    step: "starting the egress proxy",
                    source,
                });
            }
        }
    }
    match AgentClient::connect_unix_waiting(handle.socket_path(), config.ready_timeout).await {
        Ok(client) => Ok({
            tracing::debug!(elapsed = ?started.elapsed(), "agent answered its handshake");
            Sandbox {
                client,
                handle: Box::new(handle),
                warm: false,
            }
        }),
        Err(e) => {
            let logs = container::tail_logs(docker, &handle.container_id).await;
            let _ = Box::new(handle).destroy().await;
            Err(SandboxError::Docker(format!(
                "agent did not come up: {e}; container output: {logs}"
            )))
        }
    }
}

#[tonic::async_trait]
impl Backend for DockerBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Docker
    }

    /// Claims a warm container when the spec uses the pool's image and one is ready;
    /// otherwise starts one cold. A restart after a crash is just another `start` with the
    /// same spec: the new container mounts the same workspace.
    async fn start(&self, spec: &SandboxSpec) -> Result<Sandbox, SandboxError> {
        if let Some(pool) = &self.pool {
            // Slots serve sessions with a way out and without (see container::create_and_start).
            let wants = spec.image.as_deref().unwrap_or(&self.config.default_image);
            if wants == pool.image() {
                match pool.claim(spec).await {
                    Ok(Some(sandbox)) => return Ok(sandbox),
                    Ok(None) => {}
                    Err(e) => tracing::warn!("warm pool claim failed, starting cold: {e}"),
                }
            }
        }
        self.start_cold(spec).await
    }

    /// Sessions get this backend's limits (memory, pids, CPU) and, through the pool,
    /// its default image: anything else is started by a backend made for the spec.
    #[allow(clippy::cast_possible_wrap, clippy::cast_precision_loss)]
    fn starts_as_asked(&self, spec: &SandboxSpec) -> bool {
        let limits = spec.limits.unwrap_or_default();
        let image = spec.image.as_deref().unwrap_or(&self.config.default_image);
        self.config.memory_bytes == limits.memory_bytes as i64
            && self.config.pids_limit == limits.pids as i64
            && (self.config.cpus - limits.cpu_millis as f64 / 1000.0).abs() < 1e-9
            && image == self.config.default_image
    }

    fn warm_pool_size(&self) -> Option<usize> {
        self.pool.as_ref().map(pool::WarmPool::ready)
    }

    async fn shutdown(&self) {
        if let Some(pool) = &self.pool {
            pool.shutdown().await;
        }
    }
}

/// Ends one session's container. `Drop` removes the container too if `destroy` was never
/// called, so no container outlives its handle (and [`adopt`] catches crashes).
pub struct DockerSandboxHandle {
    docker: Docker,
    container_id: String,
    session: Option<container::Session>,
    /// The session's egress proxy (stops with the handle).
    proxy: Option<crate::network::egress::ProxyTask>,
    alive: Arc<AtomicBool>,
    watcher: tokio::task::JoinHandle<()>,
}

impl DockerSandboxHandle {
    pub(crate) fn new(docker: Docker, container_id: String, session: container::Session) -> Self {
        let alive = Arc::new(AtomicBool::new(true));
        let watcher = tokio::spawn(container::watch_exit(
            docker.clone(),
            container_id.clone(),
            alive.clone(),
        ));
        Self {
            docker,
            container_id,
            session: Some(session),
            proxy: None,
            alive,
            watcher,
        }
    }

    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    /// The host path of the agent socket.
    pub fn socket_path(&self) -> PathBuf {
        self.session
            .as_ref()
            .map(|s| s.sock_dir().join(SOCKET_NAME))
            .unwrap_or_default()
    }

    /// The sandbox uid of this session.
    pub fn uid(&self) -> Option<u32> {
        self.session.as_ref().map(|s| s.uid)
    }

    /// Labels the container carries (for tests and diagnostics).
    pub async fn labels(&self) -> Result<HashMap<String, String>, SandboxError> {
        let info = self
            .docker
            .inspect_container(&self.container_id, None)
            .await
            .map_err(docker_err("inspect container"))?;
        Ok(info.config.and_then(|c| c.labels).unwrap_or_default())
    }
}

#[tonic::async_trait]
impl SandboxHandle for DockerSandboxHandle {
    async fn destroy(mut self: Box<Self>) -> Result<(), SandboxError> {
        self.watcher.abort();
        self.alive.store(false, Ordering::SeqCst);
        let removed = container::remove(&self.docker, &self.container_id).await;
        drop(self.proxy.take());
        if let Some(session) = self.session.take() {
            // Only once no sandboxed process can race them (the container is gone): git
            // dirs made in the session are vetted, and no privilege bits reach the host
            // (sandbox_agent::hostside::privbits says which files keep theirs).
            // The additional directories get the same as the workspace.
            if removed.is_ok() {
                let keep = privbits::Keep::unchanged_since_creation_of(&session.run_dir);
                for (tree, run_dir) in session.trees() {
                    masks::vet_git(&run_dir, &tree);
                    let _ =
                        tokio::task::spawn_blocking(move || privbits::sweep_and_log(&tree, keep))
                            .await;
                }
            }
            session.cleanup();
        }
        removed
    }

    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// The engine's freezer: every process of the container stopped at once.
    async fn freeze(&self) -> Result<(), SandboxError> {
        self.docker
            .pause_container(&self.container_id)
            .await
            .map_err(docker_err("pause container"))
    }

    async fn thaw(&self) -> Result<(), SandboxError> {
        self.docker
            .unpause_container(&self.container_id)
            .await
            .map_err(docker_err("unpause container"))
    }
}

impl Drop for DockerSandboxHandle {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        self.watcher.abort();
        // Last resort: remove the container in the background if a runtime is still there
        // (adopt::reconcile catches it otherwise), and clean up host state now.
        // The git vetting waits for the container to be gone (it must not race a sandboxed
        // process); its record leaves the run directory before cleanup removes that.
        let records: Vec<_> = session
            .trees()
            .into_iter()
            .filter_map(|(tree, run_dir)| {
                sandbox_agent::launch::gitvet::take_record(&run_dir).map(|r| (r, tree))
            })
            .collect();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let docker = self.docker.clone();
            let id = self.container_id.clone();
            // A session command's exit waits for it (its runtime runs a task only while
            // it is driven).
            crate::runtime::finish_before_exit(rt.spawn(async move {
                if container::remove(&docker, &id).await.is_ok() {
                    for (record, tree) in &records {
                        sandbox_agent::launch::gitvet::vet_recorded(record, tree);
                    }
                }
            }));
        }
        session.cleanup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_matches_the_documented_limits() {
        let c = DockerConfig::default();
        assert_eq!(c.pids_limit, 512);
        assert_eq!(c.memory_bytes, 1 << 30);
        assert_eq!(c.tmpfs_bytes, 256 << 20);
        assert_eq!(c.pool_size, 2);
        assert!(
            c.uid_base >= 100_000,
            "sandbox uids stay clear of host users"
        );
    }
}
