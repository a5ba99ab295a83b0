//! The Cordon sandbox agent and its RPC contract.
//!
//! # Layout
//!
//! - [`proto`]: the generated gRPC types and service (from `proto/cordon/agent/v1/agent.proto`),
//!   the one contract both sides compile against.
//! - [`limits`]: every size limit and default of the protocol, in one place.
//! - [`error`]: [`AgentError`], the typed error every operation returns, and its mapping to
//!   and from gRPC statuses (the one function that decides what goes on the wire).
//! - [`client`]: [`client::AgentClient`], what the orchestrator uses: connect over a Unix
//!   socket, handshake, typed calls with deadlines.
//! - [`server`]: the agent's service: handshake gate, single controller, dispatch.
//! - [`fsops`]: read, write and edit beneath the allowed roots, never following a link out.
//! - [`search`]: glob and grep in-process with ripgrep's libraries.
//! - [`exec`]: running commands in their own process group, output capping, timeouts.
//! - [`confine`]: Landlock, seccomp, rlimits and the confinement report.
//! - [`hostgit`]: the one hardened way Cordon runs git on the host.
//! - [`beneath`]: host-side reads and changes of workspace files beneath a held directory,
//!   never through a link (prompt files, settings, rewind, run-state cleanup).
//! - [`cgroup`]: session cgroups (limits) and per-command cgroups (the kill that cannot be outrun).
//! - [`egress`]: the loopback bridge to the egress proxy, the DNS stub, the shared policy.
//! - [`launch`]: the local backend's namespace launcher (user, mount, pid, ipc, uts, net).
//! - [`affinity`]: a session's round trip on one CPU (its two waiting ends pinned, nothing else).
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), sandbox_agent::error::AgentError> {
//! use sandbox_agent::client::AgentClient;
//! let mut agent = AgentClient::connect_unix("/run/cordon/s1/agent.sock").await?;
//! let file = agent.read("/work/project/src/main.rs", 0, 0).await?;
//! println!("{}", file.content);
//! # Ok(()) }
//! ```

pub mod affinity;
pub mod beneath;
pub mod cgroup;
pub mod client;
pub mod config;
pub mod confine;
pub mod egress;
pub mod error;
pub mod exec;
pub mod fsops;
pub mod hostgit;
pub mod hostside;
pub mod launch;
pub mod limits;
pub mod search;
pub mod server;

/// The generated protocol types.
#[allow(clippy::all, missing_docs, clippy::unwrap_used, clippy::expect_used)]
pub mod proto {
    tonic::include_proto!("cordon.agent.v1");
}

pub use error::{AgentError, ErrorCode};

/// The agent's own version, reported in the handshake.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");
