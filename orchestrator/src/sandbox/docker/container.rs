//! One session's container: host-side state ([`Session`]), the confinement options
//! ([`session_host_config`]), create/start, exit watching and removal.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures::StreamExt;
use sandbox_agent::cgroup::{EXEC_CGROUP_IN_SANDBOX, ExecCgroupConfig};
use sandbox_agent::config::{AgentConfig, Rlimits};
use sandbox_agent::egress::EgressConfig;

use super::access::{self, Access, UidAllocator, UidLease};
use super::exec_cgroup::{self, ExecCgroup};
use super::masks::{self, Bind, Masks};
use super::{CONTAINER_RUN_DIR, DockerConfig, SOCKET_NAME, docker_err, labels, seccomp_profile};
use crate::sandbox::{SandboxError, SandboxSpec};

/// How a container is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The workspace is bind-mounted at create time and the agent starts at once.
    Cold,
    /// A warm-pool container: no workspace yet; a waiter blocks on a FIFO in the run
    /// directory until [`super::pool`] has mounted the workspace and written the config.
    Pool,
    /// A session's own container started the pool's way (waiting for its workspace),
    /// so that the workspace can be injected as an idmapped mount.
    Injected,
}

/// Host-side state of one sandbox: its uid, its run directory and its workspace grant.
/// Layout of `run_dir` (host-only, 0700): `session.json` (what [`super::adopt`] needs after a
/// crash) and `sock/` (owned by the sandbox uid, the only host directory the container sees,
/// at [`CONTAINER_RUN_DIR`]).
#[derive(Debug)]
pub struct Session {
    pub session_id: String,
    pub tenant: Option<String>,
    /// Canonical workspace path (same inside and outside); `None` for an idle pool slot.
    pub workspace: Option<PathBuf>,
    pub uid: u32,
    pub run_dir: PathBuf,
    /// How the uid reaches the workspace, once attached.
    access: Option<Access>,
    /// Protected, denied-write and denied-read paths mounted over the workspace.
    pub masks: Masks,
    /// The additional directories, each with its own masks (injected only).
    pub additional: Vec<AdditionalTree>,
    /// How many bytes the session may add to its workspace (`sandbox.limits.disk`),
    /// enforced by the agent inside (see `sandbox_agent::exec::disk`).
    pub disk_budget_bytes: Option<u64>,
    /// The per-command cgroup parent delegated to the agent, when the claim made one
    /// (see [`super::exec_cgroup`]); `None`: the agent's namespace sweep instead.
    pub exec_cgroup: Option<ExecCgroup>,
    /// Variables commands start with: a user image's `ENV` (see [`super::user_image`]).
    pub command_env: Vec<(String, String)>,
    /// The session's way out (its proxy's socket at [`CONTAINER_RUN_DIR`]), set when the
    /// workspace is attached; `None`: no network.
    pub egress: Option<EgressConfig>,
    /// The session CA's bundle over the image's system bundle, when the session brokers
    /// credentials and the image has one (see [`super::ca_store`]); a cold start binds it
    /// at create time.
    pub ca_store: Option<Bind>,
    /// Holds the uid for this session's life (across processes, see [`access`]).
    _lease: UidLease,
}

/// An additional directory of a session (`permissions.additionalDirectories`): injected
/// idmapped at its own path, `nosuid,nodev`, protected as the workspace is.
#[derive(Debug)]
pub struct AdditionalTree {
    /// Canonical, checked (see [`crate::sandbox::checked_additional`]).
    pub path: PathBuf,
    /// Its own records (placeholders, git guard): `extra-<i>/` in the run directory.
    pub run_dir: PathBuf,
    /// The protected paths and hard-linked names bound over it.
    pub masks: Masks,
}

