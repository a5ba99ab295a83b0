//! `cordon serve` end to end: the real binary on loopback, the local sandbox (Docker in
//! [`docker`]), the scripted model. Tenants apart, a turn's events and reconnecting with
//! Last-Event-ID, permissions answered over HTTP, exec and files, lifecycle, quotas,
//! malformed input, kill -9 (idle, and under load in [`crash`]), and the server image under
//! `deploy/compose.yaml` ([`deploy`]).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "server/crash.rs"]
mod crash;
#[path = "server/deploy.rs"]
mod deploy;
#[path = "server/docker.rs"]
mod docker;
#[path = "server/fixture.rs"]
mod fixture;
#[path = "server/lifecycle.rs"]
mod lifecycle;
#[path = "server/ops.rs"]
mod ops;
#[path = "server/robustness.rs"]
mod robustness;
#[path = "server/sandbox_calls.rs"]
mod sandbox_calls;
#[path = "server/tenants.rs"]
mod tenants;
#[path = "server/turns.rs"]
mod turns;
#[path = "server/web_page.rs"]
mod web_page;
