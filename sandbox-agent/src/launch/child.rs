//! The sandbox's init: pid 1 of the new pid namespace, cloned by the launcher already
//! inside the new user, mount, ipc, uts, net and cgroup namespaces. It waits for its id
//! maps, builds the root, drops every privilege, starts the agent and then only reaps
//! (orphans of the sandbox are reparented to it). When it exits, the kernel kills every
//! process left in the namespace.
//!
//! Runs in a freshly cloned copy of the single-threaded launcher: allocation is fine.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Gid, Pid, Uid};

use super::mounts::{self, RootSpec};
use super::oneshot::{self, CommandEnd};
use super::trees::Prepared;
use super::userns::IdPlan;
use super::{AGENT_IN_SANDBOX, LaunchConfig, SANDBOX_GID, SANDBOX_UID};
use crate::cgroup::{EXEC_CGROUP_IN_SANDBOX, ExecCgroupConfig, KillMethod};

/// Written to the init's `oom_score_adj` (inherited by every sandbox process): under
/// memory pressure the kernel's OOM killer picks the sandbox first, never the host's
/// own processes (the sandbox's cgroup limit usually acts before that).
const OOM_SCORE_ADJ: &str = "1000";

/// Everything the init needs, prepared by the launcher before the clone.
pub(super) struct ChildCtx<'a> {
    /// The session cgroup's v1 `tasks` files (opened by the launcher): the init, born in
    /// the v2 part, joins these first (see `supervise::clone_init`).
    pub cgroup_tasks: &'a [std::fs::File],
    pub config: &'a LaunchConfig,
    pub ids: IdPlan,
    /// The workspace and the additional directories, prepared (see [`super::trees`]).
    pub workspace: &'a Prepared,
    pub additional: &'a [Prepared],
    /// Idmapped trees of the host view's writable entries, in order (host root only;
    /// otherwise they are bound plainly).
    pub writable_trees: &'a [OwnedFd],
    /// Idmapped trees of each seeded cache (its host cache read-only, Cordon's layers),
    /// in order (host root only; otherwise both are bound plainly).
    pub seeded_trees: &'a [(OwnedFd, OwnedFd)],
    /// The session's per-command cgroup parent on the host, and how commands are killed.
    pub exec_cgroup: Option<(&'a std::path::Path, KillMethod)>,
    /// Read end: one byte once the maps are written; EOF if the launcher gave up.
    pub go: OwnedFd,
    /// Write end (CLOEXEC): setup errors go here; EOF with nothing means the agent exec'd.
    pub errors: OwnedFd,
    /// Read end of a pipe only the launcher writes to: hang-up means the launcher died.
    pub alive: OwnedFd,
    /// Launcher-side fds that must not stay open in the sandbox.
    pub close: Vec<i32>,
    /// Where the init's stderr goes (the session's log), with stdin and stdout on
    /// /dev/null: set when the launcher runs in the orchestrator's own process, whose
    /// standard streams (a terminal, say) are not the sandbox's to hold. `None`: the
    /// launcher's own, already chosen so by the orchestrator.
    pub stderr: Option<i32>,
    /// The one-shot command's pipes, when the init runs a command instead of the agent
    /// (see [`super::oneshot`]).
    pub oneshot: Option<oneshot::Fds>,
}

/// The init's entry point; never returns.
pub(super) fn run(mut ctx: ChildCtx) -> ! {
    let mut errors = std::fs::File::from(ctx.errors.try_clone().unwrap_or_else(|_| exit(1)));
    let code = match setup_and_serve(&mut ctx) {
        Ok(code) => code,
        Err(why) => {
            let _ = errors.write_all(why.as_bytes());
            1
        }
    };
    exit(code)
}

fn exit(code: i32) -> ! {
    // SAFETY: _exit ends the process without running the launcher's atexit handlers or
    // destructors, which belong to the parent's copy of this memory.
    unsafe { libc::_exit(code) }
}