/// What `session.json` holds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct SessionRecord {
    pub session_id: String,
    pub uid: u32,
    pub workspace: Option<PathBuf>,
    /// Masked (denied-read) paths in the workspace: part of the session's footprint.
    #[serde(default)]
    pub masked: Vec<PathBuf>,
    /// Whether an ACL grant (backed up in [`ACL_BACKUP`]) is in effect; `None` in records
    /// of an older Cordon, whose grants had no backup.
    #[serde(default)]
    pub acl: Option<bool>,
    /// The additional directories, in order (their records in `extra-<i>/`).
    #[serde(default)]
    pub additional: Vec<PathBuf>,
}

/// The saved ACLs of the workspace in the run directory (see [`super::acl`]).
pub const ACL_BACKUP: &str = "acl-backup.json";

impl Session {
    /// Allocates a uid, makes the run directory and grants the uid the workspace.
    pub fn prepare(
        config: &DockerConfig,
        uids: &UidAllocator,
        spec: &SandboxSpec,
    ) -> Result<Self, SandboxError> {
        let workspace = crate::sandbox::checked_workspace(&spec.workspace, &config.run_root)?;
        // Bound at create time, a directory could be neither idmapped nor nosuid.
        let additional = crate::sandbox::checked_additional(spec, &workspace, &config.run_root)?;
        if let Some(dir) = additional.first() {
            return Err(crate::sandbox::additional::AdditionalDirError {
                path: dir.clone(),
                why: "the docker backend mounts additional directories only when Cordon runs \
                      as root (as idmapped mounts)"
                    .into(),
            }
            .into());
        }
        let mut session = Self::slot(config, uids, &spec.session_id)?;
        session.tenant = spec.tenant.clone();
        if let Err(e) = session.attach(&workspace, spec, Access::Acl) {
            session.cleanup();
            return Err(e);
        }
        Ok(session)
    }

    /// Makes the workspace reachable for the uid (`access`) and plans the mounts over it
    /// (placeholders made on the host). On error the caller cleans up (revoke,
    /// placeholders, run dir).
    pub fn attach(
        &mut self,
        workspace: &Path,
        spec: &SandboxSpec,
        access: Access,
    ) -> Result<(), SandboxError> {
        if let Some(own) = collides_with_container_mount(workspace) {
            return Err(SandboxError::Setup {
                step: "checking the workspace's mount point",
                source: std::io::Error::other(format!(
                    "the workspace {} would be mounted over the container's own {own}; \
                     choose a project directory",
                    workspace.display()
                )),
            });
        }
        self.attach_workspace(workspace, access)?;
        self.masks = masks::prepare(workspace, spec, &self.run_dir)?;
        self.disk_budget_bytes = spec.limits.and_then(|l| l.disk_bytes);
        // The CA bundle is in the run dir (the container's root is read-only): made by the
        // host, which binds it over the image's store too (`ca_store`), else by the agent.
        let run = Path::new(CONTAINER_RUN_DIR);
        self.egress = spec.egress_config(run, &run.join(sandbox_agent::egress::ca::BUNDLE_NAME));
        self.write_record()
    }

    /// A session without a workspace yet (a warm-pool slot).
    pub fn slot(
        config: &DockerConfig,
        uids: &UidAllocator,
        name: &str,
    ) -> Result<Self, SandboxError> {
        let lease = uids.allocate()?;
        let uid = lease.uid();
        let run_dir = config.run_root.join(container_name(name));
        let session = Self {
            session_id: name.to_string(),
            tenant: None,
            workspace: None,
            uid,
            run_dir,
            access: None,
            masks: Masks::default(),
            additional: Vec::new(),
            disk_budget_bytes: None,
            exec_cgroup: None,
            command_env: Vec::new(),
            egress: None,
            ca_store: None,
            _lease: lease,
        };
        if let Err(e) = session.make_run_dir() {
            session.release();
            return Err(e);
        }
        Ok(session)
    }

