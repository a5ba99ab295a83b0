//! Confinement of the agent and everything it starts: Landlock, seccomp, no_new_privs,
//! rlimits, and the report of what the kernel actually enforces.
//!
//! # Layout
//!
//! - [`landlock`]: the filesystem/network ruleset from `policies/landlock/default.json`.
//! - [`seccomp`]: the syscall filter from `policies/seccomp/default.json`.
//! - [`rlimits`]: per-child resource limits, applied between fork and exec.
//! - [`report`]: measuring namespaces, uid, no_new_privs and the seccomp mode.
//! - [`sys`]: the raw system calls, each behind a safe wrapper.
//!
//! The agent confines *itself* ([`confine_self`]) while still single-threaded, so every
//! thread and every child inherits the same Landlock domain and seccomp filter. Children
//! additionally get [`child_setup`] in their pre-exec hook: a new session, rlimits and
//! no inherited descriptors, all without allocating.

pub mod landlock;
pub mod names;
pub mod report;
pub mod rlimits;
pub mod seccomp;
pub mod sys;

use std::path::PathBuf;

use crate::config::AgentConfig;
use crate::proto::ConfinementReport;

pub use rlimits::ChildLimits;
pub use seccomp::ChildFilter;

/// A step of confinement that failed. With `best_effort` off, any missing layer is one.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("invalid seccomp policy: {0}")]
    SeccompPolicy(String),
    #[error("cannot compile the seccomp filter: {0}")]
    SeccompCompile(#[source] seccompiler::BackendError),
    #[error("cannot install the seccomp filter: {0}")]
    SeccompApply(#[source] seccompiler::Error),
    #[error("invalid landlock policy: {0}")]
    LandlockPolicy(String),
    #[error("cannot open {} for a landlock rule: {source}", path.display())]
    LandlockPath {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the landlock ruleset: {0}")]
    LandlockRuleset(#[source] ::landlock::RulesetError),
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(#[source] std::io::Error),
    #[error("cannot make the agent undumpable: {0}")]
    Undumpable(#[source] std::io::Error),
    #[error(
        "refusing to start: the kernel cannot enforce every layer ({0}); \
         set best_effort in the agent configuration to run with less"
    )]
    Incomplete(String),
}

/// `parse()` once per process, a copy of it after (the one-shot init confines itself and
/// compiles the children's filter from the same policies). A failure (an embedded policy
/// that does not parse: a bug of the build) is not kept: parsed again, it says so again.
fn parsed_once<T: Clone>(
    cell: &std::sync::OnceLock<Option<T>>,
    parse: impl Fn() -> Result<T, ConfineError>,
) -> Result<T, ConfineError> {
    match cell.get_or_init(|| parse().ok()) {
        Some(parsed) => Ok(parsed.clone()),
        None => parse(),
    }
}

/// The children-only filter matching what [`confine_self`] enforced: the compiled
/// children rules when the agent's own filter is installed, nothing when it is not (with
/// `best_effort`, a kernel without seccomp: the child could not install it either).
pub fn child_filter(
    config: &AgentConfig,
    report: &ConfinementReport,
) -> Result<ChildFilter, ConfineError> {
    if report.seccomp_mode == "disabled" {
        return Ok(ChildFilter::default());
    }
    seccomp::SeccompPolicy::default_policy()?
        .compile_children(config.network, sys::namespaces_capped())
}

/// Confines the calling (still single-threaded) process; returns what is enforced.
///
/// Order: parse and compile everything first (a policy error changes nothing), measure
/// the namespaces (needs the parent's /proc entries, which Landlock hides), set
/// no_new_privs, restrict with Landlock, then install the seccomp filter.
pub fn confine_self(config: &AgentConfig) -> Result<ConfinementReport, ConfineError> {
    let ll_policy = landlock::LandlockPolicy::default_policy()?;
    let sc_policy = seccomp::SeccompPolicy::default_policy()?;
    let capped = sys::namespaces_capped();
    let programs = sc_policy.compile(config.network, capped)?;
    let (namespaces, ns_note) = report::namespaces();

    let mut notes: Vec<String> = ns_note.into_iter().collect();
    if capped {
        notes.push(
            "every namespace count of this user namespace is capped at 0: clone3 is allowed \
             to the agent (commands start inside their cgroup) and refused to commands"
                .into(),
        );
    }
    let mut missing: Vec<String> = Vec::new();

    if let Err(e) = sys::set_no_new_privs() {
        return Err(ConfineError::NoNewPrivs(e));
    }
    // SECURITY: the agent (and the one-shot init) shares its uid with the commands it
    // runs, so while dumpable its /proc entries are theirs to open: `/proc/<agent>/mem`
    // written is the agent's wider seccomp and Landlock taken over, `/proc/<agent>/fd/N`
    // reopens what it holds (its listening socket, held directories), `environ` reads its
    // start-up environment. Undumpable, every ptrace-mode access to it needs
    // CAP_SYS_PTRACE, which no command has. Commands are not affected: exec makes each
    // dumpable again, as it is its own.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        return Err(ConfineError::Undumpable(e.into()));
    }
    let outcome = landlock::restrict_self(&ll_policy, config)?;
    if !outcome.skipped.is_empty() {
        let skipped: Vec<String> = outcome
            .skipped
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        notes.push(format!(
            "landlock policy paths absent here: {}",
            skipped.join(", ")
        ));
    }
    missing.extend(outcome.missing.iter().cloned());

    let seccomp_ok = match programs.apply() {
        Ok(()) => true,
        Err(e) if config.best_effort => {
            missing.push(format!("seccomp filter: {e}"));
            false
        }
        Err(e) => return Err(e),
    };
    if !missing.is_empty() && !config.best_effort {
        return Err(ConfineError::Incomplete(missing.join("; ")));
    }

    let mut report = ConfinementReport {
        landlock_abi: outcome.abi,
        landlock_fully_enforced: outcome.fully_enforced,
        namespaces,
        network_granted: config.network,
        best_effort: config.best_effort && !missing.is_empty(),
        ..Default::default()
    };
    report::measure(&mut report);
    if !seccomp_ok {
        report.seccomp_mode = "disabled".into();
    }
    notes.extend(missing.into_iter().map(|m| format!("not enforced: {m}")));
    report.notes = notes;
    Ok(report)
}

/// Alloc-free pre-exec setup of every child: its own session and process group (so the
/// whole group can be killed), rlimits, every descriptor above 2 closed on exec, and last
/// the children-only seccomp filter (an error here fails the spawn: no child starts
/// without it).
pub fn child_setup(limits: &ChildLimits, filter: &ChildFilter) -> std::io::Result<()> {
    sys::setsid()?;
    limits.apply()?;
    sys::close_fds_from(3)?;
    filter.install()
}

/// Runs `f` in a forked child and returns how the child ended. For tests that apply
/// irreversible, process-wide restrictions.
#[cfg(test)]
pub(crate) fn in_child(f: impl FnOnce() -> i32) -> nix::sys::wait::WaitStatus {
    use nix::unistd::{ForkResult, fork};
    // SAFETY: the child only runs `f` (test code that makes system calls and may allocate;
    // glibc's fork handlers keep malloc usable in the child) and then _exits without
    // running destructors or returning into the test harness.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
            // SAFETY: _exit ends the child immediately; nothing else runs in it.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => nix::sys::wait::waitpid(child, None).expect("waitpid"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Executor;
    use crate::proto::{ExecRequest, exec_event};
    use futures::StreamExt;
    use nix::sys::wait::WaitStatus;

    /// The whole chain in a forked child: confine_self, then real commands through the
    /// executor, which must still work (bash, coreutils, pipes, clone3 fallback) while
    /// escapes fail.
    #[test]
    fn a_confined_agent_still_runs_ordinary_commands() {
        if sys::landlock_abi() < 6 {
            eprintln!("skipping: landlock abi < 6");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let tmp = dir.path().join("tmp");
        let outside = dir.path().join("outside");
        for d in [&ws, &tmp, &outside] {
            std::fs::create_dir(d).unwrap();
        }
        let config = AgentConfig {
            socket_path: dir.path().join("s.sock"),
            workspace: ws.clone(),
            tmp_dir: tmp,
            extra_writable: vec![],
            extra_readable: Vec::new(),
            command_env: Vec::new(),
            protected_paths: vec![],
            network: false,
            egress: None,
            best_effort: false,
            rlimits: Default::default(),
            disk_budget_bytes: None,
            exec_cgroup: None,
            require_outside_peer: false,
        };
        let script = format!(
            "set -e; echo hi > made.txt; ls /usr >/dev/null; cat made.txt | tr a-z A-Z; \
             (echo sub) ; if touch {out}/x 2>/dev/null; then echo ESCAPED; fi; \
             if unshare -U true 2>/dev/null; then echo ESCAPED; fi; \
             if chmod 4755 made.txt 2>/dev/null; then echo ESCAPED; fi; echo end",
            out = outside.display()
        );
        let status = in_child(move || {
            let report = match confine_self(&config) {
                Ok(r) => r,
                Err(_) => return 10,
            };
            if report.seccomp_mode != "filter" || !report.no_new_privs {
                return 11;
            }
            if !report.landlock_fully_enforced || report.network_granted {
                return 12;
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let filter = child_filter(&config, &report).unwrap();
                let exec = Executor::new(&config).with_child_filter(filter);
                let cwd = std::sync::Arc::new(tokio::sync::Mutex::new(config.workspace.clone()));
                let req = ExecRequest {
                    exec_id: "e2e".into(),
                    command: script,
                    timeout_ms: 60_000,
                    ..Default::default()
                };
                let mut stream = exec.start(req, cwd).await.unwrap();
                let mut out = Vec::new();
                let mut code = None;
                while let Some(ev) = stream.next().await {
                    match ev.unwrap().event.unwrap() {
                        exec_event::Event::Output(c) => out.extend(c.data),
                        exec_event::Event::Exit(e) => code = e.code,
                    }
                }
                let out = String::from_utf8_lossy(&out).into_owned();
                if code == Some(0) && out.contains("HI\nsub\nend") && !out.contains("ESCAPED") {
                    0
                } else {
                    eprintln!("{code:?} {out}");
                    13
                }
            })
        });
        assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
        assert!(ws.join("made.txt").exists());
        assert!(!outside.join("x").exists());
    }
}
