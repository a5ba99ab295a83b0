//! The launcher's own process: prepares the host side, clones the sandbox's init, writes
//! its id maps, then supervises until the sandbox ends or must end, and cleans up.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::child::{self, ChildCtx};
use super::userns::{self, IdPlan};
use super::{LaunchConfig, LaunchError, denied, state, trees};
use crate::cgroup::{Layout, SessionCgroup};
use crate::confine::sys;

/// Exit code of the launcher when it could not start the sandbox.
pub const EXIT_LAUNCH_FAILED: i32 = 125;

/// Runs the launcher for the config at `config_path`; returns the process exit code (the
/// agent's, or [`EXIT_LAUNCH_FAILED`]). Must be called while the process is
/// single-threaded (it clones).
pub fn run_launcher(config_path: &Path) -> i32 {
    // Before anything of the session exists: files changed after this lose their
    // privilege bits at teardown (see hostside::privbits).
    let started = std::time::SystemTime::now();
    let config = match read_config(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sandbox-agent launcher: {e}");
            return EXIT_LAUNCH_FAILED;
        }
    };
    let lifeline = config.lifeline_fd.map(|fd| {
        // SAFETY: the orchestrator passed this inherited fd to us alone, by contract;
        // nothing else in this process owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let _ = nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
        fd
    });
    // A one-shot run is launched by the orchestrator itself (see inline), which copies
    // its output; this process would have nowhere to copy it.
    if config.oneshot.is_some() {
        eprintln!("sandbox-agent launcher: a one-shot run is launched in-process");
        return EXIT_LAUNCH_FAILED;
    }
    if let Err(e) = state::write_pid_file(&config.state_dir) {
        eprintln!("sandbox-agent launcher: recording the launcher pid: {e}");
    }
    let watch = Watch {
        lifeline: lifeline.as_ref().map(AsRawFd::as_raw_fd),
        ..Watch::default()
    };
    let outcome = run_and_tear_down(&config, started, watch, None, InitIo::default(), &mut |p| {
        eprintln!("{STRIPPED_LOG_PREFIX}{}", p.display())
    });
    match outcome {
        Ok(Ended { code, released, .. }) => {
            if released {
                // The orchestrator let go (or died): nobody else will clean up.
                state::cleanup_session(&config.state_dir);
            }
            code
        }
        Err(e) => {
            eprintln!("sandbox-agent launcher: {e}");
            EXIT_LAUNCH_FAILED
        }
    }
}

/// The launcher's run once its config is read and its inherited descriptors taken: the
/// session's cgroup, the sandbox from clone to end, then the teardown. Every process of
/// the session is dead when this returns (or none ever ran), the cgroups are gone, the
/// git dirs made during the session are vetted and the trees swept for privilege bits
/// (each stripped file is told to `on_stripped`), before anything can tell the host's git
/// that the session is over. Must be called while the process is single-threaded.
pub(super) fn run_and_tear_down(
    config: &LaunchConfig,
    started: std::time::SystemTime,
    watch: Watch<'_>,
    oneshot: Option<super::oneshot::Fds>,
    init_io: InitIo,
    on_stripped: &mut dyn FnMut(&Path),
) -> Result<Ended, LaunchError> {
    let cgroup = session_cgroup(config)?;
    let mut mount_ns = None;
    let outcome = run_session(
        config,
        watch,
        cgroup.as_ref(),
        &mut mount_ns,
        oneshot,
        init_io,
    );
    // Every process of the session is dead or dying with the init: kill any straggler
    // and remove the cgroups.
    if let Some(cg) = &cgroup {
        cg.remove();
    }
    // The namespace is gone (or never was): no sandboxed process runs, nothing mounts the
    // placeholders any more. Git dirs made during the session are vetted and privilege bits
    // swept before the host's git can be told the session is over.
    trees::tear_down(config, started, on_stripped);
    let _ = std::fs::remove_dir_all(config.socket_dir());
    // The seeded overlays' unmount syncs their disk: off this process's exit (linger.rs).
    if let Some(ns) = mount_ns {
        super::linger::release_detached(ns);
    }
    outcome
}

/// What supervision watches besides the init.
#[derive(Default)]
pub(super) struct Watch<'a> {
    /// The orchestrator's lifeline: any event on it (end of file) means it let go.
    pub lifeline: Option<RawFd>,
    /// The output of a one-shot run inside the orchestrator's own process, copied to its
    /// standard streams as it comes (see [`super::inline`]).
    pub relay: Option<&'a mut super::inline::Relay>,
    /// Past this, the init is killed (the command ran out of time).
    pub deadline: Option<std::time::Instant>,
}