    /// Plans the masks of each additional directory (`dirs`, checked), each in its own
    /// `extra-<i>/` of the run directory, and records them. Reaching them needs an
    /// idmapped injection ([`super::pool`]), which the caller makes. On error the caller
    /// cleans up.
    pub fn attach_additional(&mut self, dirs: &[PathBuf]) -> Result<(), SandboxError> {
        for (i, dir) in dirs.iter().enumerate() {
            if let Some(own) = collides_with_container_mount(dir) {
                return Err(crate::sandbox::additional::AdditionalDirError {
                    path: dir.clone(),
                    why: format!("it would be mounted over the container's own {own}"),
                }
                .into());
            }
            let run_dir = self.run_dir.join(format!("extra-{i}"));
            crate::paths::private_dir(&run_dir).map_err(|source| SandboxError::Setup {
                step: "create run dir",
                source,
            })?;
            self.additional.push(AdditionalTree {
                path: dir.clone(),
                run_dir: run_dir.clone(),
                masks: Masks::default(),
            });
            self.write_record()?;
            let masks = masks::prepare_tree(dir, &[], &[], &run_dir)?;
            if let Some(tree) = self.additional.last_mut() {
                tree.masks = masks;
            }
        }
        Ok(())
    }

    /// Makes the workspace reachable for this session's uid and records it. The record
    /// is written before an ACL grant, so that a crash mid-grant leaves reconcile what it
    /// needs to restore the tree.
    pub fn attach_workspace(&mut self, workspace: &Path, how: Access) -> Result<(), SandboxError> {
        self.workspace = Some(workspace.to_path_buf());
        self.access = Some(how);
        self.write_record()?;
        if how == Access::Acl {
            access::grant(workspace, self.uid, &self.run_dir.join(ACL_BACKUP))?;
        }
        Ok(())
    }

    /// How the uid reaches the workspace (`None` before a workspace is attached).
    pub fn access(&self) -> Option<Access> {
        self.access
    }

