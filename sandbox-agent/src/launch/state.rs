//! The session's host-side state dir (`$CORDON_HOME/run/<session>/`):
//!
//! - `launch.json`: the launch config (written by the orchestrator);
//! - `launcher.log`: the launcher's and agent's stderr;
//! - `launcher.pid`: pid and start time of the launcher, to tell live sessions from dead;
//! - `placeholders.json`: placeholders created for protected paths;
//! - `sock/`: bind-mounted at `/run/cordon` in the sandbox, owned by the sandbox uid;
//!
//! [`cleanup_session`] removes all of it (and the placeholders and the session's
//! cgroups); [`sweep_stale`] does so for every session whose launcher is gone.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::protected;

const PID_FILE: &str = "launcher.pid";

/// A process's start time (clock ticks since boot), to guard against pid reuse.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: skip past the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Records the calling process as this session's launcher.
pub fn write_pid_file(state_dir: &Path) -> std::io::Result<()> {
    let pid = std::process::id() as i32;
    let start = start_time(pid).unwrap_or(0);
    std::fs::write(state_dir.join(PID_FILE), format!("{pid} {start}\n"))
}

/// Whether the launcher recorded in `state_dir` still runs. `None`: no record.
pub fn launcher_alive(state_dir: &Path) -> Option<bool> {
    let text = std::fs::read_to_string(state_dir.join(PID_FILE)).ok()?;
    let mut it = text.split_whitespace();
    let pid: i32 = it.next()?.parse().ok()?;
    let start: u64 = it.next()?.parse().ok()?;
    Some(start_time(pid) == Some(start))
}

/// Removes the session's placeholders, its cgroups and its whole state dir (socket
/// included). Call only once the sandbox is gone. Idempotent.
pub fn cleanup_session(state_dir: &Path) {
    protected::remove_placeholders(state_dir);
    // The dir is named by the session id, which names its cgroups too.
    if let Some(id) = state_dir.file_name().and_then(|n| n.to_str())
        && super::valid_session_id(id)
        && let Ok(layout) = crate::cgroup::Layout::detect()
    {
        crate::cgroup::SessionCgroup::remove_by_id(&layout, id);
    }
    if let Err(e) = std::fs::remove_dir_all(state_dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %state_dir.display(), error = %e, "session state left behind");
    }
}

/// Cleans up after every session under `run_dir` whose launcher is dead (a crash, a
/// SIGKILL). Dirs without a pid file are left for a minute: a launcher may be starting.
pub fn sweep_stale(run_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let stale = match launcher_alive(&dir) {
            Some(alive) => !alive,
            None => entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > Duration::from_secs(60)),
        };
        if stale {
            tracing::info!(dir = %dir.display(), "cleaning up a dead session");
            cleanup_session(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_pid_is_alive_and_a_bogus_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        write_pid_file(dir.path()).unwrap();
        assert_eq!(launcher_alive(dir.path()), Some(true));
        std::fs::write(dir.path().join(PID_FILE), "1 1\n").unwrap();
        assert_eq!(launcher_alive(dir.path()), Some(false));
    }

    #[test]
    fn cleanup_removes_the_sessions_cgroups() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let id = format!("state-cleanup-test-{}", std::process::id());
        let layout = crate::cgroup::Layout::detect().unwrap();
        let limits = crate::cgroup::SessionLimits::default();
        let cg = crate::cgroup::SessionCgroup::create(&layout, &id, &limits).unwrap();
        let dirs = cg.dirs();
        assert!(dirs.iter().all(|d| d.exists()));
        let run = tempfile::tempdir().unwrap();
        let state = run.path().join(&id);
        std::fs::create_dir(&state).unwrap();
        cleanup_session(&state);
        assert!(!state.exists());
        for d in dirs {
            assert!(!d.exists(), "{} left behind", d.display());
        }
    }

    #[test]
    fn sweep_removes_dead_sessions_only() {
        let run = tempfile::tempdir().unwrap();
        let live = run.path().join("live");
        let dead = run.path().join("dead");
        std::fs::create_dir_all(live.join("sock")).unwrap();
        std::fs::create_dir_all(dead.join("sock")).unwrap();
        write_pid_file(&live).unwrap();
        std::fs::write(dead.join(PID_FILE), "1 1\n").unwrap();
        sweep_stale(run.path());
        assert!(live.exists());
        assert!(!dead.exists());
    }
}
