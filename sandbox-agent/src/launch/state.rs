//! The session's host-side state dir (`$CORDON_HOME/run/<session>/`):
//!
//! - `launch.json`: the launch config (written by the orchestrator);
//! - `launcher.log`: the launcher's and agent's stderr;
//! - `launcher.pid`: pid and start time of the launcher, to tell live sessions from dead;
//! - `init.pid`: pid and start time of the sandbox's init, for [`reap`];
//! - `placeholders.json`: placeholders created for protected paths;
//! - `git-guard.json`: the git dirs pinned at start and when, for the teardown vetting;
//! - `extra-<i>/`: the same two records for additional directory `i` (see
//!   [`super::trees`]);
//! - `sock/`: bind-mounted at `/run/cordon` in the sandbox, owned by the sandbox uid;
//!
//! [`cleanup_session`] removes all of it (and the placeholders and the session's
//! cgroups); [`sweep_stale`] does so for every session whose launcher is gone.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::protected;

const PID_FILE: &str = "launcher.pid";
const INIT_FILE: &str = "init.pid";
/// The launch config's file name in the state dir.
pub const LAUNCH_CONFIG: &str = "launch.json";

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
    write_private(
        &state_dir.join(PID_FILE),
        format!("{pid} {start}\n").as_bytes(),
    )
}

/// Records `pid` as the session's init.
pub fn write_init_file(state_dir: &Path, pid: i32) -> std::io::Result<()> {
    let start = start_time(pid).unwrap_or(0);
    write_private(
        &state_dir.join(INIT_FILE),
        format!("{pid} {start}\n").as_bytes(),
    )
}

/// How long [`reap`] waits for the session's init to be gone.
const REAP_WAIT: Duration = Duration::from_secs(10);