    fn make_run_dir(&self) -> Result<(), SandboxError> {
        let setup = |step| move |source| SandboxError::Setup { step, source };
        let sock = self.sock_dir();
        let _ = std::fs::remove_dir_all(&self.run_dir);
        crate::paths::private_dir(&self.run_dir).map_err(setup("create run dir"))?;
        std::fs::create_dir_all(&sock).map_err(setup("create run dir"))?;
        std::fs::set_permissions(&self.run_dir, std::fs::Permissions::from_mode(0o700))
            .map_err(setup("chmod run dir"))?;
        // The agent (as the sandbox uid) creates its socket here.
        let owner = nix::unistd::Uid::from_raw(self.uid);
        let group = nix::unistd::Gid::from_raw(self.uid);
        if nix::unistd::chown(&sock, Some(owner), Some(group)).is_err() {
            // Not root: the 0700 parent still keeps other host users out.
            std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777))
                .map_err(setup("chmod socket dir"))?;
        } else {
            std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o700))
                .map_err(setup("chmod socket dir"))?;
        }
        self.write_record()
    }

    fn write_record(&self) -> Result<(), SandboxError> {
        let record = SessionRecord {
            session_id: self.session_id.clone(),
            uid: self.uid,
            workspace: self.workspace.clone(),
            masked: self
                .masks
                .binds
                .iter()
                .filter(|b| b.source != b.target)
                .map(|b| b.target.clone())
                .collect(),
            acl: Some(self.access == Some(Access::Acl)),
            additional: self.additional.iter().map(|t| t.path.clone()).collect(),
        };
        let text = serde_json::to_vec(&record)
            .map_err(|e| SandboxError::Docker(format!("encode session record: {e}")))?;
        crate::paths::write_private(&self.run_dir.join("session.json"), &text).map_err(|source| {
            SandboxError::Setup {
                step: "write session record",
                source,
            }
        })
    }

    /// The host directory mounted at [`CONTAINER_RUN_DIR`].
    pub fn sock_dir(&self) -> PathBuf {
        self.run_dir.join("sock")
    }

    /// The agent's configuration for this session: INET sockets (to the container's own
    /// loopback, its only interface) for its commands only with a way out.
    pub fn agent_config(&self, workspace: &Path) -> AgentConfig {
        AgentConfig {
            socket_path: Path::new(CONTAINER_RUN_DIR).join(SOCKET_NAME),
            workspace: workspace.to_path_buf(),
            tmp_dir: PathBuf::from("/tmp"),
            extra_writable: self.additional.iter().map(|t| t.path.clone()).collect(),
            extra_readable: Vec::new(),
            command_env: self.command_env.clone(),
            protected_paths: std::iter::once(&self.masks)
                .chain(self.additional.iter().map(|t| &t.masks))
                .flat_map(|m| m.protected.iter().cloned())
                .collect(),
            network: self.egress.is_some(),
            egress: self.egress.clone(),
            best_effort: false,
            rlimits: Rlimits::default(),
            // Measured by the agent inside: the workspace is the same tree there, and the
            // agent sees it (and only it) at this path.
            disk_budget_bytes: self.disk_budget_bytes,
            // Mounted there by the claim (see `super::pool`).
            exec_cgroup: self.exec_cgroup.as_ref().map(|e| ExecCgroupConfig {
                dir: EXEC_CGROUP_IN_SANDBOX.into(),
                kill: e.kill,
                slots: sandbox_agent::cgroup::slots::SLOT_COUNT,
            }),
            // The orchestrator is outside the container's pid namespace: any peer whose
            // pid the agent can see is a process inside the sandbox, never the controller.
            require_outside_peer: true,
        }
    }

    /// Every writable tree of the session with the run directory of its records: the
    /// workspace (once attached) first, then the additional directories.
    pub fn trees(&self) -> Vec<(PathBuf, PathBuf)> {
        self.workspace
            .iter()
            .map(|ws| (ws.clone(), self.run_dir.clone()))
            .chain(
                self.additional
                    .iter()
                    .map(|t| (t.path.clone(), t.run_dir.clone())),
            )
            .collect()
    }

    /// Removes the per-command cgroups, the placeholders (those still empty), the run
    /// directory, and frees the uid. Call once the container is gone (or going).
    pub fn release(self) {
        if let Some(exec) = &self.exec_cgroup {
            exec_cgroup::remove(exec);
        }
        // Placeholders exist only once a workspace was attached (and recorded).
        if let Some(ws) = &self.workspace {
            masks::remove_placeholders(&self.run_dir, ws);
        }
        for tree in &self.additional {
            masks::remove_placeholders(&tree.run_dir, &tree.path);
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }

    /// Restores the workspace's ACLs (after an ACL grant), removes the run directory,
    /// frees the uid.
    pub fn cleanup(self) {
        if let (Some(Access::Acl), Some(ws)) = (self.access, &self.workspace)
            && let Err(e) = access::revoke(ws, self.uid, &self.run_dir.join(ACL_BACKUP))
        {
            tracing::warn!("revoking workspace access for uid {}: {e}", self.uid);
        }
        self.release();
    }
}

/// The container's own mount point that a workspace at `workspace` (the same absolute path
/// inside) would land on or above, if any: the engine refuses two mounts at one point
/// ("Duplicate mount point" for a `/tmp` workspace), and a workspace above one would
/// put the container's run dir or tmpfs inside the user's tree.
pub fn collides_with_container_mount(workspace: &Path) -> Option<&'static str> {
    ["/tmp", CONTAINER_RUN_DIR]
        .into_iter()
        .find(|own| Path::new(own).starts_with(workspace))
}

/// Docker container name for a session or pool slot: `cordon-` and the id, with anything
/// Docker refuses replaced.
pub fn container_name(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("cordon-{clean}")
}