/// The init's standard streams and what else it must not keep, when the launcher runs in
/// a process whose descriptors were not chosen for it (the orchestrator's own).
#[derive(Debug, Default)]
pub(super) struct InitIo {
    /// The init's stderr (the session's log); with it, stdin and stdout become /dev/null.
    pub stderr: Option<RawFd>,
    /// Further descriptors of this process the init closes at once.
    pub close: Vec<RawFd>,
}

/// Prefix of the launcher's log line for each file whose bits it stripped; the orchestrator
/// relays these lines before it removes the log.
pub const STRIPPED_LOG_PREFIX: &str = "sandbox-agent launcher: stripped setuid/setgid from ";

/// Makes the session's cgroup with its limits, before anything of the sandbox runs.
/// Without cgroups (a non-root user with no delegated subtree) the session fails to start
/// unless its limits are best effort: an unbounded session can take the host's memory.
fn session_cgroup(cfg: &LaunchConfig) -> Result<Option<SessionCgroup>, LaunchError> {
    let Some(limits) = &cfg.limits else {
        return Ok(None);
    };
    let made = Layout::detect().and_then(|l| SessionCgroup::create(&l, &cfg.session_id, limits));
    match made {
        Ok(cg) => {
            let ids = IdPlan::new(
                &cfg.session_id,
                cfg.uid_base,
                nix::unistd::geteuid().as_raw(),
                nix::unistd::getegid().as_raw(),
            );
            if let Err(e) = cg.delegate(ids.user_host.0, ids.user_host.1) {
                cg.remove();
                return Err(LaunchError::Limits(e));
            }
            Ok(Some(cg))
        }
        Err(e) if limits.best_effort => {
            eprintln!(
                "sandbox-agent launcher: warning: no resource limits for this session \
                 (best effort): {e}"
            );
            Ok(None)
        }
        Err(e) => Err(LaunchError::Limits(e)),
    }
}

fn read_config(path: &Path) -> Result<LaunchConfig, LaunchError> {
    let text = std::fs::read_to_string(path).map_err(|source| LaunchError::ReadConfig {
        path: path.to_path_buf(),
        source,
    })?;
    let config: LaunchConfig =
        serde_json::from_str(&text).map_err(|e| LaunchError::Config(e.to_string()))?;
    config.validate()?;
    Ok(config)
}

/// How a supervised sandbox ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ended {
    /// The init's exit code (128+N for a signal).
    pub code: i32,
    /// What ended it first.
    pub cause: Cause,
    /// The lifeline closed at some point: the orchestrator is gone or asked for teardown.
    pub released: bool,
}

/// Why supervision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    /// The init ended on its own: the agent, or the one-shot command, is done.
    Exited,
    /// The lifeline closed: the orchestrator is gone or asked for teardown.
    Released,
    /// A termination signal (SIGTERM, SIGINT, SIGHUP) came to this process.
    Signalled,
    /// The deadline passed.
    TimedOut,
    /// The one-shot output could not be written (the reader went away).
    OutputFailed,
}

fn state_err(path: &Path) -> impl Fn(std::io::Error) -> LaunchError + '_ {
    move |source| LaunchError::State {
        path: path.to_path_buf(),
        source,
    }
}

