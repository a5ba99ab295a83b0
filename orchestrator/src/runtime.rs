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
//! The team server (`cordon serve`) keeps a worker per core: it serves many sessions.

/// The runtime for one session's command.
pub fn for_one_session() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
}