/// The confinement of every session container. Each line is a security decision.
/// `inet`: whether the container-wide seccomp profile lets INET sockets be made (to the
/// container's loopback, its only interface: see [`create_and_start`]).
pub fn session_host_config(
    config: &DockerConfig,
    session: &Session,
    workspace: Option<&Path>,
    inet: bool,
) -> Result<HostConfig, SandboxError> {
    let mut binds = vec![format!(
        "{}:{CONTAINER_RUN_DIR}:rw",
        session.sock_dir().display()
    )];
    if let Some(ws) = workspace {
        // Same absolute path inside and out, so paths in transcripts are the user's own.
        // Only for a Cordon that cannot inject (not root): the engine's bind options have
        // no nosuid or nodev; no-new-privileges keeps setuid bits powerless inside, and
        // no capability allows making a device node. Injected workspaces are mounted
        // nosuid,nodev (see [`super::pool`]).
        binds.push(format!("{}:{}:rw", ws.display(), ws.display()));
    }
    let tmpfs = HashMap::from([(
        "/tmp".to_string(),
        format!("rw,nosuid,nodev,size={},mode=1777", config.tmpfs_bytes),
    )]);
    let seccomp = seccomp_profile::docker_profile(inet)?.to_string();
    // Protected and denied paths over the workspace (cold start; a pool claim injects
    // them). Typed mounts: a missing source fails the create instead of being made.
    let masks: &[Bind] = match workspace {
        Some(_) => &session.masks.binds,
        None => &[],
    };
    let mounts: Vec<Mount> = masks
        .iter()
        .chain(&session.ca_store)
        .map(|b| Mount {
            target: Some(b.target.display().to_string()),
            source: Some(b.source.display().to_string()),
            typ: Some(MountType::BIND),
            read_only: Some(b.read_only),
            ..Mount::default()
        })
        .collect();
    let mounts = (!mounts.is_empty()).then_some(mounts);
    Ok(HostConfig {
        binds: Some(binds),
        mounts,
        // No network namespace peers, no route out (egress comes through a bridged socket).
        network_mode: Some("none".into()),
        // The one resolver a sandbox is told of is its own egress DNS stub on its loopback
        // (without network nothing listens there: a lookup fails at once), never the
        // host's (which Docker would copy in, network or not).
        dns: Some(vec!["127.0.0.1".into()]),
        // Nothing outside the workspace, /tmp and the run dir is writable.
        readonly_rootfs: Some(true),
        tmpfs: Some(tmpfs),
        // No capability at all: the sandbox uid is unprivileged even for its own files' sake.
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec![
            // setuid binaries in the image cannot raise privileges.
            "no-new-privileges:true".into(),
            format!("seccomp={seccomp}"),
        ]),
        pids_limit: Some(config.pids_limit),
        memory: Some(config.memory_bytes),
        // Swap equal to memory: no swap beyond the memory cap.
        memory_swap: Some(config.memory_bytes),
        #[allow(clippy::cast_possible_truncation)]
        nano_cpus: Some((config.cpus * 1e9) as i64),
        // docker-init (tini) as pid 1 reaps orphans; the agent's children stay its own.
        init: Some(true),
        // No shared IPC with the host or other containers.
        ipc_mode: Some("private".into()),
        // A dead sandbox stays dead: the orchestrator decides when to start a new one.
        auto_remove: Some(false),
        ..HostConfig::default()
    })
}

