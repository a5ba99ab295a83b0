//! Starting one command: its program and arguments, a clean environment, the working
//! directory, and the confined pre-exec setup. The only place the agent creates processes
//! (through [`super::clone_into`]: born in its own v2 cgroup, or the light way).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::Notify;

use super::clone_into::{self, CloneError, Prepared, Spawned};
use super::kill::{self, Entry, MARKER_ENV};
use crate::cgroup::slots::{self, Lease};
use crate::config::AgentConfig;
use crate::confine::{self, ChildFilter, ChildLimits};
use crate::error::{AgentError, ErrorCode};

/// PATH every command starts with.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The shell commands run with: bash where there is one, else sh.
pub fn find_shell() -> PathBuf {
    const CANDIDATES: [&str; 5] = [
        "/usr/local/bin/bash",
        "/usr/bin/bash",
        "/bin/bash",
        "/usr/bin/sh",
        "/bin/sh",
    ];
    CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// What to run.
#[derive(Debug, Clone)]
pub enum Program {
    /// A shell command; `cwd_file` receives the shell's final directory.
    Shell {
        shell: PathBuf,
        command: String,
        cwd_file: PathBuf,
    },
    /// An argv run directly.
    Argv(Vec<String>),
}

/// Everything needed to start one command.
#[derive(Debug)]
pub struct SpawnSpec {
    /// The command's own cgroup, entered before exec; `None` without delegation.
    pub slot: Option<Arc<Lease>>,
    pub owner: u64,
    pub exec_id: String,
    pub marker: String,
    pub program: Program,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub stdin: bool,
    pub limits: ChildLimits,
    /// Compiled before fork; installed in the child just before exec.
    pub child_filter: Arc<ChildFilter>,
}

/// A started command and its registry entry's handles.
#[derive(Debug)]
pub struct Started {
    pub child: Spawned,
    pub leader: i32,
    pub cancel: Arc<Notify>,
    pub cancelled: Arc<AtomicBool>,
}

/// Quotes `s` for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script the shell runs: an EXIT trap records the final directory (it runs after
/// `exit N` too and keeps the exit status), then the command itself.
pub fn shell_script(command: &str, cwd_file: &Path) -> String {
    let record = format!(
        "pwd -P >| {} 2>/dev/null",
        shell_quote(&cwd_file.to_string_lossy())
    );
    format!("trap {} EXIT\n{command}", shell_quote(&record))
}

/// The base environment: minimal and the same for every command; the agent's own
/// environment is never passed on.
pub fn base_env(home: &Path, tmp: &Path, shell: &Path) -> Vec<(String, String)> {
    let user = user_name();
    vec![
        ("PATH".into(), DEFAULT_PATH.into()),
        ("HOME".into(), home.display().to_string()),
        ("TMPDIR".into(), tmp.display().to_string()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("USER".into(), user.clone()),
        ("LOGNAME".into(), user),
        ("SHELL".into(), shell.display().to_string()),
    ]
}

/// The name of the user commands run as (its uid where the user database has none).
/// Remembered for the uid it was looked up for: each lookup reads `/etc/nsswitch.conf`
/// and `/etc/passwd`, a round trip each to the storage driver's daemon on a
/// fuse-overlayfs container. Keyed by uid, not once per process: the one-shot init is a
/// copy of a process that may have looked it up before it changed uid.
fn user_name() -> String {
    static NAME: std::sync::Mutex<Option<(u32, String)>> = std::sync::Mutex::new(None);
    let (uid, _) = confine::sys::uid_gid();
    let mut known = NAME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((for_uid, name)) = known.as_ref()
        && *for_uid == uid
    {
        return name.clone();
    }
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(user) => {
            let name = user.map_or_else(|| uid.to_string(), |u| u.name);
            *known = Some((uid, name.clone()));
            name
        }
        // A lookup that failed (out of descriptors, say) is not remembered: the next
        // command looks again.
        Err(_) => uid.to_string(),
    }
}

/// The backend's per-session variables (`command_env`) over the base, replacing a base
/// variable of the same name.
pub fn with_overrides(
    mut base: Vec<(String, String)>,
    overrides: &[(String, String)],
) -> Vec<(String, String)> {
    base.retain(|(k, _)| !overrides.iter().any(|(o, _)| o == k));
    base.extend(overrides.iter().cloned());
    base
}

/// Merges the request's variables over the base; the marker is set last so a request
/// cannot remove it.
pub fn merge_env(
    base: Vec<(String, String)>,
    extra: &HashMap<String, String>,
    marker: &str,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = base
        .into_iter()
        .filter(|(k, _)| !extra.contains_key(k))
        .collect();
    let mut extra: Vec<_> = extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    extra.sort();
    env.extend(extra);
    env.retain(|(k, _)| k != MARKER_ENV);
    env.push((MARKER_ENV.into(), marker.into()));
    env
}

/// The environment a command of `config` starts with: the base (its home and temp dir
/// the sandbox's tmp dir), the egress variables where the session has a way out, the
/// backend's `command_env` over those, the request's `extra` over everything, and the
/// marker last. The executor and the one-shot sandbox ([`crate::launch::oneshot`]) both
/// build it here, so a command sees the same environment either way.
pub fn command_env(
    config: &AgentConfig,
    shell: &Path,
    extra: &HashMap<String, String>,
    marker: &str,
) -> Vec<(String, String)> {
    let mut base = base_env(&config.tmp_dir, &config.tmp_dir, shell);
    if let Some(egress) = &config.egress {
        base.extend(egress.command_env());
    }
    merge_env(with_overrides(base, &config.command_env), extra, marker)
}

/// The command's argv as exec sees it.
fn argv_of(program: &Program) -> Vec<String> {
    match program {
        Program::Shell {
            shell,
            command,
            cwd_file,
        } => vec![
            shell.display().to_string(),
            "-c".into(),
            shell_script(command, cwd_file),
        ],
        Program::Argv(argv) => argv.clone(),
    }
}

/// Starts the command born in its slot's cgroup, when the slot is a v2 one and clone3
/// works here; `None`: start it the light way ([`spawn_light`]).
fn spawn_in_slot(spec: &SpawnSpec, prepared: &Prepared) -> Option<std::io::Result<Spawned>> {
    let cgroup = spec.slot.as_ref()?.cgroup_fd()?;
    if !clone_into::usable() {
        return None;
    }
    let (limits, filter) = (&spec.limits, &spec.child_filter);
    // The same confinement, in the same order after the cgroup, as the light way.
    let setup = || confine::child_setup(limits, filter);
    match clone_into::spawn(cgroup, prepared, &setup) {
        Ok(child) => Some(Ok(child)),
        Err(CloneError::Failed(e)) => Some(Err(e)),
        Err(CloneError::Unsupported(e)) => {
            tracing::info!(error = %e, "clone3 into a cgroup refused here; commands enter their cgroup by a write");
            None
        }
    }
}

/// Starts the command vfork-style; it enters its slot (if it has one) by a write first,
/// so every process it starts is born inside.
fn spawn_light(spec: &SpawnSpec, prepared: &Prepared) -> std::io::Result<Spawned> {
    let limits = spec.limits;
    let filter = &spec.child_filter;
    let cgroup = spec.slot.as_ref().map(|s| s.entry_fd());
    // Every CPU the agent was given. Spawns run on the blocking pool, which is never
    // pinned; this holds should one ever run on the serving thread.
    let cpus = crate::affinity::original();
    let setup = || {
        if let Some(fd) = cgroup {
            slots::enter(fd)?;
        }
        if let Some(cpus) = &cpus {
            crate::affinity::restore(cpus);
        }
        confine::child_setup(&limits, filter)
    };
    // SAFETY: `setup` makes only alloc-free system calls (write to the cgroup's entry
    // file, sched_setaffinity, setsid, setrlimit, close_range, seccomp) on data prepared
    // before the clone, and takes no lock (the filter is only read through the Arc, never
    // cloned or dropped in the child): what a child sharing this memory may do.
    unsafe { clone_into::spawn_light(prepared, &setup) }
}

fn spawn_child(spec: &SpawnSpec) -> std::io::Result<Spawned> {
    let prepared = Prepared::new(&argv_of(&spec.program), &spec.env, &spec.cwd, spec.stdin)?;
    if let Some(r) = spawn_in_slot(spec, &prepared) {
        return r;
    }
    spawn_light(spec, &prepared)
}

/// Forks and execs the command and registers it, holding the registry lock throughout so
/// the orphan reaper never sees the leader unregistered. Blocking (fork + exec).
pub fn spawn(spec: &SpawnSpec) -> Result<Started, AgentError> {
    let mut entries = kill::registry().lock();
    if entries.contains_key(&spec.exec_id) {
        return Err(AgentError::invalid(format!(
            "exec_id {:?} is already running; use a unique id per call",
            spec.exec_id
        )));
    }
    let child = spawn_child(spec).map_err(|e| {
        let what = match &spec.program {
            Program::Shell { shell, .. } => shell.display().to_string(),
            Program::Argv(argv) => argv[0].clone(),
        };
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => ErrorCode::NotFound,
            std::io::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
            _ => ErrorCode::Io,
        };
        AgentError::new(code, format!("cannot start {what}: {e}"))
    })?;
    let leader = child.pid;
    let cancel = Arc::new(Notify::new());
    let cancelled = Arc::new(AtomicBool::new(false));
    entries.insert(
        spec.exec_id.clone(),
        Entry {
            owner: spec.owner,
            leader,
            marker: spec.marker.clone(),
            slot: spec.slot.clone(),
            cancel: cancel.clone(),
            cancelled: cancelled.clone(),
        },
    );
    Ok(Started {
        child,
        leader,
        cancel,
        cancelled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
        // The script is valid shell even with a quote in the path: sh can parse it.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("it's");
        let script = shell_script("cd /", &file);
        assert!(script.ends_with("EXIT\ncd /"));
        let ok = Command::new("/bin/sh")
            .arg("-c")
            .arg(&script)
            .status()
            .unwrap();
        assert!(ok.success());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "/\n");
    }

    #[test]
    fn the_marker_cannot_be_overridden_and_extra_wins() {
        let mut extra = HashMap::new();
        extra.insert(MARKER_ENV.to_string(), "forged".to_string());
        extra.insert("PATH".to_string(), "/x".to_string());
        let env = merge_env(vec![("PATH".into(), "/bin".into())], &extra, "real");
        assert!(env.contains(&("PATH".into(), "/x".into())));
        assert!(!env.iter().any(|(_, v)| v == "/bin"));
        let markers: Vec<_> = env.iter().filter(|(k, _)| k == MARKER_ENV).collect();
        assert_eq!(markers, vec![&(MARKER_ENV.to_string(), "real".to_string())]);
    }
}