fn setup_and_serve(ctx: &mut ChildCtx) -> Result<i32, String> {
    // First of all, while this process has one thread: into the session's v1 cgroups
    // (limits), so everything it does and starts is counted there.
    for tasks in ctx.cgroup_tasks {
        crate::cgroup::slots::enter(tasks.as_raw_fd())
            .map_err(|e| format!("joining the session cgroup: {e}"))?;
        // SAFETY: the launcher's copy owns this fd; closing ours affects only us (this
        // process never runs the launcher's destructors: it _exits).
        unsafe { libc::close(tasks.as_raw_fd()) };
    }
    for fd in &ctx.close {
        // SAFETY: these fds belong to the launcher's copy; closing ours affects only us.
        unsafe { libc::close(*fd) };
    }
    if let Some(log) = ctx.stderr {
        standard_streams(log).map_err(|e| format!("setting the init's streams: {e}"))?;
        // In the orchestrator's own process, whose command line is not the sandbox's
        // to read (`/proc/1/cmdline` is readable inside, dumpable or not: an inline
        // `--settings` JSON would be there).
        blank_cmdline();
    }
    // A session of its own: no terminal's job control reaches the init (a Ctrl-C meant for
    // the orchestrator's process group, or a hang-up), only the launcher's kill.
    crate::confine::sys::setsid().map_err(|e| format!("setsid: {e}"))?;
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    // Raising one's own score needs no privilege; lowering it later would.
    std::fs::write("/proc/self/oom_score_adj", OOM_SCORE_ADJ)
        .map_err(|e| format!("setting oom_score_adj: {e}"))?;
    let mut byte = [0u8; 1];
    std::fs::File::from(ctx.go.try_clone().map_err(|e| e.to_string())?)
        .read_exact(&mut byte)
        .map_err(|_| "the launcher did not finish the id maps".to_string())?;
    // Nothing in the sandbox may create a namespace (seccomp refuses it too): with every
    // count of this user namespace at 0 the kernel refuses it whatever the system call,
    // which lets the agent use clone3 (its flags are out of seccomp's sight) to start
    // commands inside their cgroups. A kind that stays uncapped only keeps clone3 refused
    // to the agent (it checks, see confine::sys::namespaces_capped).
    let uncapped = crate::confine::sys::cap_namespaces();
    if !uncapped.is_empty() {
        tracing::warn!(?uncapped, "namespace counts left uncapped");
    }
    // Open every host source now, while this process still has the launcher's uid (which
    // can traverse e.g. a 0700 /root holding CORDON_HOME) and before /tmp is covered.
    let cfg = ctx.config;
    // A one-shot run starts no agent (and in the orchestrator's own process this
    // executable is not the agent's).
    let agent_src = if cfg.oneshot.is_some() {
        None
    } else {
        let exe = std::env::current_exe().map_err(|e| format!("locating the agent binary: {e}"))?;
        Some(open_path(&exe)?)
    };
    let socket_src = open_path(&cfg.socket_dir())?;
    let workspace_src = open_path(&cfg.workspace)?;
    // The additional directories were opened once, when checked (see trees::prepare_additional);
    // their binds come from those fds, never from their paths again.
    let additional_src = ctx
        .additional
        .iter()
        .map(|t| match &t.src {
            Some(fd) => fd
                .try_clone()
                .map_err(|e| format!("{}: {e}", t.path.display())),
            None => open_path(&t.path),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let host_ro = open_host_view(&cfg.host.read_only_in_mount_order())?;
    let host_rw = if ctx.writable_trees.is_empty() {
        open_host_view(
            &cfg.host
                .writable
                .iter()
                .map(PathBuf::as_path)
                .collect::<Vec<_>>(),
        )?
    } else {
        Vec::new()
    };
    let seeded_plain = if ctx.seeded_trees.is_empty() {
        cfg.host
            .seeded
            .iter()
            .map(|s| Ok((open_path(&s.lower)?, open_path(&s.layers)?)))
            .collect::<Result<Vec<_>, String>>()?
    } else {
        Vec::new()
    };
    let cgroup_src = match ctx.exec_cgroup {
        Some((dir, _)) => Some(open_path(dir)?),
        None => None,
    };
    if ctx.ids.privileged() {
        // Become inside root (an unprivileged host id) so files on the sandbox's own tmpfs
        // have a mapped owner, and drop the host's supplementary groups (root's group 0).
        nix::unistd::setresgid(Gid::from_raw(0), Gid::from_raw(0), Gid::from_raw(0))
            .map_err(|e| format!("setresgid(0): {e}"))?;
        nix::unistd::setresuid(Uid::from_raw(0), Uid::from_raw(0), Uid::from_raw(0))
            .map_err(|e| format!("setresuid(0): {e}"))?;
        nix::unistd::setgroups(&[]).map_err(|e| format!("setgroups: {e}"))?;
    }
    let dns = cfg.agent.egress.as_ref().is_some_and(|e| e.dns);
    let additional: Vec<_> = ctx
        .additional
        .iter()
        .zip(&additional_src)
        .map(|(t, src)| tree_mount(t, src))
        .collect();
    mounts::build_root(&RootSpec {
        workspace: tree_mount(ctx.workspace, &workspace_src),
        additional: &additional,
        socket_src: &fd_path(&socket_src),
        agent_src: agent_src.as_ref().map(fd_path).as_deref(),
        cgroup_src: cgroup_src.as_ref().map(fd_path).as_deref(),
        tmp_size_mib: cfg.tmp_size_mib,
        masked: &cfg.masked,
        host: mounts::HostSources {
            read_only: &host_ro
                .iter()
                .map(|(p, fd)| (*p, fd_path(fd)))
                .collect::<Vec<_>>(),
            hidden: &cfg.host.hidden,
            writable: &writable_sources(cfg, ctx.writable_trees, &host_rw),
            seeded: &seeded_sources(cfg, ctx.seeded_trees, &seeded_plain),
            scratch: &cfg.host.scratch,
        },
        resolv_conf: dns.then_some(crate::egress::dns::RESOLV_CONF),
        ca: cfg.agent.egress.as_ref().and_then(|e| e.ca.as_ref()),
    })?;
    nix::unistd::sethostname("cordon").map_err(|e| format!("sethostname: {e}"))?;
    if let Err(e) = loopback_up() {
        tracing::warn!(error = %e, "loopback stays down");
    }
    if dns {
        // The DNS stub must bind port 53 without capabilities. This sysctl belongs to the
        // sandbox's own network namespace (only `lo`): it opens no port to anything else.
        std::fs::write("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0")
            .map_err(|e| format!("letting the DNS stub bind port 53: {e}"))?;
    }
    drop_privileges()?;
    // Re-armed after the uid change (which clears it); then make sure the launcher did
    // not die before it was armed.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| format!("pdeathsig: {e}"))?;
    if launcher_gone(&ctx.alive) {
        return Err("the launcher died during setup".into());
    }
    if let (Some(shot), Some(fds)) = (&cfg.oneshot, ctx.oneshot.take()) {
        // The command instead of the agent: the same confinement the agent gives each
        // of its commands; the init ends when the command does.
        oneshot::run(cfg, shot, fds)?;
        return Ok(0);
    }
    let agent = spawn_agent(ctx)?;
    drop(std::fs::File::from(
        ctx.errors.try_clone().map_err(|e| e.to_string())?,
    ));
    Ok(reap_until(agent).map_or(1, CommandEnd::code))
}

/// How the init mounts a prepared tree: its idmapped clone, else the O_PATH fd `src`.
fn tree_mount<'a>(tree: &'a Prepared, src: &OwnedFd) -> mounts::TreeMount<'a> {
    mounts::TreeMount {
        path: &tree.path,
        tree: tree.tree.as_ref(),
        src: fd_path(src),
        protected: &tree.plan,
        linked: &tree.linked,
    }
}