/// Creates and starts a container for `session`. Returns the container id.
///
/// `inet`: the container-wide seccomp profile allows INET sockets. Needed by a session
/// with a way out (its agent binds the egress bridge and DNS stub on the loopback, its
/// commands connect to them) and by a warm-pool slot, which may be claimed by either
/// kind of session. Sound for a session without network in such a container: the
/// container has no interface but `lo` (network none) either way, and its agent,
/// told `network: false`, installs the policy's network-denied rules on itself before
/// it starts any command, so that every process the session can run is refused INET
/// sockets by that filter (seccomp filters are inherited and cannot be removed).
pub async fn create_and_start(
    docker: &Docker,
    config: &DockerConfig,
    image: &str,
    session: &Session,
    mode: Mode,
    inet: bool,
) -> Result<String, SandboxError> {
    let workspace = match mode {
        Mode::Cold => Some(
            session
                .workspace
                .clone()
                .ok_or_else(|| SandboxError::Docker("cold start without a workspace".into()))?,
        ),
        Mode::Pool | Mode::Injected => None,
    };
    let cmd = match &workspace {
        Some(ws) => {
            let agent = session.agent_config(ws);
            let json = serde_json::to_string(&agent)
                .map_err(|e| SandboxError::Docker(format!("encode agent config: {e}")))?;
            vec!["/sandbox-agent".to_string(), "--config".to_string(), json]
        }
        None => super::pool::waiter_command(),
    };
    let mut label_map = HashMap::from([
        (labels::SESSION.to_string(), session.session_id.clone()),
        (
            labels::TENANT.to_string(),
            session.tenant.clone().unwrap_or_default(),
        ),
        (labels::CREATED_AT.to_string(), now_rfc3339ish()),
        (
            labels::AGENT_VERSION.to_string(),
            sandbox_agent::AGENT_VERSION.to_string(),
        ),
        (labels::UID.to_string(), session.uid.to_string()),
        (
            labels::RUN_DIR.to_string(),
            session.run_dir.display().to_string(),
        ),
    ]);
    // Who owns the container: reconcile in another process leaves it alone while we live.
    if let Some(owner) = super::adopt::this_process() {
        label_map.insert(labels::OWNER_PID.to_string(), owner.pid.to_string());
        label_map.insert(labels::OWNER_START.to_string(), owner.start.to_string());
    }
    if let Some(ws) = &workspace {
        label_map.insert(labels::WORKSPACE.to_string(), ws.display().to_string());
    }
    if mode == Mode::Pool {
        label_map.insert(labels::POOL.to_string(), image.to_string());
    }
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        user: Some(format!("{0}:{0}", session.uid)),
        cmd: Some(cmd),
        entrypoint: Some(Vec::new()),
        working_dir: workspace.as_ref().map(|w| w.display().to_string()),
        env: Some(vec!["PATH=/usr/local/bin:/usr/bin:/bin".into()]),
        labels: Some(label_map),
        network_disabled: Some(true),
        host_config: Some(session_host_config(
            config,
            session,
            workspace.as_deref(),
            inet,
        )?),
        ..ContainerCreateBody::default()
    };
    let name = container_name(&session.session_id);
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    let created = match docker
        .create_container(Some(options.clone()), body.clone())
        .await
    {
        // The name is taken: by this session's earlier sandbox when it died and could not
        // be removed then (a Docker daemon restart), and that one may go.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) if super::adopt::replaceable(docker, &name).await => {
            remove(docker, &name).await?;
            docker.create_container(Some(options), body).await
        }
        other => other,
    };
    let created = match created {
        Ok(c) => c,
        // The name is another live sandbox's: leave that one alone.
        Err(
            e @ bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            },
        ) => return Err(docker_err("create container")(e)),
        Err(e) => {
            // A request cut off (a Docker daemon restarting) may have created the
            // container all the same: by its name, which is this session's alone, it goes.
            let _ = remove(docker, &name).await;
            return Err(docker_err("create container")(e));
        }
    };
    if let Err(e) = docker.start_container(&created.id, None).await {
        let _ = remove(docker, &created.id).await;
        return Err(docker_err("start container")(e));
    }
    Ok(created.id)
}

