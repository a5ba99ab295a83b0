//! The local backend: the embedded default, no Docker. Each session's agent runs in its
//! own user, mount, pid, ipc, uts, net and cgroup namespaces, built by the agent binary
//! itself in launcher mode (`sandbox-agent --launch-config FILE`, see
//! `sandbox_agent::launch`): this multi-threaded process never sets up namespaces after a
//! fork of its own. The one exception is a one-shot run started before any runtime or
//! thread exists, which this process launches itself (`oneshot::run_oneshot_inline`,
//! refused in a process with more than one thread).
//!
//! Limits: the launcher puts the session in its own cgroup (memory with no swap beyond
//! it, pids, CPU; [`SandboxSpec::limits`], from `sandbox.limits`) before the sandbox's
//! first process runs, and delegates a per-command part of it to the sandbox so every
//! command gets its own cgroup and is killed through it (`sandbox_agent::cgroup`). Where
//! no cgroup can be made the session refuses to start, unless the limits are best effort.
//!
//! Teardown, whatever happens: the launcher holds the read end of a lifeline pipe whose
//! only write end lives in [`LocalHandle`]; when the handle lets go (destroy, drop) or this
//! process dies, the launcher sees EOF, kills the sandbox's init (the kernel then kills
//! every process in its pid namespace), removes the socket, placeholders and cgroups and
//! exits.
//! The agent also exits on its own when its controller connection closes. As a last
//! resort the handle kills the launcher, whose init dies with it (parent-death signal),
//! and sessions whose launcher died are swept at the next start.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sandbox_agent::client::AgentClient;
use sandbox_agent::config::{AgentConfig, Rlimits};
use sandbox_agent::launch::{
    self, LaunchConfig, ProtectedPath, SOCKET_DIR_IN_SANDBOX, SOCKET_NAME, state,
};
use serde::Deserialize;

use super::{Backend, BackendKind, Sandbox, SandboxError, SandboxHandle, SandboxSpec};
use crate::paths;

mod footprint;
pub mod oneshot;
pub use footprint::footprint;

/// The protected-path policy, compiled in so the binary cannot drift from it.
pub const PROTECTED_POLICY: &str = include_str!("../../../policies/protected-paths.json");
/// How long a sandbox may take to come up.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long start polls for the agent's socket at the timer's finest grain.
const FAST_POLL: Duration = Duration::from_millis(200);
/// How long destroy waits for the launcher to clean up before killing it.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[allow(dead_code)]
    version: u32,
    #[allow(dead_code)]
    why: String,
    paths: Vec<PolicyEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyEntry {
    path: PathBuf,
    kind: launch::EntryKind,
    why: String,
}

/// Parses and validates the protected-path policy: every entry relative, plain and
/// justified.
pub fn parse_protected(text: &str) -> Result<Vec<ProtectedPath>, String> {
    let file: PolicyFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
    file.paths
        .into_iter()
        .map(|e| {
            if e.why.trim().is_empty() {
                return Err(format!("{}: every entry needs a why", e.path.display()));
            }
            let p = ProtectedPath::new(e.path, e.kind);
            p.validate().map_err(|e| e.to_string())?;
            Ok(p)
        })
        .collect()
}

/// The compiled-in protected paths.
pub fn protected_paths() -> Result<Vec<ProtectedPath>, SandboxError> {
    parse_protected(PROTECTED_POLICY).map_err(|why| SandboxError::Unsupported {
        backend: "local",
        why: format!("invalid policies/protected-paths.json: {why}"),
    })
}

/// Starts sandboxes as namespaced children of this process.
#[derive(Debug, Clone)]
pub struct LocalBackend {
    home: PathBuf,
    agent_bin: PathBuf,
    protected: Vec<ProtectedPath>,
    uid_base: u32,
}

fn setup(step: &'static str) -> impl Fn(std::io::Error) -> SandboxError {
    move |source| SandboxError::Setup { step, source }
}

impl LocalBackend {
    /// A backend keeping state under `home` and launching `agent_bin`.
    pub fn new(home: PathBuf, agent_bin: PathBuf) -> Result<Self, SandboxError> {
        Ok(Self {
            home,
            agent_bin,
            protected: protected_paths()?,
            uid_base: launch::DEFAULT_UID_BASE,
        })
    }

    /// `$CORDON_HOME` and the agent binary found as [`paths::find_agent_binary`] says.
    pub fn from_env() -> Result<Self, SandboxError> {
        let unsupported = |e: paths::PathsError| SandboxError::Unsupported {
            backend: "local",
            why: e.to_string(),
        };
        let home = paths::cordon_home().map_err(unsupported)?;
        let agent = paths::find_agent_binary().map_err(unsupported)?;
        Self::new(home, agent)
    }

