//! Network egress end to end, on a private internet the tests build (network and mount
//! namespaces, a veth interface, HTTP and DNS servers of their own): the proxy's
//! decisions, and a sandbox whose only way out is that proxy. Never the real network.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "network/broker.rs"]
mod broker;
#[path = "network/docker.rs"]
mod docker;
#[path = "network/mcp.rs"]
mod mcp;
#[path = "network/proxy.rs"]
mod proxy;
#[path = "network/sandbox.rs"]
mod sandbox;
#[path = "network/tools.rs"]
mod tools;
#[path = "network/web.rs"]
mod web;
