//! The warm pool: pre-started, confined, idle containers per image, claimed by a new session
//! in one step and refilled in the background. A claimed container belongs to one session
//! and is destroyed with it; nothing is reused across sessions.
//!
//! The problem: the workspace is bind-mounted at create time, but an idle container does
//! not know its session's workspace yet, and it must appear at the SAME absolute path.
//! Mount propagation (an rslave bind of a slot directory, later bind-mounted onto from the
//! host) can only deliver it beneath the slot's fixed path, never at an arbitrary path.
//! Chosen instead: the host injects the mount into the container's mount namespace.
//! 1. An idle container runs the agent, blocked on a start FIFO before it has read any
//!    configuration, under the container's full confinement (same uid, caps, seccomp,
//!    limits as a cold session); its binary is already loaded when the claim comes.
//! 2. On claim, the host (root) clones the workspace as a detached mount (`open_tree`),
//!    idmapped so that the workspace owner's files are the slot uid's inside and what the
//!    sandbox writes lands as the owner's (an ACL grant instead where the kernel or
//!    filesystem cannot idmap, see [`super::access`]), and `nosuid,nodev`; creates the
//!    mount point in the container's writable layer (`GraphDriver.Data.MergedDir`; the
//!    container itself sees its root read-only), and in a forked child joins the
//!    container's mount namespace (`setns`) and attaches it there (`move_mount`) at the
//!    workspace's own path, then the protected and denied binds over it. No process of the
//!    container gains anything: the mounts are made from outside.
//!
//! A cold start as root takes the same path at once (a container of its own, started
//! waiting, then claimed): Docker's binds can neither idmap nor set nosuid.
//! 3. The host writes the agent config into the run directory and writes to the FIFO; the
//!    agent reads the config, confines itself and listens.
//!
//! Needs root on the host (CAP_SYS_ADMIN for setns into the container); without it a claim
//! fails and the backend starts the session cold.

use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use sandbox_agent::cgroup::EXEC_CGROUP_IN_SANDBOX;
use sandbox_agent::launch::mounts;

use super::access::{Access, UidAllocator};
use super::container::{self, Mode, Session};
use super::exec_cgroup::{self, ExecCgroup};
use super::masks::Bind;
use super::{CONTAINER_RUN_DIR, DockerConfig, docker_err};
use crate::sandbox::{Sandbox, SandboxError, SandboxSpec};

const START_FIFO: &str = "start";
/// How often a full pool looks for idle containers that died.
const HEALTH_CHECK_EVERY: Duration = Duration::from_secs(2);
const CONFIG_FILE: &str = "config.json";

/// The command an idle pool container runs: the agent, started ahead of its session and
/// blocked on the start FIFO; on the signal it reads its configuration and serves.
pub fn waiter_command() -> Vec<String> {
    vec![
        "/sandbox-agent".into(),
        "--start-fifo".into(),
        format!("{CONTAINER_RUN_DIR}/{START_FIFO}"),
        "--config-file".into(),
        format!("{CONTAINER_RUN_DIR}/{CONFIG_FILE}"),
    ]
}

/// One idle container, with what a claim needs of it found out ahead of time, so the
/// claim itself asks the engine nothing.
pub(super) struct Slot {
    session: Session,
    container_id: String,
    /// A pidfd of the container's init: a claim joins its mount namespace through it (a
    /// pidfd cannot be recycled into another process, as a bare pid can), and its
    /// readability says the container has died while idle.
    init: OwnedFd,
    /// The init's pid on the host (read once, with the pidfd made from it): where the
    /// claim finds the container's cgroups and the waiting agent.
    init_pid: i32,
    /// The container's writable layer on the host (`GraphDriver.Data.MergedDir`), where
    /// the workspace's mount point is made.
    merged: Option<PathBuf>,
}