fn run_session(
    cfg: &LaunchConfig,
    watch: Watch<'_>,
    cgroup: Option<&SessionCgroup>,
    mount_ns: &mut Option<OwnedFd>,
    oneshot: Option<super::oneshot::Fds>,
    init_io: InitIo,
) -> Result<Ended, LaunchError> {
    let ids = IdPlan::new(
        &cfg.session_id,
        cfg.uid_base,
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let ws = &cfg.workspace;
    // Edit deny rules bind the kernel as read-only paths, with placeholders where missing;
    // so do the git control files of every git dir already there.
    let mut workspace = trees::prepare(
        ws,
        &cfg.state_dir,
        cfg,
        &ids,
        denied::write_entries(ws, &cfg.denied_write)?,
        &cfg.masked,
    )?;
    workspace.plan.hidden = denied::hidden(ws, &cfg.denied_read)?;
    // The additional directories: the same protections, each tree its own records.
    let additional = trees::prepare_additional(cfg, &ids)?;
    let sock = cfg.socket_dir();
    std::fs::create_dir(&sock).map_err(state_err(&sock))?;
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o700))
        .map_err(state_err(&sock))?;
    // The agent binds its socket here as the sandbox user.
    std::os::unix::fs::chown(&sock, Some(ids.user_host.0), Some(ids.user_host.1))
        .map_err(state_err(&sock))?;
    // Cordon's caches likewise: their owner (the user running Cordon) appears as the
    // sandbox user, so commands can fill them.
    let writable_trees = if ids.privileged() {
        cfg.host
            .writable
            .iter()
            .map(|dir| {
                let meta = std::fs::metadata(dir).map_err(state_err(dir))?;
                trees::idmapped_for_sandbox(dir, (meta.uid(), meta.gid()), &ids)
            })
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    // Seeded caches the same way: the host's cache (read-only) and Cordon's layers, each
    // with its owner shown as the sandbox user, so the overlay's copy-up (which keeps a
    // file's owner) lands in Cordon's layer as the user's file.
    let seeded_trees = if ids.privileged() {
        cfg.host
            .seeded
            .iter()
            .map(|seed| seeded_trees(seed, &ids))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let pipe = || {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| LaunchError::Clone(e.into()))
    };
    let (go_r, go_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (alive_r, alive_w) = pipe()?;
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWCGROUP;
    let entry = cgroup
        .map(SessionCgroup::entry)
        .transpose()
        .map_err(LaunchError::Limits)?;
    let (ret, born_inside) = clone_init(flags, entry.as_ref())?;
    if ret == 0 {
        let mut close: Vec<RawFd> = vec![go_w.as_raw_fd(), err_r.as_raw_fd(), alive_w.as_raw_fd()];
        close.extend(watch.lifeline);
        close.extend(
            watch
                .relay
                .as_ref()
                .map_or(Vec::new(), |r| r.fds().to_vec()),
        );
        close.extend(&init_io.close);
        close.extend(
            entry
                .as_ref()
                .and_then(|e| e.v2.as_ref())
                .map(AsRawFd::as_raw_fd),
        );
        child::run(ChildCtx {
            cgroup_tasks: entry.as_ref().map_or(&[], |e| e.v1_tasks.as_slice()),
            config: cfg,
            ids,
            workspace: &workspace,
            additional: &additional,
            writable_trees: &writable_trees,
            seeded_trees: &seeded_trees,
            exec_cgroup: cgroup.and_then(|c| c.exec_dir()),
            go: go_r,
            errors: err_w,
            alive: alive_r,
            close,
            stderr: init_io.stderr,
            oneshot,
        });
    }
    let init = Pid::from_raw(ret);
    // For a reaper that must know when no process of the session is left (see
    // state::reap): the init, whose death ends every other.
    if let Err(e) = state::write_init_file(&cfg.state_dir, init.as_raw()) {
        tracing::warn!(error = %e, "recording the sandbox's init");
    }
    // The launcher's copies of the one-shot pipes go too: their ends are the sandbox's.
    drop((
        oneshot,
        go_r,
        err_w,
        alive_r,
        workspace,
        additional,
        entry,
        writable_trees,
        seeded_trees,
    ));
    // Into the session's cgroup before the init runs anything: every process of the
    // sandbox is born inside the limits. Born inside already, the init joins the v1
    // parts itself as its first step (no move of a whole process, see `clone_init`).
    if !born_inside
        && let Some(cg) = cgroup
        && let Err(e) = cg.attach(init.as_raw())
    {
        let _ = kill(init, Signal::SIGKILL);
        let _ = waitpid(init, None);
        return Err(LaunchError::Limits(e));
    }
    if let Err(e) = userns::write_maps(init, &ids.uid_map(), &ids.gid_map(), ids.privileged()) {
        let _ = kill(init, Signal::SIGKILL);
        let _ = waitpid(init, None);
        return Err(e);
    }
    // Only an overlay with a disk upper layer makes the namespace's end slow to wait for.
    if !cfg.host.seeded.is_empty() {
        *mount_ns = super::linger::hold(init);
    }
    File::from(go_w)
        .write_all(&[1])
        .map_err(LaunchError::Supervise)?;
    let ended = supervise(init, err_r, watch);
    drop(alive_w);
    ended
}

/// The idmapped trees of one seeded cache: the host's cache, read-only, and Cordon's
/// layers directory, each idmapped from its own owner to the sandbox user.
fn seeded_trees(
    seed: &super::host_view::SeededCache,
    ids: &IdPlan,
) -> Result<(OwnedFd, OwnedFd), LaunchError> {
    let owner = |dir: &Path| {
        std::fs::metadata(dir)
            .map(|m| (m.uid(), m.gid()))
            .map_err(state_err(dir))
    };
    let lower_ns = userns::for_owner(owner(&seed.lower)?, ids.user_host)?;
    let lower =
        super::mounts::detached_clone(&seed.lower, true, Some(&lower_ns)).map_err(|source| {
            LaunchError::Idmap {
                path: seed.lower.clone(),
                source,
            }
        })?;
    let layers = trees::idmapped_for_sandbox(&seed.layers, owner(&seed.layers)?, ids)?;
    Ok((lower, layers))
}

/// Clones the sandbox's init with `flags`. With the session's cgroup, the init is born in
/// its v2 part (`clone3(CLONE_INTO_CGROUP)`) and joins the v1 parts by writing `0` to
/// their `tasks` as its first step, while it has one thread: neither takes the kernel's
/// global threadgroup lock for writing, whose RCU grace period a `cgroup.procs` move of
/// the init would wait for (1 to 11 ms measured). Returns the pid (0 in the child) and
/// whether the child joins the session itself; where clone3 is refused, a plain clone
/// and the caller's move instead.
fn clone_init(
    flags: libc::c_int,
    entry: Option<&crate::cgroup::session::Entry>,
) -> Result<(libc::pid_t, bool), LaunchError> {
    if let Some(entry) = entry {
        let into = entry.v2.as_ref().map(AsRawFd::as_raw_fd);
        // SAFETY: this process is single-threaded; the child continues here with 0.
        match unsafe { sys::clone3(flags as u64, into) } {
            Ok(pid) => return Ok((pid, true)),
            Err(e) => tracing::info!(error = %e, "clone3 refused; cloning, then moving the init"),
        }
    }
    // SAFETY: clone without CLONE_VM and with a null stack behaves like fork: the child
    // gets a copy of this single-threaded process and continues here with 0.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if ret < 0 {
        return Err(LaunchError::Clone(std::io::Error::last_os_error()));
    }
    let pid = libc::pid_t::try_from(ret)
        .map_err(|_| LaunchError::Clone(std::io::Error::from_raw_os_error(libc::ERANGE)))?;
    Ok((pid, false))
}

