//! The session cgroup, made by the launcher on the host side before the sandbox starts.
//!
//! Where it goes: under a `cordon/` directory beside or below this process's own cgroup,
//! one directory per session (named by the session id) in every hierarchy that carries
//! a limit or the per-command kill:
//!
//! - v1 hierarchies: below this process's own cgroup (`<own>/cordon/<id>`), so the
//!   session stays inside whatever limits the host put on Cordon itself;
//! - the v2 hierarchy: below the *parent* of this process's cgroup when v2 carries
//!   controllers (v2 forbids enabling controllers for the children of a cgroup that holds
//!   processes, and this process's cgroup does), else below its own cgroup (a hybrid
//!   host's controller-less hierarchy, used only for `cgroup.kill`).
//!
//! As root every step is allowed. As another user it works exactly where the host
//! delegated a v2 subtree to that user (systemd `Delegate=yes`: the parent of this
//! process's cgroup is then the user's and has the controllers enabled); elsewhere
//! creation fails with a message that says so, and the launcher refuses to start the
//! session unless its limits are `best_effort`.
//!
//! Limits: memory with no swap beyond it, pids, CPU quota per 100 ms period.
//! Delegation: only the per-command parent (see [`super::slots`]) is handed to the
//! sandbox user: the directory (to make the command cgroups) and its `cgroup.procs` (v2
//! lets a process move between two cgroups only with write access to their common
//! ancestor's `cgroup.procs`). The limit files stay root's, so nothing inside can raise
//! a limit.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::layout::{Hierarchy, Layout};
use super::{CgroupError, KillMethod, PARENT_NAME, SessionLimits, io_err, parse_pids, write_file};

/// CPU quota period, in microseconds (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;
/// How long removal waits for the killed members of a cgroup to exit.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What a session cgroup enforces on this host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Enforced {
    pub memory: bool,
    /// Swap is capped too (v2 `memory.swap.max`, v1 `memory.memsw.*`; off when the
    /// kernel does no swap accounting).
    pub swap: bool,
    pub pids: bool,
    pub cpu: bool,
    /// How commands are killed, if the host allows per-command cgroups.
    pub exec_kill: Option<KillMethod>,
}

/// Where each part of a session's cgroup goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The v2 session dir, if v2 is used at all; whether it carries controllers.
    pub v2: Option<(PathBuf, bool)>,
    /// v1 session dirs by controller (co-mounted controllers share a dir).
    pub v1: Vec<(String, PathBuf)>,
}

const LIMIT_CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

impl Plan {
    /// Decides where the session `id` goes: each limit on v2 where v2 offers its
    /// controller, else on v1; the per-command kill on v2 where mounted, else on v1's
    /// freezer. Unavailable limits are named in the error.
    pub fn new(layout: &Layout, parent: &str, id: &str) -> Result<Plan, CgroupError> {
        let v2_ctls = layout.v2_controllers();
        let on_v2: Vec<&str> = LIMIT_CONTROLLERS
            .into_iter()
            .filter(|c| v2_ctls.iter().any(|v| v == c))
            .collect();
        let mut plan = Plan::default();
        let mut missing = Vec::new();
        for ctl in LIMIT_CONTROLLERS.into_iter().filter(|c| !on_v2.contains(c)) {
            match layout.v1(ctl) {
                Some(h) => plan
                    .v1
                    .push((ctl.to_string(), session_dir(h, false, parent, id))),
                None => missing.push(ctl),
            }
        }
        if !missing.is_empty() {
            return Err(CgroupError::Unavailable {
                what: format!("the {} limit", missing.join(", ")),
                why: "no cgroup hierarchy on this host offers that controller".into(),
            });
        }
        if let Some(h) = &layout.unified {
            plan.v2 = Some((
                session_dir(h, !on_v2.is_empty(), parent, id),
                !on_v2.is_empty(),
            ));
        } else if let Some(h) = layout.v1("freezer") {
            plan.v1
                .push(("freezer".into(), session_dir(h, false, parent, id)));
        }
        plan.v1.sort();
        plan.v1.dedup_by(|a, b| a.1 == b.1);
        Ok(plan)
    }