impl Slot {
    /// Whether the container's init still runs (its pidfd is not yet readable).
    fn alive(&self) -> bool {
        let mut fds = [nix::poll::PollFd::new(
            self.init.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        matches!(
            nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO),
            Ok(0)
        )
    }
}

struct Inner {
    docker: Docker,
    config: DockerConfig,
    image: String,
    uids: Arc<UidAllocator>,
    idle: Mutex<VecDeque<Slot>>,
    wake: tokio::sync::Notify,
    /// Set by shutdown/drop: the refill task removes what it holds and ends. The task is
    /// never aborted, so a container it is creating cannot leak half-made.
    closed: AtomicBool,
}

/// Idle containers of one image.
pub struct WarmPool {
    inner: Arc<Inner>,
    refill: tokio::task::JoinHandle<()>,
}

impl WarmPool {
    /// Starts filling the pool in the background.
    pub fn start(
        docker: Docker,
        config: DockerConfig,
        image: String,
        uids: Arc<UidAllocator>,
    ) -> Self {
        let inner = Arc::new(Inner {
            docker,
            config,
            image,
            uids,
            idle: Mutex::new(VecDeque::new()),
            wake: tokio::sync::Notify::new(),
            closed: AtomicBool::new(false),
        });
        let refill = tokio::spawn(refill_loop(inner.clone()));
        Self { inner, refill }
    }

    pub fn image(&self) -> &str {
        &self.inner.image
    }

    /// How many idle containers are ready now (alive).
    pub fn ready(&self) -> usize {
        self.idle().iter().filter(|s| s.alive()).count()
    }