/// Waits for the init to exit; kills it when the lifeline closes, a termination signal
/// arrives, the deadline passes or the relayed output cannot be written. Relays setup
/// errors from the init to the caller, and a one-shot run's output to this process's
/// standard streams.
fn supervise(init: Pid, errors: OwnedFd, watch: Watch<'_>) -> Result<Ended, LaunchError> {
    let Watch {
        lifeline,
        mut relay,
        deadline,
    } = watch;
    let mask = termination_signals();
    mask.thread_block()
        .map_err(|e| LaunchError::Supervise(e.into()))?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|e| LaunchError::Supervise(e.into()))?;
    // SAFETY: pidfd_open takes a pid and flags; the returned fd is wrapped at once.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, init.as_raw(), 0) };
    if raw < 0 {
        let e = std::io::Error::last_os_error();
        let _ = kill(init, Signal::SIGKILL);
        return Err(LaunchError::Supervise(e));
    }
    let raw = RawFd::try_from(raw)
        .map_err(|_| LaunchError::Supervise(std::io::Error::from_raw_os_error(libc::EBADF)))?;
    // SAFETY: raw is a fresh pidfd owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut errors = Some(File::from(errors));
    let mut message = Vec::new();
    let mut lifeline = lifeline;
    let mut released = false;
    // The first reason to kill the init, once it is given.
    let mut cause = None;
    let stop = |why: Cause, cause: &mut Option<Cause>| {
        if cause.is_none() {
            *cause = Some(why);
            let _ = kill(init, Signal::SIGKILL);
        }
    };
    loop {
        let outputs = relay.as_ref().map_or([-1; 3], |r| r.fds());
        let mut fds = vec![
            pollfd(pidfd.as_raw_fd()),
            pollfd(sigfd.as_raw_fd()),
            pollfd(errors.as_ref().map_or(-1, |f| f.as_raw_fd())),
            pollfd(lifeline.unwrap_or(-1)),
        ];
        fds.extend(outputs.map(pollfd));
        let timeout = match deadline {
            Some(_) if cause.is_some() => -1,
            Some(d) => {
                let left = d.saturating_duration_since(std::time::Instant::now());
                // Rounded up, so a wait never ends just before the deadline.
                libc::c_int::try_from(left.as_millis() + 1).unwrap_or(libc::c_int::MAX)
            }
            None => -1,
        };
        // SAFETY: fds is a valid array of pollfds; negative fds are ignored by poll.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            let _ = kill(init, Signal::SIGKILL);
            return Err(LaunchError::Supervise(e));
        }
        if fds[0].revents != 0 {
            // The init's error may be in the pipe yet: the same poll can report its exit
            // and the error it wrote just before, and the exit is looked at first.
            if let Some(f) = errors.take() {
                drain_nonblocking(f, &mut message);
            }
            let code = match waitpid(init, None) {
                Ok(WaitStatus::Exited(_, c)) => c,
                Ok(WaitStatus::Signaled(_, s, _)) => 128 + s as i32,
                _ => 1,
            };
            // Every process of the sandbox died with its init: what they wrote is all
            // in the pipes now.
            if let Some(r) = relay.as_deref_mut() {
                r.drain();
            }
            if !message.is_empty() {
                return Err(LaunchError::Setup(
                    String::from_utf8_lossy(&message).into_owned(),
                ));
            }
            let cause = cause.unwrap_or(Cause::Exited);
            return Ok(Ended {
                code,
                cause,
                released,
            });
        }
        if fds[1].revents != 0 {
            let _ = sigfd.read_signal();
            tracing::info!("termination signal: ending the sandbox");
            stop(Cause::Signalled, &mut cause);
        }
        if fds[2].revents != 0
            && let Some(f) = errors.as_mut()
        {
            let mut buf = [0u8; 4096];
            match f.read(&mut buf) {
                Ok(0) | Err(_) => errors = None,
                Ok(k) => message.extend_from_slice(&buf[..k]),
            }
        }
        if fds[3].revents != 0 {
            // Any event on the lifeline (EOF, error) means the orchestrator let go.
            tracing::info!("lifeline closed: ending the sandbox");
            lifeline = None;
            released = true;
            stop(Cause::Released, &mut cause);
        }
        if let Some(r) = relay.as_deref_mut() {
            for (i, fd) in fds[4..].iter().enumerate() {
                if fd.revents != 0 && !r.ready(i) {
                    stop(Cause::OutputFailed, &mut cause);
                }
            }
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            stop(Cause::TimedOut, &mut cause);
        }
    }
}

