//! The egress policy's types live with the agent, which needs the same decisions for its
//! DNS stub ([`sandbox_agent::egress::policy`]); re-exported here for the orchestrator.

pub use sandbox_agent::egress::policy::*;