fn open_path(path: &std::path::Path) -> Result<OwnedFd, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| format!("opening {}: {e}", path.display()))
}

/// O_PATH fds of host view entries, opened while the init still has the launcher's uid.
/// An entry gone since the orchestrator looked (a toolchain removed) is skipped: there is
/// nothing to show.
fn open_host_view<'p>(paths: &[&'p Path]) -> Result<Vec<(&'p Path, OwnedFd)>, String> {
    let mut out = Vec::new();
    for p in paths {
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open(p)
        {
            Ok(fd) => out.push((*p, OwnedFd::from(fd))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("opening {}: {e}", p.display())),
        }
    }
    Ok(out)
}

/// Where each writable entry comes from: its idmapped tree, or its plain path fd.
fn writable_sources<'a>(
    cfg: &'a LaunchConfig,
    trees: &'a [OwnedFd],
    plain: &[(&'a Path, OwnedFd)],
) -> Vec<(&'a Path, mounts::Source<'a>)> {
    if trees.is_empty() {
        plain
            .iter()
            .map(|(p, fd)| (*p, mounts::Source::Path(fd_path(fd))))
            .collect()
    } else {
        cfg.host
            .writable
            .iter()
            .zip(trees)
            .map(|(p, t)| (p.as_path(), mounts::Source::Tree(t)))
            .collect()
    }
}

/// The seeded caches' sources: their idmapped trees, else their plain fds' paths.
fn seeded_sources<'a>(
    cfg: &'a LaunchConfig,
    trees: &'a [(OwnedFd, OwnedFd)],
    plain: &[(OwnedFd, OwnedFd)],
) -> Vec<mounts::SeededSource<'a>> {
    let seeded = cfg.host.seeded.iter();
    if trees.is_empty() {
        seeded
            .zip(plain)
            .map(|(s, (lower, layers))| mounts::SeededSource {
                at: &s.at,
                lower: mounts::Source::Path(fd_path(lower)),
                layers: mounts::Source::Path(fd_path(layers)),
            })
            .collect()
    } else {
        seeded
            .zip(trees)
            .map(|(s, (lower, layers))| mounts::SeededSource {
                at: &s.at,
                lower: mounts::Source::Tree(lower),
                layers: mounts::Source::Tree(layers),
            })
            .collect()
    }
}