    /// Waits until `n` containers are idle (or `timeout` passes); returns how many are.
    pub async fn wait_ready(&self, n: usize, timeout: Duration) -> usize {
        let start = std::time::Instant::now();
        while self.ready() < n && start.elapsed() < timeout {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.ready()
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, VecDeque<Slot>> {
        self.inner.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes an idle container for `spec`, or `None` when none is ready.
    pub async fn claim(&self, spec: &SandboxSpec) -> Result<Option<Sandbox>, SandboxError> {
        let inner = &self.inner;
        // Idle containers that died (a Docker daemon restart stops them all) are dropped
        // here rather than handed out; the refill replaces them.
        let slot = loop {
            let Some(slot) = self.idle().pop_front() else {
                inner.wake.notify_one();
                return Ok(None);
            };
            if slot.alive() {
                break slot;
            }
            remove_slot(inner, slot).await;
        };
        inner.wake.notify_one();
        let mut sandbox = claim_slot(&inner.docker, &inner.config, slot, spec).await?;
        sandbox.warm = true;
        Ok(Some(sandbox))
    }

    /// Removes every idle container and stops refilling; returns once the refill task ended.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
        let start = std::time::Instant::now();
        while !self.refill.is_finished() && start.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for WarmPool {
    /// The refill task cleans up in the background (if the runtime lives on; otherwise
    /// `adopt::reconcile` removes the containers, whose run directories are gone).
    fn drop(&mut self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
    }
}

async fn remove_slot(inner: &Inner, slot: Slot) {
    let _ = container::remove(&inner.docker, &slot.container_id).await;
    slot.session.cleanup();
}

async fn drain(inner: &Inner) {
    let slots: Vec<Slot> = inner
        .idle
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain(..)
        .collect();
    for slot in slots {
        remove_slot(inner, slot).await;
    }
}

async fn refill_loop(inner: Arc<Inner>) {
    let mut n: u64 = 0;
    loop {
        if inner.closed.load(Ordering::SeqCst) {
            drain(&inner).await;
            return;
        }
        // Idle containers die too (a Docker daemon restart stops them all): drop those, so
        // the pool refills rather than holding corpses.
        let dead: Vec<Slot> = {
            let mut idle = inner.idle.lock().unwrap_or_else(|p| p.into_inner());
            let (live, dead): (Vec<Slot>, Vec<Slot>) = idle.drain(..).partition(Slot::alive);
            idle.extend(live);
            dead
        };
        for slot in dead {
            remove_slot(&inner, slot).await;
        }
        let have = inner.idle.lock().map_or(0, |i| i.len());
        if have >= inner.config.pool_size {
            tokio::select! {
                () = inner.wake.notified() => {}
                () = tokio::time::sleep(HEALTH_CHECK_EVERY) => {}
            }
            continue;
        }
        n += 1;
        let name = format!(
            "pool-{}-{}-{n}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        let made = new_slot(
            &inner.docker,
            &inner.config,
            &inner.image,
            &inner.uids,
            &name,
            // Any session may claim the slot, with network or without.
            (Mode::Pool, true),
            None,
        )
        .await;
        match made {
            Ok(slot) if inner.closed.load(Ordering::SeqCst) => remove_slot(&inner, slot).await,
            Ok(slot) => inner
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_back(slot),
            Err(e) => {
                tracing::warn!("warm pool for {}: {e}", inner.image);
                // Back off: a missing image or a full engine does not fix itself at once.
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    () = inner.wake.notified() => {}
                }
            }
        }
    }
}

/// Starts a container waiting for its workspace (`mode`: a pool slot, or a session's own
/// container to be injected at once, labelled with its `tenant`); `inet`: see
/// [`container::create_and_start`].
pub(super) async fn new_slot(
    docker: &Docker,
    config: &DockerConfig,
    image: &str,
    uids: &UidAllocator,
    name: &str,
    (mode, inet): (Mode, bool),
    tenant: Option<&str>,
) -> Result<Slot, SandboxError> {
    let mut session = Session::slot(config, uids, name)?;
    session.tenant = tenant.map(String::from);
    let fifo = session.sock_dir().join(START_FIFO);
    let made = nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .and_then(|()| {
            let id = Some(nix::unistd::Uid::from_raw(session.uid));
            let gid = Some(nix::unistd::Gid::from_raw(session.uid));
            match nix::unistd::chown(&fifo, id, gid) {
                // Not root (the server's own container, deploy/compose.yaml): as for the
                // socket directory, the 0700 run dir keeps other host users out.
                Err(nix::errno::Errno::EPERM) => std::fs::set_permissions(
                    &fifo,
                    std::os::unix::fs::PermissionsExt::from_mode(0o666),
                )
                .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0))),
                other => other,
            }
        });
    if let Err(e) = made {
        session.release();
        return Err(SandboxError::Setup {
            step: "make start fifo",
            source: e.into(),
        });
    }
    let container_id =
        match container::create_and_start(docker, config, image, &session, mode, inet).await {
            Ok(id) => id,
            Err(e) => {
                session.release();
                return Err(e);
            }
        };
    match init_of(docker, &container_id).await {
        Ok((init, init_pid, merged)) => {
            let mut slot = Slot {
                session,
                container_id,
                init,
                init_pid,
                merged,
            };
            // What depends on the container and its image but not on the session that
            // will claim it is done here, off the claim's path (for a pool slot, before
            // any session waits): the image's command environment (an engine round trip)
            // and the per-command cgroup parent (moving the waiting agent into it costs
            // the kernel an RCU grace period, 10 to 25 ms measured on a loaded host).
            // Neither gives the slot uid anything before a claim: nothing runs as it yet.
            slot.session.command_env = super::user_image::command_env(docker, image).await;
            if config.exec_cgroups {
                slot.session.exec_cgroup = exec_cgroup_for(&slot).await;
            }
            Ok(slot)
        }
        Err(e) => {
            let _ = container::remove(docker, &container_id).await;
            session.release();
            Err(e)
        }
    }
}

/// A pidfd of the running container's init, its pid, and its writable layer's host path.
async fn init_of(
    docker: &Docker,
    id: &str,
) -> Result<(OwnedFd, i32, Option<PathBuf>), SandboxError> {
    let info = docker
        .inspect_container(id, None)
        .await
        .map_err(docker_err("inspect pool container"))?;
    let state = info.state.unwrap_or_default();
    let pid = state.pid.unwrap_or(0);
    if !state.running.unwrap_or(false) || pid <= 0 {
        return Err(SandboxError::Docker("pool container is not running".into()));
    }
    let pid = i32::try_from(pid)
        .map_err(|_| SandboxError::Docker(format!("pool container pid {pid} out of range")))?;
    let init =
        sandbox_agent::confine::sys::pidfd_open(pid).map_err(|source| SandboxError::Setup {
            step: "pidfd of the pool container's init",
            source,
        })?;
    let merged = info
        .graph_driver
        .and_then(|g| g.data.get("MergedDir").cloned())
        .map(PathBuf::from);
    Ok((init, pid, merged))
}

/// Gives `slot`'s container to `spec`'s session: injects the workspace, starts the agent
/// and waits for it. On failure the container is removed and the workspace left as it was.
pub(super) async fn claim_slot(
    docker: &Docker,
    config: &DockerConfig,
    mut slot: Slot,
    spec: &SandboxSpec,
) -> Result<Sandbox, SandboxError> {
    if let Err(e) = prepare_claim(&mut slot, spec, config).await {
        let _ = container::remove(docker, &slot.container_id).await;
        slot.session.cleanup();
        return Err(e);
    }
    super::finish(docker, config, slot.session, slot.container_id, spec).await
}

/// The workspace as a detached mount for the container, idmapped so that its owner's
/// files are the sandbox uid's inside and the sandbox's writes land as the owner, and the
/// idmap's user namespace (for the binds in the workspace). `None` (the reason logged) when
/// this host cannot: the caller falls back to an ACL grant.
fn idmapped_workspace(workspace: &Path, uid: u32) -> Option<(OwnedFd, OwnedFd)> {
    let attempt = || -> Result<(OwnedFd, OwnedFd), String> {
        let meta = std::fs::metadata(workspace).map_err(|e| e.to_string())?;
        let ns = sandbox_agent::launch::userns::new_userns_fd(
            &format!("{} {uid} 1\n", meta.uid()),
            &format!("{} {uid} 1\n", meta.gid()),
        )
        .map_err(|e| e.to_string())?;
        let tree =
            mounts::detached_clone(workspace, false, Some(&ns)).map_err(|e| e.to_string())?;
        Ok((tree, ns))
    };
    match attempt() {
        Ok(made) => Some(made),
        Err(why) => {
            tracing::warn!(
                workspace = %workspace.display(),
                "cannot idmap the workspace ({why}); granting access by ACL instead"
            );
            None
        }
    }
}

/// Mounts the workspace into the slot's container, writes the agent config, starts it.
async fn prepare_claim(
    slot: &mut Slot,
    spec: &SandboxSpec,
    config: &DockerConfig,
) -> Result<(), SandboxError> {
    // The run root (the parent of every slot's run dir) is the backend's state.
    let run_root = slot
        .session
        .run_dir
        .parent()
        .unwrap_or(&slot.session.run_dir)
        .to_path_buf();
    let workspace = crate::sandbox::checked_workspace(&spec.workspace, &run_root)?;
    slot.session.session_id = spec.session_id.clone();
    slot.session.tenant = spec.tenant.clone();
    let started = std::time::Instant::now();
    let idmapped = if config.idmap {
        let ws = workspace.clone();
        let uid = slot.session.uid;
        tokio::task::spawn_blocking(move || idmapped_workspace(&ws, uid))
            .await
            .map_err(|e| SandboxError::Docker(format!("idmap the workspace: {e}")))?
    } else {
        None
    };
    let access = if idmapped.is_some() {
        Access::Idmap
    } else {
        Access::Acl
    };
    tracing::debug!(elapsed = ?started.elapsed(), "claim: workspace idmapped");
    slot.session.attach(&workspace, spec, access)?;
    tracing::debug!(elapsed = ?started.elapsed(), "claim: workspace checked, masks planned");
    let additional = additional_trees(slot, spec, &workspace, &run_root, access).await?;
    tracing::debug!(elapsed = ?started.elapsed(), ?access, "claim: workspace reachable, masks prepared");
    let roots: Vec<PathBuf> = std::iter::once(workspace.clone())
        .chain(slot.session.additional.iter().map(|t| t.path.clone()))
        .collect();
    if let Some(merged) = &slot.merged {
        // The mount points, in the container's own writable layer (read-only from inside).
        for root in &roots {
            let _ = mount_point_in_layer(merged, root);
        }
    }
    let init = slot
        .init
        .try_clone()
        .map_err(|source| SandboxError::Setup {
            step: "dup the pool container's pidfd",
            source,
        })?;
    let ws = workspace.clone();
    let mut binds = slot.session.masks.binds.clone();
    let ca = slot.session.egress.as_ref().and_then(|e| e.ca.as_ref());
    if let (Some(ca), Some(merged)) = (ca, &slot.merged) {
        // Outside the workspace, never idmapped: the session CA in the image's own store.
        slot.session.ca_store = super::ca_store::from_layer(merged, &slot.session.sock_dir(), ca);
        binds.extend(slot.session.ca_store.clone());
    }
    if let Some(exec) = &slot.session.exec_cgroup {
        // After the workspace's own binds; outside the workspace, never idmapped.
        binds.push(Bind {
            source: exec.dir.clone(),
            target: PathBuf::from(EXEC_CGROUP_IN_SANDBOX),
            read_only: false,
        });
    }
    tokio::task::spawn_blocking(move || {
        let mut trees = clones(&ws, idmapped, &binds)?;
        for (dir, idmap, binds) in additional {
            trees.extend(clones(&dir, Some(idmap), &binds)?);
        }
        inject_mounts(&init, &roots, trees)
    })
    .await
    .map_err(|e| SandboxError::Docker(format!("inject workspace mount: {e}")))??;
    tracing::debug!(elapsed = ?started.elapsed(), "claim: workspace mounted");
    let config = slot.session.agent_config(&workspace);
    let json = serde_json::to_vec(&config)
        .map_err(|e| SandboxError::Docker(format!("encode agent config: {e}")))?;
    let setup = |step| move |source| SandboxError::Setup { step, source };
    let path = slot.session.sock_dir().join(CONFIG_FILE);
    std::fs::write(&path, json).map_err(setup("write agent config"))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
        .map_err(setup("chmod agent config"))?;
    signal_start(&slot.session.sock_dir().join(START_FIFO)).await?;
    tracing::debug!(elapsed = ?started.elapsed(), "claim: agent signalled");
    Ok(())
}

/// The session's additional directories (checked), their masks planned and each cloned
/// idmapped (its owner's files the slot uid's inside, what the sandbox writes landing as
/// the owner's): with the binds over each, for [`clones`]. Injection only: where the
/// workspace itself needs the ACL fallback, or a directory cannot be idmapped, the
/// session is refused rather than granted by ACL.
async fn additional_trees(
    slot: &mut Slot,
    spec: &SandboxSpec,
    workspace: &Path,
    run_root: &Path,
    access: Access,
) -> Result<Vec<(PathBuf, (OwnedFd, OwnedFd), Vec<Bind>)>, SandboxError> {
    let dirs = crate::sandbox::checked_additional(spec, workspace, run_root)?;
    if dirs.is_empty() {
        return Ok(Vec::new());
    }
    let refuse = |dir: &Path| crate::sandbox::additional::AdditionalDirError {
        path: dir.to_path_buf(),
        why: "the docker backend mounts additional directories only as idmapped mounts, \
              which this host cannot make here"
            .into(),
    };
    if access != Access::Idmap {
        return Err(refuse(&dirs[0]).into());
    }
    slot.session.attach_additional(&dirs)?;
    let uid = slot.session.uid;
    let (wanted, ws) = (dirs.clone(), workspace.to_path_buf());
    let idmaps = tokio::task::spawn_blocking(move || {
        wanted
            .iter()
            .map(|d| idmapped_additional(d, &ws, uid))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| SandboxError::Docker(format!("idmap an additional directory: {e}")))?;
    let mut out = Vec::with_capacity(dirs.len());
    for ((dir, idmap), tree) in dirs.iter().zip(idmaps).zip(&slot.session.additional) {
        let idmap = idmap?.ok_or_else(|| refuse(dir))?;
        out.push((dir.clone(), idmap, tree.masks.binds.clone()));
    }
    Ok(out)
}

/// The idmapped clone of the additional directory `dir` (with its user namespace), made
/// from the fd it is opened and checked through once more
/// ([`crate::sandbox::additional::open_for_mount`]), never from its path: a component
/// swapped for a link since the check redirects nothing. A refusal is an error; `None`
/// when the host cannot idmap it (the reason logged).
fn idmapped_additional(
    dir: &Path,
    workspace: &Path,
    uid: u32,
) -> Result<Option<(OwnedFd, OwnedFd)>, SandboxError> {
    let (fd, (owner_uid, owner_gid)) = crate::sandbox::additional::open_for_mount(dir, workspace)?;
    let attempt = || -> Result<(OwnedFd, OwnedFd), String> {
        let ns = sandbox_agent::launch::userns::new_userns_fd(
            &format!("{owner_uid} {uid} 1\n"),
            &format!("{owner_gid} {uid} 1\n"),
        )
        .map_err(|e| e.to_string())?;
        let tree =
            mounts::detached_clone_fd(fd.as_fd(), false, Some(&ns)).map_err(|e| e.to_string())?;
        Ok((tree, ns))
    };
    match attempt() {
        Ok(made) => Ok(Some(made)),
        Err(why) => {
            tracing::warn!(dir = %dir.display(), "cannot idmap the additional directory ({why})");
            Ok(None)
        }
    }
}

/// The per-command cgroup parent for the slot's container, delegated to its uid with the
/// waiting agent moved in, and its mount point made in the container's writable layer;
/// `None` (the reason logged) where the host cannot: the agent then sweeps its pid
/// namespace between commands instead (see [`super::exec_cgroup`]).
async fn exec_cgroup_for(slot: &Slot) -> Option<ExecCgroup> {
    let merged = slot.merged.clone()?;
    let (pid, id, uid) = (slot.init_pid, slot.container_id.clone(), slot.session.uid);
    let made = tokio::task::spawn_blocking(move || {
        let point = Path::new(EXEC_CGROUP_IN_SANDBOX);
        mount_point_in_layer(&merged, point).map_err(|source| {
            exec_cgroup::ExecCgroupError::Io {
                step: "making the mount point",
                path: merged.join(point.strip_prefix("/").unwrap_or(point)),
                source,
            }
        })?;
        exec_cgroup::prepare(pid, &id, uid)
    })
    .await;
    match made {
        Ok(Ok(exec)) => Some(exec),
        Ok(Err(e)) => {
            tracing::warn!("no per-command cgroups in the container: {e}");
            None
        }
        Err(e) => {
            tracing::warn!("no per-command cgroups in the container: {e}");
            None
        }
    }
}

/// Makes the directory `path` (absolute, as the container sees it) and its missing
/// parents in the container's writable layer `merged`, resolving every component as the
/// container would: a link in the image is followed within the layer
/// (`RESOLVE_IN_ROOT`), never into the host's tree. (An image's `/home -> /root` made a
/// plain `create_dir_all` on the host create `/root/...` of the host's own.)
fn mount_point_in_layer(merged: &Path, path: &Path) -> std::io::Result<()> {
    use std::path::Component;
    let layer = std::fs::File::open(merged)?;
    let in_root = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;
    let dir_flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let mut prefix = PathBuf::from("/");
    for component in path.components() {
        let Component::Normal(name) = component else {
            continue;
        };
        let up = sandbox_agent::fsops::openat2(layer.as_fd(), &prefix, dir_flags, 0, in_root)?;
        match nix::sys::stat::mkdirat(&up, name, nix::sys::stat::Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        prefix.push(name);
    }
    // What was made, or was there, is a directory within the layer.
    sandbox_agent::fsops::openat2(layer.as_fd(), path, dir_flags, 0, in_root).map(drop)
}

/// Wakes the waiter: one line into the FIFO it is blocked reading.
async fn signal_start(fifo: &Path) -> Result<(), SandboxError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    for _ in 0..100 {
        // Non-blocking: ENXIO means no reader yet (the waiter is still starting).
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(mut f) => {
                return f.write_all(b"go\n").map_err(|source| SandboxError::Setup {
                    step: "signal pool container",
                    source,
                });
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(source) => {
                return Err(SandboxError::Setup {
                    step: "open start fifo",
                    source,
                });
            }
        }
    }
    Err(SandboxError::Docker(
        "pool container never waited for its start signal".into(),
    ))
}

/// The detached trees to attach, workspace first, then the binds over it (parents
/// first), each with its target path: all `nosuid,nodev`; the workspace and the binds of
/// its own paths idmapped when `idmapped` holds the idmap (else plain, for the ACL
/// fallback); the masks (sources in the run directory) plain.
fn clones(
    workspace: &Path,
    idmapped: Option<(OwnedFd, OwnedFd)>,
    binds: &[Bind],
) -> Result<Vec<(OwnedFd, CString)>, SandboxError> {
    let err = |source| SandboxError::Setup {
        step: "clone a mount for the container",
        source,
    };
    let target = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| SandboxError::Docker(format!("mount target path: {e}")))
    };
    let (ws_tree, userns) = match idmapped {
        Some((tree, ns)) => (tree, Some(ns)),
        None => (
            mounts::detached_clone(workspace, false, None).map_err(err)?,
            None,
        ),
    };
    let mut trees = Vec::with_capacity(binds.len() + 1);
    mounts::seal_detached(&ws_tree).map_err(err)?;
    trees.push((ws_tree, target(workspace)?));
    for b in binds {
        let ns = userns.as_ref().filter(|_| b.source.starts_with(workspace));
        let tree = mounts::detached_clone(&b.source, b.read_only, ns).map_err(err)?;
        mounts::seal_detached(&tree).map_err(err)?;
        trees.push((tree, target(&b.target)?));
    }
    Ok(trees)
}

