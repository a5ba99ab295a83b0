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

use sandbox_agent::affinity;

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