    /// Every session dir of the plan, the per-command one first.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.v2.iter().map(|(d, _)| d.clone()).collect();
        let freezer = self.v1.iter().filter(|(c, _)| c == "freezer");
        let others = self.v1.iter().filter(|(c, _)| c != "freezer");
        dirs.extend(freezer.chain(others).map(|(_, d)| d.clone()));
        dirs.dedup();
        dirs
    }

    fn v1_dir(&self, ctl: &str) -> Option<&Path> {
        self.v1
            .iter()
            .find(|(c, _)| c == ctl)
            .map(|(_, d)| d.as_path())
    }

    /// The dir of `ctl`'s limit files and whether it is on v2.
    fn limit_dir(&self, ctl: &str) -> Option<(&Path, bool)> {
        match self.v1_dir(ctl) {
            Some(d) => Some((d, false)),
            None => self
                .v2
                .as_ref()
                .filter(|(_, ctls)| *ctls)
                .map(|(d, _)| (d.as_path(), true)),
        }
    }
}

/// `<own or its parent>/<parent>/<id>` in `h`.
fn session_dir(h: &Hierarchy, beside_own: bool, parent: &str, id: &str) -> PathBuf {
    let base = if beside_own {
        h.own
            .parent()
            .map_or_else(|| h.mount.clone(), |p| h.mount.join(p))
    } else {
        h.own_dir()
    };
    base.join(parent).join(id)
}

/// Descriptors for joining a session's cgroup at birth (see [`SessionCgroup::entry`]).
#[derive(Debug)]
pub struct Entry {
    /// The v2 session directory, for `clone3(CLONE_INTO_CGROUP)`.
    pub v2: Option<std::fs::File>,
    /// Each v1 session directory's `tasks`, write-only.
    pub v1_tasks: Vec<std::fs::File>,
}

/// A session's cgroup, in every hierarchy that carries a part of it.
#[derive(Debug)]
pub struct SessionCgroup {
    plan: Plan,
    pub enforced: Enforced,
}

impl SessionCgroup {
    /// Makes the session cgroup `id` with `limits`, removing whatever it made on failure.
    pub fn create(
        layout: &Layout,
        id: &str,
        limits: &SessionLimits,
    ) -> Result<SessionCgroup, CgroupError> {
        Self::create_in(layout, PARENT_NAME, id, limits)
    }

    /// Like [`Self::create`], under `parent` instead of `cordon` (tests use their own).
    pub fn create_in(
        layout: &Layout,
        parent: &str,
        id: &str,
        limits: &SessionLimits,
    ) -> Result<SessionCgroup, CgroupError> {
        let plan = Plan::new(layout, parent, id)?;
        let mut made = SessionCgroup {
            plan,
            enforced: Enforced::default(),
        };
        match made.make(limits) {
            Ok(()) => Ok(made),
            Err(e) => {
                made.remove();
                Err(e)
            }
        }
    }