/// The teardown of a session whose launcher died mid-run, done by another process: the
/// in-process launcher's guardian execs it (`sandbox-agent --reap STATE_DIR`, see
/// [`super::inline`]) when the orchestrator it ran in was killed. Claims the state dir
/// (a sweep meanwhile sees a live launcher), waits until the session's init is gone (it
/// dies with the orchestrator, by its parent-death signal; killed here too), kills and
/// drains the session's cgroups, then sweeps, vets and cleans as [`sweep_stale`] does.
/// Returns the process exit code.
pub fn reap(state_dir: &Path) -> i32 {
    if !state_dir.is_dir() {
        return 0;
    }
    let _ = write_pid_file(state_dir);
    if let Some((pid, start)) = read_pid_pair(&state_dir.join(INIT_FILE)) {
        let deadline = std::time::Instant::now() + REAP_WAIT;
        while start_time(pid) == Some(start) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            if std::time::Instant::now() > deadline {
                eprintln!("sandbox-agent reaper: the sandbox's init {pid} outlived the wait");
                return 1;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    if let Some(id) = state_dir.file_name().and_then(|n| n.to_str())
        && super::valid_session_id(id)
        && let Ok(layout) = crate::cgroup::Layout::detect()
    {
        crate::cgroup::SessionCgroup::remove_by_id(&layout, id);
    }
    sweep_privilege_bits(state_dir);
    cleanup_session(state_dir);
    0
}

/// Writes `bytes` to `path`, a file of Cordon's data directory (run state, records),
/// creating it with mode 0600: only its user may read it. An existing file is truncated
/// and keeps its mode.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::PermissionsExt;
    // Never through a link (a planted one would redirect the write), and an existing,
    // more open file is narrowed before its new content goes in.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)
}

/// Whether the launcher recorded in `state_dir` still runs. `None`: no record.
pub fn launcher_alive(state_dir: &Path) -> Option<bool> {
    let (pid, start) = read_pid_pair(&state_dir.join(PID_FILE))?;
    Some(start_time(pid) == Some(start))
}

/// A `pid start` record.
fn read_pid_pair(path: &Path) -> Option<(i32, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut it = text.split_whitespace();
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Removes the session's placeholders and its whole state dir (socket included).
/// Call only once the sandbox is gone. Idempotent. Placeholders are removed only beneath
/// the workspace the state's launch config records; without one, they stay.
pub fn cleanup_session(state_dir: &Path) {
    // Each tree's git record and placeholders are acted on only beneath the tree the
    // launch config records for that state dir (the workspace, an additional directory).
    match recorded_config(state_dir) {
        Some(config) => {
            for (tree, state) in super::trees::all(&config) {
                if let Some(record) = super::gitvet::take_record(&state) {
                    super::gitvet::vet_recorded(&record, &tree);
                }
                protected::remove_placeholders(&state, &tree);
            }
        }
        None if !protected::load(state_dir).is_empty() => tracing::warn!(
            dir = %state_dir.display(),
            "placeholders left in place: the state records no workspace"
        ),
        None => {}
    }
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

/// The privilege-bit sweep for a session whose launcher never finished its own teardown
/// (killed after its grace, or found dead): every tree the state's launch config records
/// is swept, sparing files unchanged since the state dir was made (before the session
/// started; where the filesystem records no birth time, nothing is spared). Call once no
/// sandboxed process runs, before [`cleanup_session`]. Security: without it, a session
/// that made its teardown outlast the grace (a huge tree to walk) would skip the backstop
/// of "no privilege bits reach the host"; seccomp refusing the bits stays the first line.
pub fn sweep_privilege_bits(state_dir: &Path) {
    let Some(config) = recorded_config(state_dir) else {
        return;
    };
    let keep = crate::hostside::privbits::Keep::unchanged_since_creation_of(state_dir);
    for (tree, _) in super::trees::all(&config) {
        crate::hostside::privbits::sweep_and_log(&tree, keep);
    }
}

/// The launch config `state_dir` records (its workspace and additional directories),
/// with `state_dir` as its state dir whatever the file says.
fn recorded_config(state_dir: &Path) -> Option<super::LaunchConfig> {
    let text = std::fs::read(state_dir.join(LAUNCH_CONFIG)).ok()?;
    let mut config: super::LaunchConfig = serde_json::from_slice(&text).ok()?;
    config.state_dir = state_dir.to_path_buf();
    Some(config)
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
            sweep_privilege_bits(&dir);
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

    /// A launch config for a session on `workspace` kept in `state_dir`.
    fn write_launch_config(state_dir: &Path, workspace: &Path) {
        let config = serde_json::json!({
            "session_id": "s",
            "state_dir": state_dir,
            "workspace": workspace,
            "agent": {
                "socket_path": "/run/cordon/agent.sock",
                "workspace": workspace,
                "tmp_dir": "/tmp",
            },
        });
        std::fs::write(state_dir.join(LAUNCH_CONFIG), config.to_string()).unwrap();
    }

    /// A dead session's cleanup strips a setuid bit made in its workspace (the launcher
    /// that would have swept it is gone) and leaves a plain file's mode alone.
    #[test]
    fn a_dead_sessions_cleanup_strips_privilege_bits_it_left() {
        use std::os::unix::fs::PermissionsExt;
        let run = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let dead = run.path().join("dead");
        std::fs::create_dir_all(dead.join("sock")).unwrap();
        std::fs::write(
            dead.join(PID_FILE),
            "1 1
",
        )
        .unwrap();
        write_launch_config(&dead, &ws);
        let (planted, plain) = (ws.join("planted"), ws.join("plain"));
        for (f, mode) in [(&planted, 0o4755), (&plain, 0o640)] {
            std::fs::write(f, "x").unwrap();
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        sweep_stale(run.path());
        assert!(!dead.exists());
        let mode = |f: &Path| std::fs::metadata(f).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&planted), 0o755, "the setuid bit is gone");
        assert_eq!(mode(&plain), 0o640);
    }

    /// A tampered run state (placeholders.json naming host paths outside the recorded
    /// workspace, directly, by `..` or through a link in the workspace) deletes nothing
    /// there; the workspace's own placeholder still goes.
    #[test]
    fn a_tampered_state_file_cannot_delete_outside_the_workspace() {
        let run = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let outside = outside.path().canonicalize().unwrap();
        std::fs::write(outside.join("victim"), "").unwrap();
        std::fs::create_dir(outside.join("victim-dir")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
        std::fs::write(ws.join(".bashrc"), "").unwrap();
        let dead = run.path().join("dead");
        std::fs::create_dir_all(dead.join("sock")).unwrap();
        std::fs::write(dead.join(PID_FILE), "1 1\n").unwrap();
        write_launch_config(&dead, &ws);
        let up = format!(
            "../{}/victim",
            outside.file_name().unwrap().to_string_lossy()
        );
        let records = serde_json::json!([
            {"path": outside.join("victim"), "kind": "file"},
            {"path": outside.join("victim-dir"), "kind": "dir"},
            {"path": ws.join(up), "kind": "file"},
            {"path": ws.join("link/victim"), "kind": "file"},
            {"path": ws.join(".bashrc"), "kind": "file"},
        ]);
        std::fs::write(dead.join("placeholders.json"), records.to_string()).unwrap();
        sweep_stale(run.path());
        assert!(!dead.exists(), "the dead session is swept");
        assert!(outside.join("victim").exists());
        assert!(outside.join("victim-dir").exists());
        assert!(
            !ws.join(".bashrc").exists(),
            "the workspace's own placeholder went"
        );
    }

    /// A dead session's additional directory gets its placeholders removed from its own
    /// record (`extra-0/`), only beneath it: one that record names in the workspace stays.
    #[test]
    fn a_dead_sessions_additional_directory_is_cleaned_beneath_itself() {
        let run = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let extra = tempfile::tempdir().unwrap();
        let extra = extra.path().canonicalize().unwrap();
        std::fs::write(extra.join(".bashrc"), "").unwrap();
        std::fs::write(ws.join(".profile"), "").unwrap();
        let dead = run.path().join("dead");
        std::fs::create_dir_all(dead.join("extra-0")).unwrap();
        std::fs::write(dead.join(PID_FILE), "1 1\n").unwrap();
        let config = serde_json::json!({
            "session_id": "s",
            "state_dir": dead,
            "workspace": ws,
            "additional": [extra],
            "agent": {
                "socket_path": "/run/cordon/agent.sock",
                "workspace": ws,
                "tmp_dir": "/tmp",
            },
        });
        std::fs::write(dead.join(LAUNCH_CONFIG), config.to_string()).unwrap();
        let records = serde_json::json!([
            {"path": extra.join(".bashrc"), "kind": "file"},
            {"path": ws.join(".profile"), "kind": "file"},
        ]);
        std::fs::write(dead.join("extra-0/placeholders.json"), records.to_string()).unwrap();
        sweep_stale(run.path());
        assert!(!dead.exists());
        assert!(!extra.join(".bashrc").exists(), "its placeholder went");
        assert!(ws.join(".profile").exists(), "outside its directory: kept");
    }

    /// A launch config recording `/` as the workspace makes no path removable.
    #[test]
    fn a_state_recording_root_as_the_workspace_removes_nothing() {
        let run = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let outside = outside.path().canonicalize().unwrap();
        std::fs::write(outside.join("victim"), "").unwrap();
        let dead = run.path().join("dead");
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join(PID_FILE), "1 1\n").unwrap();
        write_launch_config(&dead, Path::new("/"));
        let records = serde_json::json!([{"path": outside.join("victim"), "kind": "file"}]);
        std::fs::write(dead.join("placeholders.json"), records.to_string()).unwrap();
        sweep_stale(run.path());
        assert!(outside.join("victim").exists());
    }
}
