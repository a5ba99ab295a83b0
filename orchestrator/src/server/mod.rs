//! `cordon serve`: the multi-tenant HTTP API server, and what operates it.
//!
//! - [`audit`]: the per-tenant hash-chained audit trail (`cordon audit verify`).
//! - [`metrics`]: the Prometheus registry behind `GET /metrics`.
//! - [`web`]: the page served at `/` (sessions, live transcript, approvals).

pub mod audit;
pub mod metrics;
pub mod web;
