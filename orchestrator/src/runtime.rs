//! The async runtime a command serving one session runs on (`cordon run`, `cordon sandbox
//! --via-agent`, `cordon demo`).
//!
//! One worker thread, of tokio's multi-thread scheduler (so `spawn_blocking` and the
//! blocking pool stay as they are): one session's async work is waiting (for the model's
//! stream, the agent's answers, a tool's output) and short bursts of parsing between, and
//! a second worker only adds wake-ups across threads to every round trip. Measured on the
//! 2-core machine (the agent_rpc bench, sections 1 and 2, this runtime beside a 2-worker
//! one in the same run): with one worker the trivial RPC takes 15 to 23% less, a Read 3
//! to 19% less at p50 and 19 to 37% at p99 (BENCHMARKS.md, ninth session). What is slow or
//! blocking runs on the blocking pool, never on the worker.
//!
//! Its two async threads (the one that calls `block_on`, and the worker) are pinned to the
//! CPU the caller runs on, and the session's agent serves on that CPU too
//! ([`sandbox_agent::affinity`]): a tool call's wake-ups then never cross CPUs. Every
//! other thread the runtime starts (the blocking pool) and every process a session starts
//! keeps all the CPUs the process was given.
//!
//! The team server (`cordon serve`) keeps a worker per core and pins nothing: it serves
//! many sessions.

use sandbox_agent::affinity;

/// The runtime for one session's command. Call `block_on` on the thread that built it:
/// that thread is pinned with the worker.
pub fn for_one_session() -> std::io::Result<tokio::runtime::Runtime> {
    let cpu = affinity::pin_here();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        // Every thread starts with the process's CPUs: the worker is pinned below, the
        // blocking pool (file work, forks, git) never is.
        .on_thread_start(affinity::unpin_current_thread)
        .build()?;
    if let Some(cpu) = cpu {
        // A spawned task runs on the one worker, never on the `block_on` thread. Both ends
        // or neither: a worker the kernel would not pin unpins this thread too.
        let pinned = runtime.block_on(runtime.spawn(async move { affinity::pin_to(cpu) }));
        if !matches!(pinned, Ok(Ok(()))) {
            affinity::unpin_current_thread();
        }
    }
    Ok(runtime)
}