    /// Base of the host uid ranges used when running as root (default 1,000,000).
    pub fn with_uid_base(mut self, base: u32) -> Self {
        self.uid_base = base;
        self
    }

    fn launch_config(
        &self,
        spec: &SandboxSpec,
        workspace: &Path,
        additional: &[PathBuf],
        state_dir: &Path,
    ) -> LaunchConfig {
        let mut agent_env = Vec::new();
        if let Ok(filter) = std::env::var("CORDON_AGENT_LOG") {
            agent_env.push(("CORDON_AGENT_LOG".to_string(), filter));
        }
        // Cordon's own data must stay invisible even when it lies inside the workspace.
        let home = std::fs::canonicalize(&self.home).unwrap_or_else(|_| self.home.clone());
        let masked = if home.starts_with(workspace) {
            vec![home]
        } else {
            Vec::new()
        };
        LaunchConfig {
            session_id: spec.session_id.clone(),
            state_dir: state_dir.to_path_buf(),
            workspace: workspace.to_path_buf(),
            protected: self.protected.clone(),
            masked,
            denied_read: spec.denied_read.clone(),
            denied_write: spec.denied_write.clone(),
            uid_base: self.uid_base,
            tmp_size_mib: 1024,
            limits: spec.limits,
            lifeline_fd: None,
            host: spec.toolchains.view.clone(),
            concurrent_commands: spec.concurrent_commands,
            additional: additional.to_vec(),
            agent_env,
            oneshot: None,
            agent: AgentConfig {
                socket_path: Path::new(SOCKET_DIR_IN_SANDBOX).join(SOCKET_NAME),
                workspace: workspace.to_path_buf(),
                tmp_dir: PathBuf::from("/tmp"),
                // Cordon's tool caches, the scratch directories (their layer is the
                // session's own) and the additional directories: writable for commands
                // (Landlock) and file operations as mounted.
                extra_writable: spec
                    .toolchains
                    .view
                    .writable
                    .iter()
                    .chain(&spec.toolchains.view.scratch)
                    .chain(additional)
                    .cloned()
                    .collect(),
                extra_readable: spec.toolchains.view.read_only.clone(),
                command_env: spec.toolchains.env.clone(),
                protected_paths: std::iter::once(workspace)
                    .chain(additional.iter().map(PathBuf::as_path))
                    .flat_map(|tree| self.protected.iter().map(|p| tree.join(&p.path)))
                    .chain(spec.denied_write.iter().cloned())
                    .collect(),
                network: spec.network,
                // The init makes the CA bundle on the sandbox's own /run.
                egress: spec.egress_config(
                    Path::new(SOCKET_DIR_IN_SANDBOX),
                    Path::new(sandbox_agent::egress::ca::LOCAL_BUNDLE),
                ),
                best_effort: spec.best_effort,
                rlimits: Rlimits::default(),
                disk_budget_bytes: spec.limits.and_then(|l| l.disk_bytes),
                // Set by the launcher, which makes the cgroups.
                exec_cgroup: None,
                // The orchestrator is outside the sandbox's pid namespace: any visible
                // peer is a sandboxed process knocking on the socket.
                require_outside_peer: true,
            },
        }
    }

    /// Creates the state dir, writes the config and spawns the launcher.
    fn spawn(&self, spec: &SandboxSpec) -> Result<(LocalHandle, PathBuf), SandboxError> {
        let (workspace, additional, state_dir) = self.prepare_state(spec)?;
        let spawned = self.spawn_in(spec, &workspace, &additional, &state_dir);
        if spawned.is_err() {
            state::cleanup_session(&state_dir);
        }
        spawned.map(|handle| (handle, state_dir.join("sock").join(SOCKET_NAME)))
    }

    /// Checks the session id, the workspace and the additional directories, prepares the
    /// data directory and creates the session's state dir (settling a previous launcher of
    /// the same session first). The canonical workspace, the additional directories and
    /// the state dir.
    fn prepare_state(
        &self,
        spec: &SandboxSpec,
    ) -> Result<(PathBuf, Vec<PathBuf>, PathBuf), SandboxError> {
        if !launch::valid_session_id(&spec.session_id) {
            return Err(SandboxError::Setup {
                step: "checking the session id",
                source: std::io::Error::other("session id must be 1-64 of [A-Za-z0-9_-]"),
            });
        }
        let workspace = super::checked_workspace(&spec.workspace, &self.home)?;
        let additional = super::checked_additional(spec, &workspace, &self.home)?;
        let run = paths::run_dir(&self.home);
        paths::prepare_home(&self.home).map_err(setup("preparing the data directory"))?;
        paths::private_dir(&run).map_err(setup("creating the run dir"))?;
        state::sweep_stale(&run);
        let state_dir = run.join(&spec.session_id);
        settle_previous_launcher(&state_dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&state_dir)
            .map_err(setup("creating the session state dir"))?;
        Ok((workspace, additional, state_dir))
    }