fn fd_path(fd: &OwnedFd) -> std::path::PathBuf {
    format!("/proc/self/fd/{}", fd.as_raw_fd()).into()
}

/// Zeroes this process's argument area, so the kernel shows an empty command line for it.
/// Called in the init only, which never reads its arguments again.
fn blank_cmdline() {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // Fields after the command name, which is in parentheses and may hold spaces:
    // arg_start and arg_end are fields 48 and 49 of the line.
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
        return;
    };
    let fields: Vec<usize> = rest
        .split_whitespace()
        .skip(45)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    if let [start, end] = fields[..]
        && end > start
    {
        // SAFETY: [arg_start, arg_end) is this process's own argument strings, mapped
        // writable on its initial stack since exec; nothing here reads them after this
        // (the init is a copy of the launcher that never asks for its arguments again).
        unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
    }
}

/// Stdin and stdout on /dev/null, stderr on `log`; closes `log`'s own number.
fn standard_streams(log: i32) -> std::io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for (from, to) in [(null.as_raw_fd(), 0), (null.as_raw_fd(), 1), (log, 2)] {
        // SAFETY: dup2 onto the standard numbers, from descriptors this process holds
        // (the init's copies; the launcher's stay as they are).
        if unsafe { libc::dup2(from, to) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    if log > 2 {
        // SAFETY: the init's copy of the log, now duplicated onto 2.
        unsafe { libc::close(log) };
    }
    Ok(())
}

fn launcher_gone(alive: &OwnedFd) -> bool {
    let mut pfd = libc::pollfd {
        fd: alive.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    n != 0 && pfd.revents & (libc::POLLHUP | libc::POLLIN | libc::POLLERR) != 0
}

/// Drops to the sandbox uid/gid with no capabilities in any set, and sets no_new_privs
/// so nothing exec'd later (setuid binaries, file capabilities) can gain any back.
fn drop_privileges() -> Result<(), String> {
    let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);
    for cap in 0..=last_cap {
        // SAFETY: prctl with integer arguments only.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if r != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(format!("dropping capability {cap} from the bounding set"));
        }
    }
    let (uid, gid) = (Uid::from_raw(SANDBOX_UID), Gid::from_raw(SANDBOX_GID));
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| format!("setresgid: {e}"))?;
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| format!("setresuid: {e}"))?;
    // SAFETY: prctl with integer arguments only.
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    } != 0
    {
        return Err("clearing ambient capabilities".into());
    }
    // Unprivileged launches keep uid 1000 throughout, so the uid change above clears
    // nothing: empty every set explicitly.
    super::caps::clear_all().map_err(|e| format!("capset: {e}"))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    // The init's /proc entries stay out of reach of the sandbox's processes.
    nix::sys::prctl::set_dumpable(false).map_err(|e| format!("dumpable: {e}"))
}