/// Force-removes a container and its anonymous volumes; absent is fine.
pub async fn remove(docker: &Docker, id: &str) -> Result<(), SandboxError> {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    let mut attempt = 0;
    loop {
        attempt += 1;
        match docker.remove_container(id, Some(options.clone())).await {
            Ok(()) => return Ok(()),
            // Gone already.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return Ok(()),
            // Another removal of it is under way (with force, nothing else conflicts).
            // Callers take Ok for "gone", so wait for that one to finish; should it have
            // failed, remove it again.
            Err(
                e @ bollard::errors::Error::DockerResponseServerError {
                    status_code: 409, ..
                },
            ) => {
                if removal_finished(docker, id).await {
                    return Ok(());
                }
                if attempt >= 4 {
                    return Err(docker_err("remove container")(e));
                }
            }
            // No answer at all: after a daemon restart the first request on a pooled
            // connection fails; a removal is worth a few more tries.
            Err(e)
                if attempt < 4
                    && !matches!(e, bollard::errors::Error::DockerResponseServerError { .. }) =>
            {
                tracing::debug!(container = id, error = %e, "removing a container failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(250 * attempt)).await;
            }
            Err(e) => return Err(docker_err("remove container")(e)),
        }
    }
}

/// Waits (at most 10 s) while the container is being removed: true once it is gone,
/// false if it is still there and no longer being removed.
async fn removal_finished(docker: &Docker, id: &str) -> bool {
    for _ in 0..200 {
        match docker.inspect_container(id, None).await {
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return true,
            Ok(info)
                if info.state.as_ref().and_then(|s| s.status)
                    != Some(bollard::models::ContainerStateStatusEnum::REMOVING) =>
            {
                return false;
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    false
}

/// Sets `alive` to false once the container stops for any reason. `wait_container` yields
/// an error rather than a status when the exit code is non-zero: both mean "stopped",
/// unless the error is the connection itself, then inspect decides.
pub async fn watch_exit(docker: Docker, id: String, alive: Arc<AtomicBool>) {
    loop {
        let mut wait = docker.wait_container(&id, None);
        match wait.next().await {
            Some(Ok(_)) | None => break,
            Some(Err(bollard::errors::Error::DockerContainerWaitError { .. })) => break,
            Some(Err(_)) => {
                // The daemon went away (restart?): ask again until it answers.
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                match docker.inspect_container(&id, None).await {
                    Ok(info) => {
                        if !info.state.and_then(|s| s.running).unwrap_or(false) {
                            break;
                        }
                    }
                    Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 404,
                        ..
                    }) => break,
                    Err(_) => {}
                }
            }
        }
    }
    alive.store(false, Ordering::SeqCst);
}

/// The container's state: (running, exit code, pid of its init on the host).
pub async fn state(docker: &Docker, id: &str) -> Result<(bool, i64, i64), SandboxError> {
    let info = docker
        .inspect_container(id, None)
        .await
        .map_err(docker_err("inspect container"))?;
    let state = info.state.unwrap_or_default();
    Ok((
        state.running.unwrap_or(false),
        state.exit_code.unwrap_or(0),
        state.pid.unwrap_or(0),
    ))
}

/// The last lines the container printed, for error messages.
pub async fn tail_logs(docker: &Docker, id: &str) -> String {
    let options = LogsOptionsBuilder::new()
        .stdout(true)
        .stderr(true)
        .tail("20")
        .build();
    let mut logs = docker.logs(id, Some(options));
    let mut out = String::new();
    while let Some(Ok(line)) = logs.next().await {
        out.push_str(&line.to_string());
    }
    if out.is_empty() {
        "(none)".into()
    } else {
        out.trim().to_string()
    }
}

/// Seconds since the epoch, as a label value (sortable, no date crate needed).
fn now_rfc3339ish() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    secs.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_names_are_what_docker_accepts() {
        assert_eq!(container_name("s1"), "cordon-s1");
        assert_eq!(container_name("a/b c"), "cordon-a_b_c");
    }

    #[test]
    fn a_workspace_on_or_above_the_containers_own_mounts_is_refused() {
        assert_eq!(
            collides_with_container_mount(Path::new("/tmp")),
            Some("/tmp")
        );
        assert_eq!(
            collides_with_container_mount(Path::new("/run")),
            Some(CONTAINER_RUN_DIR)
        );
        assert_eq!(
            collides_with_container_mount(Path::new(CONTAINER_RUN_DIR)),
            Some(CONTAINER_RUN_DIR)
        );
        for fine in [
            "/tmp/project",
            "/home/u/src",
            "/run/user/1000/ws",
            "/tmpfoo",
        ] {
            assert_eq!(
                collides_with_container_mount(Path::new(fine)),
                None,
                "{fine}"
            );
        }
    }
}