/// Attaches recursive clones of the workspace and the additional directories (`roots`) at
/// their own paths inside the mount namespace of the process `init` refers to (the
/// container's init), each followed by the protected and denied binds over it (parents
/// first). Blocking: forks a child that joins the namespace.
fn inject_mounts(
    init: &OwnedFd,
    roots: &[PathBuf],
    trees: Vec<(OwnedFd, CString)>,
) -> Result<(), SandboxError> {
    let err = |step| move |source| SandboxError::Setup { step, source };
    // Every prefix of each root's path (the workspace, the additional directories), to
    // create mount points that live on a writable mount inside the container (e.g. under
    // its /tmp tmpfs). Everything the child uses is prepared before the fork (no
    // allocation in the child).
    let prefixes: Vec<CString> = roots
        .iter()
        .flat_map(|root| {
            root.ancestors()
                .filter(|p| p.as_os_str().len() > 1)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
        })
        .filter_map(|p| CString::new(p.as_os_str().as_bytes()).ok())
        .collect();
    // SAFETY: the child only makes raw syscalls (setns, mkdir, move_mount) on memory
    // prepared before the fork and then calls _exit: async-signal-safe, no allocation, no
    // locks, as required after fork in a multi-threaded process.
    match unsafe { nix::unistd::fork() }.map_err(|e| err("fork")(e.into()))? {
        nix::unistd::ForkResult::Child => {
            // SAFETY: see the fork above; all pointers come from live CStrings / fds.
            unsafe {
                // setns with a pidfd (Linux 5.8+) joins that process's namespaces.
                if libc::setns(init.as_raw_fd(), libc::CLONE_NEWNS) != 0 {
                    libc::_exit(201);
                }
                for p in &prefixes {
                    libc::mkdir(p.as_ptr(), 0o755);
                }
                for (tree, path) in &trees {
                    let r = libc::syscall(
                        libc::SYS_move_mount,
                        tree.as_raw_fd(),
                        c"".as_ptr(),
                        libc::AT_FDCWD,
                        path.as_ptr(),
                        mounts::MOVE_MOUNT_F_EMPTY_PATH,
                    );
                    if r != 0 {
                        libc::_exit(202);
                    }
                }
                libc::_exit(0);
            }
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(trees);
            match nix::sys::wait::waitpid(child, None) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => Ok(()),
                Ok(nix::sys::wait::WaitStatus::Exited(_, 201)) => Err(SandboxError::Docker(
                    "inject workspace mount: setns into the container failed (not root?)".into(),
                )),
                other => Err(SandboxError::Docker(format!(
                    "inject workspace mount: move_mount failed ({other:?})"
                ))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_follow_the_images_links_within_its_layer_only() {
        let layer = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        // A plain path is made.
        mount_point_in_layer(layer.path(), Path::new("/work/u/proj")).unwrap();
        assert!(layer.path().join("work/u/proj").is_dir());
        // A link within the layer is followed as the container would follow it.
        std::fs::create_dir_all(layer.path().join("usr/home")).unwrap();
        std::os::unix::fs::symlink("usr/home", layer.path().join("home")).unwrap();
        mount_point_in_layer(layer.path(), Path::new("/home/u/proj")).unwrap();
        assert!(layer.path().join("usr/home/u/proj").is_dir());
        // An absolute link names the layer's own path, never the host's: nothing is made
        // in the host's directory of that name.
        std::os::unix::fs::symlink(host.path(), layer.path().join("srv")).unwrap();
        assert!(mount_point_in_layer(layer.path(), Path::new("/srv/u/proj")).is_err());
        assert_eq!(std::fs::read_dir(host.path()).unwrap().count(), 0);
    }
}