/// Brings `lo` up: the network namespace has no route out, but local servers started by
/// tests (on 127.0.0.1) should work.
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: plain socket(2); the fd is wrapped and closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket owned by nobody else.
    let sock = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq we pass.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // IFF_UP | IFF_RUNNING (0x41) fits the 16-bit flags field.
        #[allow(clippy::cast_possible_truncation)]
        let up = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        req.ifr_ifru.ifru_flags |= up;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Forks the agent, which execs `sandbox-agent --config JSON` with a clean environment.
fn spawn_agent(ctx: &ChildCtx) -> Result<Pid, String> {
    let cfg = ctx.config;
    let mut agent = cfg.agent.clone();
    agent.exec_cgroup = ctx.exec_cgroup.map(|(_, kill)| ExecCgroupConfig {
        dir: EXEC_CGROUP_IN_SANDBOX.into(),
        kill,
        slots: cfg.concurrent_commands,
    });
    let json = serde_json::to_string(&agent).map_err(|e| format!("agent config: {e}"))?;
    let cstr = |s: &str| CString::new(s).map_err(|_| format!("NUL byte in {s:?}"));
    let argv = [cstr(AGENT_IN_SANDBOX)?, cstr("--config")?, cstr(&json)?];
    let mut env = vec![
        cstr("PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin")?,
        cstr("HOME=/tmp")?,
        cstr("LANG=C.UTF-8")?,
        cstr("USER=cordon")?,
    ];
    for (k, v) in &cfg.agent_env {
        env.push(cstr(&format!("{k}={v}"))?);
    }
    let workspace = CString::new(cfg.workspace.as_os_str().as_encoded_bytes())
        .map_err(|_| "NUL byte in the workspace path".to_string())?;
    // SAFETY: this process is single-threaded (a clone of the single-threaded launcher).
    match unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Child => {
            let _ = nix::sys::signal::sigprocmask(
                SigmaskHow::SIG_SETMASK,
                Some(&SigSet::empty()),
                None,
            );
            let _ = nix::unistd::chdir(workspace.as_c_str());
            let err = nix::unistd::execve(&argv[0], &argv, &env);
            let mut errors =
                std::fs::File::from(ctx.errors.try_clone().unwrap_or_else(|_| exit(127)));
            let _ = write!(errors, "exec of the agent failed: {err:?}");
            exit(127)
        }
        ForkResult::Parent { child } => Ok(child),
    }
}

/// Reaps every child (the sandbox's orphans are the init's) until `leader` ends; returns
/// how it ended, `None` if waiting failed.
pub(super) fn reap_until(leader: Pid) -> Option<CommandEnd> {
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(status) if status.pid() == Some(leader) => {
                if let Some(end) = CommandEnd::of(status) {
                    return Some(end);
                }
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return None,
        }
    }
}