    /// Records `config` in the state dir (the reaper of a dead launcher reads it there)
    /// and opens the launcher's log beside it.
    fn record_config(
        config: &LaunchConfig,
        state_dir: &Path,
    ) -> Result<(PathBuf, std::fs::File), SandboxError> {
        let config_path = state_dir.join(state::LAUNCH_CONFIG);
        let json = serde_json::to_vec_pretty(config)
            .map_err(|e| setup("encoding the launch config")(e.into()))?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&config_path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &json))
            .map_err(setup("writing the launch config"))?;
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(state_dir.join("launcher.log"))
            .map_err(setup("opening the launcher log"))?;
        Ok((config_path, log))
    }

    fn spawn_in(
        &self,
        spec: &SandboxSpec,
        workspace: &Path,
        additional: &[PathBuf],
        state_dir: &Path,
    ) -> Result<LocalHandle, SandboxError> {
        let (life_r, life_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| setup("creating the lifeline")(e.into()))?;
        let mut config = self.launch_config(spec, workspace, additional, state_dir);
        config.lifeline_fd = Some(life_r.as_raw_fd());
        let (config_path, log) = Self::record_config(&config, state_dir)?;
        // The one descriptor the launcher inherits.
        let lifeline = life_r.as_raw_fd();
        let mut cmd = Command::new(&self.agent_bin);
        cmd.arg("--launch-config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            // Its own process group: a terminal's Ctrl-C reaches cordon, which tears down
            // in order, not the launcher mid-flight.
            .process_group(0);
        // Security: the sandbox's init is a fork of the launcher, so the launcher's
        // environment is the init's; the variables brokered credentials are read from
        // stay with this process (the init is undumpable too, so its environ is unreadable
        // inside either way).
        for name in spec.egress.iter().flat_map(|e| e.secret_variables()) {
            cmd.env_remove(name);
        }
        // The launcher, and so the sandbox and every command in it, gets every CPU this
        // process was given, not the pin of the thread that spawns it.
        let cpus = sandbox_agent::affinity::original();
        // SAFETY: the closure runs between fork and exec and makes async-signal-safe calls
        // (fcntl, sched_setaffinity) on an fd number and a mask captured by value.
        unsafe {
            cmd.pre_exec(move || {
                // Only this child may inherit the lifeline's read end (made close-on-exec,
                // so no other child of this process ever holds it).
                if libc::fcntl(lifeline, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(cpus) = &cpus {
                    sandbox_agent::affinity::restore(cpus);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(setup("spawning the launcher"))?;
        drop(life_r);
        Ok(LocalHandle {
            child: Mutex::new(Some(child)),
            lifeline: Mutex::new(Some(life_w)),
            state_dir: state_dir.to_path_buf(),
            proxy: None,
        })
    }
}

#[tonic::async_trait]
impl Backend for LocalBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    async fn start(&self, spec: &SandboxSpec) -> Result<Sandbox, SandboxError> {
        let (mut handle, socket) = self.spawn(spec)?;
        let started = Instant::now();
        // Poll every millisecond (the timer's grain) while a sandbox usually comes up,
        // then back off: a coarser interval adds about half of itself to every start (the
        // former doubling up to 5 ms cost 2 to 5 ms at a 15 ms start).
        let mut pause = Duration::from_micros(250);
        let client = loop {
            if let Some(status) = handle.exited() {
                let log = handle.log();
                Box::new(handle).destroy().await.ok();
                return Err(SandboxError::Setup {
                    step: "starting the sandbox",
                    source: std::io::Error::other(format!(
                        "launcher exited ({status}): {}",
                        log.trim()
                    )),
                });
            }
            if socket.exists() {
                match AgentClient::connect_unix(&socket).await {
                    Ok(client) => break client,
                    Err(e) if started.elapsed() > START_TIMEOUT => {
                        Box::new(handle).destroy().await.ok();
                        return Err(e.into());
                    }
                    Err(_) => {}
                }
            }
            if started.elapsed() > START_TIMEOUT {
                let log = handle.log();
                Box::new(handle).destroy().await.ok();
                return Err(SandboxError::Setup {
                    step: "starting the sandbox",
                    source: std::io::Error::other(format!(
                        "timed out after {START_TIMEOUT:?}: {}",
                        log.trim()
                    )),
                });
            }
            tokio::time::sleep(pause).await;
            let cap = if started.elapsed() < FAST_POLL {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(5)
            };
            pause = (pause * 2).min(cap);
        };
        if let Some(egress) = &spec.egress {
            // Before any command runs: the agent's bridge connects at each connection.
            let dir = socket.parent().unwrap_or(Path::new("/nonexistent"));
            match egress.serve(&spec.session_id, dir) {
                Ok(task) => handle.proxy = Some(task),
                Err(source) => {
                    Box::new(handle).destroy().await.ok();
                    return Err(SandboxError::Setup {
                        step: "starting the egress proxy",
                        source,
                    });
                }
            }
        }
        Ok(Sandbox {
            client,
            handle: Box::new(handle),
            warm: false,
        })
    }
}

/// Ends one local sandbox.
#[derive(Debug)]
pub struct LocalHandle {
    /// The session's egress proxy (stops with the handle).
    proxy: Option<crate::network::egress::ProxyTask>,
    child: Mutex<Option<Child>>,
    lifeline: Mutex<Option<OwnedFd>>,
    state_dir: PathBuf,
}

impl LocalHandle {
    /// The launcher's pid (host view), while it runs.
    pub fn launcher_pid(&self) -> Option<u32> {
        self.child.lock().ok()?.as_ref().map(Child::id)
    }

    /// The host pid of the sandbox's init (the launcher's child, pid 1 of the sandbox's
    /// pid namespace), while it runs.
    fn init_pid(&self) -> Option<i32> {
        let launcher = self.launcher_pid()?;
        children_of(launcher).first().map(|(pid, _)| *pid)
    }

    /// Runs `act` on the sandbox's init pid, off the async runtime; without an init the
    /// namespace and every process in it are gone, and there is nothing to do.
    async fn on_init(
        &self,
        step: &'static str,
        act: fn(i32) -> Result<(), SandboxError>,
    ) -> Result<(), SandboxError> {
        let Some(init) = self.init_pid() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || act(init))
            .await
            .map_err(|e| setup(step)(std::io::Error::other(e.to_string())))?
    }

    /// The session's host-side state dir.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    fn exited(&self) -> Option<std::process::ExitStatus> {
        let mut guard = self.child.lock().ok()?;
        guard.as_mut()?.try_wait().ok().flatten()
    }

    /// Waits at most `limit` for the launcher to exit. Woken by the exit itself (a
    /// pidfd), not by polling: a poll adds up to its period to every teardown.
    async fn launcher_exit(&self, limit: Duration) {
        let watch = self
            .launcher_pid()
            .and_then(|pid| sandbox_agent::confine::sys::exit_watch(pid as i32).ok());
        let deadline = Instant::now() + limit;
        if let Some(watch) = &watch {
            let _ = tokio::time::timeout(limit, watch.readable()).await;
        }
        while self.exited().is_none() && Instant::now() < deadline {
            if self.child.lock().map(|g| g.is_none()).unwrap_or(true) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.state_dir.join("launcher.log")).unwrap_or_default()
    }

    /// Ends the sandbox from synchronous code: closes the lifeline, gives the launcher a
    /// moment for its orderly teardown, else kills it and its init outright; then removes
    /// the host-side state. Idempotent.
    fn kill_now(&self, grace: Duration) {
        if let Ok(mut guard) = self.lifeline.lock() {
            guard.take();
        }
        let Ok(mut guard) = self.child.lock() else {
            return;
        };
        if let Some(mut child) = guard.take() {
            let deadline = Instant::now() + grace;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if matches!(child.try_wait(), Ok(None)) {
                // The init would die of its parent-death signal; kill it directly too and
                // wait until it is gone, so no sandboxed process sees the cleanup below.
                let inits = children_of(child.id());
                let _ = child.kill();
                let _ = child.wait();
                for (pid, start) in &inits {
                    if state::start_time(*pid) == Some(*start) {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(*pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
                let deadline = Instant::now() + STOP_TIMEOUT;
                while inits.iter().any(|(p, s)| state::start_time(*p) == Some(*s))
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                // Killed mid-teardown, the launcher may not have swept: its backstop here.
                state::sweep_privilege_bits(&self.state_dir);
            }
        }
        drop(guard);
        // The launcher swept the workspace for privilege bits; say what it stripped
        // before its log goes with the state dir.
        for path in self
            .log()
            .lines()
            .filter_map(|l| l.strip_prefix(launch::STRIPPED_LOG_PREFIX))
        {
            tracing::warn!(path, "stripped a setuid/setgid bit made during the session");
        }
        state::cleanup_session(&self.state_dir);
    }
}

/// A resumed session's previous launcher may still be tearing down (its orchestrator was
/// killed a moment ago: the launcher saw its lifeline close and is cleaning up). Waits for
/// it, at most [`STOP_TIMEOUT`], then cleans what a dead one left, so the new start does
/// not find the old state dir in its way.
fn settle_previous_launcher(state_dir: &Path) {
    let deadline = Instant::now() + STOP_TIMEOUT;
    // A state dir without a launcher record: its launcher is between making the dir and
    // recording itself, or between dropping its record and the rest of its teardown (a
    // resume right after a `kill -9` of the previous `cordon` meets that). Give it a
    // moment to finish either way before the dir counts as left behind.
    let unrecorded_until = Instant::now() + UNRECORDED_GRACE;
    loop {
        match state::launcher_alive(state_dir) {
            Some(true) if Instant::now() < deadline => {}
            None if state_dir.exists() && Instant::now() < unrecorded_until => {}
            _ => break,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Left behind (its launcher gone, or never recorded): the teardown it missed runs here
    // (git vetting and placeholders, from the recorded launch config), then the dir goes.
    if state::launcher_alive(state_dir) != Some(true) && state_dir.exists() {
        state::cleanup_session(state_dir);
    }
}

/// How long a state dir without a launcher record may be in passing.
const UNRECORDED_GRACE: Duration = Duration::from_secs(2);

/// Direct children of `pid` with their start times.
fn children_of(pid: u32) -> Vec<(i32, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .filter_map(|p| state::start_time(p).map(|s| (p, s)))
        .collect()
}

#[tonic::async_trait]
impl SandboxHandle for LocalHandle {
    async fn destroy(self: Box<Self>) -> Result<(), SandboxError> {
        // Closing the lifeline asks the launcher to kill the namespace and clean up.
        if let Ok(mut guard) = self.lifeline.lock() {
            guard.take();
        }
        self.launcher_exit(STOP_TIMEOUT).await;
        let handle = *self;
        tokio::task::spawn_blocking(move || handle.kill_now(Duration::ZERO))
            .await
            .map_err(|e| SandboxError::Setup {
                step: "tearing down",
                source: std::io::Error::other(e.to_string()),
            })
    }

    fn is_alive(&self) -> bool {
        self.child.lock().is_ok_and(|g| g.is_some()) && self.exited().is_none()
    }

    async fn freeze(&self) -> Result<(), SandboxError> {
        self.on_init("freezing the sandbox", super::freeze::freeze)
            .await
    }

    async fn thaw(&self) -> Result<(), SandboxError> {
        self.on_init("thawing the sandbox", super::freeze::thaw)
            .await
    }
}

impl Drop for LocalHandle {
    fn drop(&mut self) {
        // Last resort when destroy was never called: nothing may outlive the handle.
        let running = self.child.lock().is_ok_and(|g| g.is_some());
        if running {
            self.kill_now(Duration::from_secs(2));
        }
    }
}

/// What the local backend can do on this host (for `cordon doctor`).
#[derive(Debug, Clone)]
pub struct LocalSupport {
    pub user_namespaces: Result<(), String>,
    /// `None` when not running as root (idmapped mounts are then not needed).
    pub idmapped_mounts: Option<Result<(), String>>,
    pub agent_binary: Result<PathBuf, String>,
}

impl LocalSupport {
    /// Whether the local backend can confine here.
    pub fn can_confine(&self) -> bool {
        self.user_namespaces.is_ok()
            && self.idmapped_mounts.as_ref().is_none_or(|r| r.is_ok())
            && self.agent_binary.is_ok()
    }
}

/// Probes the host by creating a user namespace (and, as root, an idmapped mount of
/// `idmap_probe_dir`). Cheap; safe to call from any thread.
pub fn probe(idmap_probe_dir: &Path) -> LocalSupport {
    let (uid, gid) = if nix::unistd::geteuid().is_root() {
        (launch::DEFAULT_UID_BASE, launch::DEFAULT_UID_BASE)
    } else {
        (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    };
    let user_namespaces =
        launch::userns::new_userns_fd(&format!("0 {uid} 1\n"), &format!("0 {gid} 1\n"))
            .map(drop)
            .map_err(|e| e.to_string());
    let idmapped_mounts = nix::unistd::geteuid()
        .is_root()
        .then(|| launch::mounts::probe_idmap(idmap_probe_dir).map_err(|e| e.to_string()));
    LocalSupport {
        user_namespaces,
        idmapped_mounts,
        agent_binary: paths::find_agent_binary().map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests;