/// The signals that end a sandbox when they come to its launcher: SIGTERM, SIGINT and
/// SIGHUP, read from a signalfd (so blocked) while it supervises.
pub(super) fn termination_signals() -> SigSet {
    let mut set = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(sig);
    }
    set
}

/// Reads what `f` holds now, to its end or until it would block (a process other than
/// the dead init could still hold the write end: never wait for it).
fn drain_nonblocking(mut f: File, out: &mut Vec<u8>) {
    let _ = nix::fcntl::fcntl(
        &f,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    );
    let mut buf = [0u8; 4096];
    while let Ok(k) = f.read(&mut buf) {
        if k == 0 {
            break;
        }
        out.extend_from_slice(&buf[..k]);
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_init_that_wrote_its_error_and_died_at_once_is_reported_with_it() {
        let (r, w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child only writes to a pipe and calls _exit (async-signal-safe; no
        // allocation, no locks after the fork of this multi-threaded test process).
        let child = match unsafe { nix::unistd::fork() }.unwrap() {
            // SAFETY: as above: a write to a pipe this process made, then _exit.
            nix::unistd::ForkResult::Child => unsafe {
                let msg = b"cannot start x";
                libc::write(w.as_raw_fd(), msg.as_ptr().cast(), msg.len());
                libc::_exit(1)
            },
            nix::unistd::ForkResult::Parent { child } => child,
        };
        drop(w);
        // Both at once, as a loaded machine delivers them: the init is dead (not yet
        // reaped) and its error waits in the pipe.
        nix::sys::wait::waitid(
            nix::sys::wait::Id::Pid(child),
            nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
        )
        .unwrap();
        match supervise(child, r, Watch::default()) {
            Err(LaunchError::Setup(m)) => assert_eq!(m, "cannot start x"),
            Err(e) => panic!("another error: {e}"),
            Ok(ended) => panic!("the error was lost (exit {})", ended.code),
        }
    }
}
