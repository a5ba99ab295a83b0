//! The async runtime a command serving one session runs on (`cordon run`, `cordon sandbox
//! --via-agent`, `cordon demo`).
//!
//! One thread runs all of the session's async work: the caller's, which then calls
//! `block_on` (tokio's current-thread scheduler; `spawn_blocking` and the blocking pool are
//! as on the multi-thread one). One session's async work is waiting (for the model's
//! stream, the agent's answers, a tool's output) and short bursts of parsing between; a
//! second thread only adds a hand-over between threads to every round trip. What is slow
//! or blocking runs on the blocking pool, never on this thread.
//!
//! That thread is pinned to the CPU it runs on, and the session's agent serves on that CPU
//! too ([`sandbox_agent::affinity`]): a tool call's wake-ups then never cross CPUs. Every
//! other thread the runtime starts (the blocking pool) and every process a session starts
//! keeps all the CPUs the process was given.
//!
//! Measured on the 2-core machine (the agent_rpc bench, sections 1 and 2, side by side
//! with the same runtime unpinned; BENCHMARKS.md, thirteenth session). Before, one worker
//! of the multi-thread scheduler beside the `block_on` thread (ninth session: 15 to 23%
//! less than two workers for a trivial RPC).
//!
//! The team server (`cordon serve`) keeps a worker per core and pins nothing: it serves
//! many sessions.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use sandbox_agent::affinity;
use tokio::task::JoinHandle;

/// How long a session command's exit waits for the cleanup tasks handed to
/// [`finish_before_exit`] (a container's removal takes a fraction of a second).
const AT_EXIT_LIMIT: Duration = Duration::from_secs(10);

/// How long the exit waits for the blocking pool after that: not for a reader blocked
/// on stdin (stream-json input).
const SHUTDOWN_LIMIT: Duration = Duration::from_millis(100);

/// Cleanup tasks spawned from a `Drop` (a last resort when a handle was dropped without its
/// orderly end) that the command's exit must wait for: on this runtime a spawned task
/// runs only while `block_on` does, so one spawned as the session's future ends would
/// otherwise never run.
static AT_EXIT: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// The runtime for one session's command. Call `block_on` on the thread that built it:
/// that thread is pinned, and it is the one that runs the session.
pub fn for_one_session() -> std::io::Result<tokio::runtime::Runtime> {
    affinity::pin_here();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // A thread the runtime starts (the blocking pool: file work, forks, git) keeps
        // the process's CPUs, not the pin of the thread that spawned it.
        .on_thread_start(affinity::unpin_current_thread)
        .build()
}

/// Hands a last-resort cleanup task to the exit of a session command ([`finish`]). In a
/// process that never calls [`finish`] (the team server, whose runtime lives on) the task
/// runs as any other; finished ones are dropped from the list here.
pub fn finish_before_exit(task: JoinHandle<()>) {
    let mut tasks = AT_EXIT.lock().unwrap_or_else(PoisonError::into_inner);
    tasks.retain(|t| !t.is_finished());
    tasks.push(task);
}

/// Ends a session command's runtime: runs the cleanup tasks handed to
/// [`finish_before_exit`] to their end (at most [`AT_EXIT_LIMIT`]), then shuts down.
pub fn finish(runtime: tokio::runtime::Runtime) {
    let tasks = std::mem::take(&mut *AT_EXIT.lock().unwrap_or_else(PoisonError::into_inner));
    if !tasks.is_empty() {
        runtime.block_on(async {
            let _ = tokio::time::timeout(AT_EXIT_LIMIT, futures::future::join_all(tasks)).await;
        });
    }
    runtime.shutdown_timeout(SHUTDOWN_LIMIT);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// A value whose drop spawns its cleanup, as a backend handle's does.
    struct CleansOnDrop(Arc<AtomicBool>);

    impl Drop for CleansOnDrop {
        fn drop(&mut self) {
            let done = self.0.clone();
            finish_before_exit(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                done.store(true, Ordering::SeqCst);
            }));
        }
    }

    #[test]
    fn a_cleanup_spawned_as_the_session_ends_runs_before_the_exit() {
        std::thread::spawn(|| {
            let runtime = for_one_session().unwrap();
            let done = Arc::new(AtomicBool::new(false));
            let handle = CleansOnDrop(done.clone());
            // The handle is dropped as the session's future ends: its task has not run.
            runtime.block_on(async move { drop(handle) });
            assert!(!done.load(Ordering::SeqCst));
            finish(runtime);
            assert!(
                done.load(Ordering::SeqCst),
                "the cleanup ran before the exit"
            );
        })
        .join()
        .unwrap();
    }
}
