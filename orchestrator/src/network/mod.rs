//! Network egress (layer 4): which hosts a session may reach, and the proxy that is its
//! only way out.
//!
//! - [`policy`]: allow and deny entries in Claude Code's shape, and the decision for one
//!   host and port.
//! - [`layers`]: the policy from the merged settings (managed lock, untrusted repositories
//!   cannot widen).
//! - [`addresses`]: the address ranges the proxy never connects to after resolving a name
//!   (`policies/network-refused.json`).
//! - [`egress`]: a session's egress (policy, log) and the proxy a backend starts for it.
//! - [`proxy`]: the egress proxy (HTTP CONNECT, plain HTTP, SOCKS5) and its records.
//! - [`broker`]: brokered credentials: a host secret added by the proxy to requests for
//!   chosen domains (TLS terminated for those only).

pub mod addresses;
pub mod broker;
pub mod egress;
pub mod layers;
pub mod policy;

pub use egress::EgressSpec;
pub use policy::{Decision, DomainRule, NetworkPolicy};
pub mod proxy;