    fn make(&mut self, limits: &SessionLimits) -> Result<(), CgroupError> {
        if let Some((dir, true)) = &self.plan.v2 {
            enable_v2_controllers(dir)?;
        }
        for dir in self.plan.dirs() {
            // One call in the usual case (the parent is there, the id is new).
            match std::fs::create_dir(&dir) {
                Ok(()) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // A dead session of the same id: its cgroup is empty or about to be.
                    remove_dir_tree(&dir)?;
                }
                Err(_) => {}
            }
            // Twice: a concurrent removal of an empty parent may win the first race.
            std::fs::create_dir_all(&dir)
                .or_else(|_| std::fs::create_dir_all(&dir))
                .map_err(io_err("creating the cgroup", &dir))?;
        }
        self.write_limits(limits)?;
        self.enforced.exec_kill = self.exec_dir().map(|(_, k)| k);
        Ok(())
    }

    fn write_limits(&mut self, l: &SessionLimits) -> Result<(), CgroupError> {
        let missing = |what: &str| CgroupError::Unavailable {
            what: format!("the {what} limit"),
            why: "its controller is not enabled for Cordon's cgroup".into(),
        };
        let (mem, v2) = self
            .plan
            .limit_dir("memory")
            .ok_or_else(|| missing("memory"))?;
        let bytes = l.memory_bytes.to_string();
        if v2 {
            write_file(mem, "memory.max", &bytes)?;
            self.enforced.swap = write_file(mem, "memory.swap.max", "0").is_ok();
        } else {
            write_file(mem, "memory.limit_in_bytes", &bytes)?;
            // memsw counts memory plus swap: equal to the memory limit, no swap at all.
            self.enforced.swap = write_file(mem, "memory.memsw.limit_in_bytes", &bytes).is_ok();
        }
        self.enforced.memory = true;
        let (pids, _) = self.plan.limit_dir("pids").ok_or_else(|| missing("pids"))?;
        write_file(pids, "pids.max", &l.pids.to_string())?;
        self.enforced.pids = true;
        let (cpu, v2) = self.plan.limit_dir("cpu").ok_or_else(|| missing("cpu"))?;
        let quota = (l.cpu_millis * CPU_PERIOD_US / 1000).max(1000);
        if v2 {
            write_file(cpu, "cpu.max", &format!("{quota} {CPU_PERIOD_US}"))?;
        } else {
            write_file(cpu, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
            write_file(cpu, "cpu.cfs_quota_us", &quota.to_string())?;
        }
        self.enforced.cpu = true;
        Ok(())
    }

    /// The host dir the sandbox makes its per-command cgroups in, and how they are killed.
    pub fn exec_dir(&self) -> Option<(&Path, KillMethod)> {
        if let Some((dir, _)) = &self.plan.v2 {
            // cgroup.kill appeared in Linux 5.14; without it v2 offers no atomic kill.
            return dir
                .join("cgroup.kill")
                .exists()
                .then_some((dir.as_path(), KillMethod::CgroupKill));
        }
        self.plan
            .v1_dir("freezer")
            .map(|d| (d, KillMethod::Freezer))
    }

    /// Hands the per-command parent to the host uid/gid the sandbox user maps to.
    pub fn delegate(&self, uid: u32, gid: u32) -> Result<(), CgroupError> {
        let Some((dir, _)) = self.exec_dir() else {
            return Ok(());
        };
        for path in [dir.to_path_buf(), dir.join("cgroup.procs")] {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                .map_err(io_err("delegating", &path))?;
        }
        Ok(())
    }

    /// How a new process joins the session without a move that waits for an RCU grace
    /// period (see [`super::slots`]): born in the v2 part by `clone3(CLONE_INTO_CGROUP)`
    /// on `v2`, then it writes `0` to each of `v1_tasks` (v1 `tasks`, opened here by the
    /// caller so the permission check is the opener's) while it still has one thread.
    pub fn entry(&self) -> Result<Entry, CgroupError> {
        use std::os::unix::fs::OpenOptionsExt;
        let v2 = match &self.plan.v2 {
            Some((dir, _)) => Some(
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
                    .open(dir)
                    .map_err(io_err("opening", dir))?,
            ),
            None => None,
        };
        let mut v1_tasks = Vec::new();
        for (_, dir) in &self.plan.v1 {
            let path = dir.join("tasks");
            v1_tasks.push(
                std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(&path)
                    .map_err(io_err("opening", &path))?,
            );
        }
        Ok(Entry { v2, v1_tasks })
    }

    /// Moves process `pid` (with all its threads) into every part of the session.
    pub fn attach(&self, pid: i32) -> Result<(), CgroupError> {
        for dir in self.plan.dirs() {
            write_file(&dir, "cgroup.procs", &pid.to_string())?;
        }
        Ok(())
    }

    /// Kills whatever is left in the session and removes its cgroups. Failures are
    /// logged; a dir that stays is removed by a later sweep. The parent (`cordon`, one per
    /// hierarchy) stays for the next session: making and removing it each time was four
    /// more cgroup creations and removals per session.
    pub fn remove(&self) {
        for dir in self.plan.dirs() {
            if let Err(e) = remove_dir_tree(&dir) {
                tracing::warn!(error = %e, "session cgroup left behind");
            }
        }
    }

    /// The session's cgroup dirs (for reports and tests).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.plan.dirs()
    }

    /// Removes the cgroups of session `id` (a dead session found by a sweep).
    pub fn remove_by_id(layout: &Layout, id: &str) {
        if let Ok(plan) = Plan::new(layout, PARENT_NAME, id) {
            SessionCgroup {
                plan,
                enforced: Enforced::default(),
            }
            .remove();
        }
    }
}

/// Makes sure the v2 parent `<base>/cordon` of session `dir` hands memory, pids and cpu
/// on to its children: enables them in `base` (when missing) and in `cordon/`.
fn enable_v2_controllers(dir: &Path) -> Result<(), CgroupError> {
    let parent = dir.parent().ok_or_else(|| CgroupError::Unavailable {
        what: "limits".into(),
        why: format!("{} has no parent", dir.display()),
    })?;
    let base = parent.parent().unwrap_or(parent);
    std::fs::create_dir_all(parent).map_err(io_err("creating the cgroup", parent))?;
    for d in [base, parent] {
        let have = std::fs::read_to_string(d.join("cgroup.subtree_control")).unwrap_or_default();
        for ctl in LIMIT_CONTROLLERS {
            if !have.split_whitespace().any(|c| c == ctl) {
                write_file(d, "cgroup.subtree_control", &format!("+{ctl}")).map_err(|e| {
                    CgroupError::Unavailable {
                        what: format!("the {ctl} limit"),
                        why: format!("{e} (a non-root user needs a delegated cgroup subtree)"),
                    }
                })?;
            }
        }
    }
    Ok(())
}

/// Kills every process in `dir` and below, waits for them to exit, and removes the
/// cgroups depth first. Missing dirs are fine.
pub fn remove_dir_tree(dir: &Path) -> Result<(), CgroupError> {
    // The usual case, in one call: no process and no child cgroup is left (the kernel
    // refuses to remove a cgroup that has either), or it is gone already.
    match std::fs::remove_dir(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    kill_all_below(dir);
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    // Killed processes take a moment to exit: poll briefly first, then back off.
    let mut pause = Duration::from_micros(100);
    while populated(dir) && Instant::now() < deadline {
        kill_all_below(dir);
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
    rmdir_tree(dir)
}

fn children(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| parse_pids(&t))
        .unwrap_or_default()
}

fn populated(dir: &Path) -> bool {
    !members(dir).is_empty() || children(dir).iter().any(|c| populated(c))
}

/// SIGKILLs every process of `dir` and its descendants (cgroup.kill where there is one:
/// it reaches processes forked during the kill too). Called only once the sandbox's
/// init is dead, when nothing is left to fork; the per-command kill is [`super::slots`].
fn kill_all_below(dir: &Path) {
    if dir.join("cgroup.kill").exists() && write_file(dir, "cgroup.kill", "1").is_ok() {
        return;
    }
    for pid in members(dir) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    for child in children(dir) {
        kill_all_below(&child);
    }
}

fn rmdir_tree(dir: &Path) -> Result<(), CgroupError> {
    for child in children(dir) {
        rmdir_tree(&child)?;
    }
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io_err("removing the cgroup", dir)(e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
