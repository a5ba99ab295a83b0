//! MCP servers: the client side of the Model Context Protocol, with rmcp.
//!
//! # Layout
//!
//! - [`config`]: which servers a session gets (`.mcp.json` when trusted or approved, the
//!   settings' `mcpServers`), `${VAR}` expansion ([`expand`]).
//! - [`pipe`]: a stdio server runs inside the session's sandbox; its stdin and stdout are
//!   carried over the agent's interactive exec stream into rmcp's read/write transport.
//! - [`http`]: Streamable HTTP servers, reached from the orchestrator with their headers,
//!   under the session's egress policy.
//! - [`server`]: one server's life: start, list tools, call with a time limit, restart
//!   on the next call after a crash, a hang or garbage.
//! - [`tool`]: each server tool as a [`crate::tools::Tool`] named `mcp__<server>__<tool>`.
//! - [`McpSet`] (here): a session's servers, connected at start, reported by `mcp_status`.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(settings: cordon::settings::Settings, ctx: cordon::tools::ToolContext) {
//! use cordon::mcp::McpSet;
//! let mut tools = cordon::tools::ToolRegistry::default_tools();
//! let mcp = McpSet::for_session(&settings, ctx.workspace(), None);
//! mcp.connect_into(&ctx, &mut tools).await; // adds mcp__<server>__<tool> tools
//! println!("{}", mcp.status());
//! # }
//! ```

pub mod config;
pub mod expand;
pub mod http;
pub mod pipe;
pub mod server;
pub mod tool;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::network::proxy::dial::Dialer;
use crate::settings::Settings;
use crate::tools::{ToolContext, ToolRegistry};
pub use config::{McpConfig, ServerConfig, Transport};
pub use server::{McpServer, Status, Timeouts};

/// A session's MCP servers.
#[derive(Clone, Default)]
pub struct McpSet {
    servers: Vec<Arc<McpServer>>,
    refused: Vec<config::Refused>,
}

impl McpSet {
    /// The servers `settings` configure for `workspace`, variables from Cordon's
    /// environment, time limits from `MCP_TIMEOUT` / `MCP_TOOL_TIMEOUT`; HTTP servers are
    /// reached under `egress`, the session's policy (none: not at all).
    pub fn for_session(settings: &Settings, workspace: &Path, egress: Option<Dialer>) -> Self {
        let cfg = config::load(settings, workspace, &|name| std::env::var(name).ok());
        Self::new(cfg, Timeouts::from_env(), egress)
    }

    pub fn new(cfg: McpConfig, timeouts: Timeouts, egress: Option<Dialer>) -> Self {
        for r in &cfg.refused {
            tracing::warn!(server = %r.name, scope = r.scope, "MCP server not started: {}", r.why);
        }
        Self {
            servers: cfg
                .servers
                .into_iter()
                .map(|c| Arc::new(McpServer::new(c, timeouts, egress.clone())))
                .collect(),
            refused: cfg.refused,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.refused.is_empty()
    }

    pub fn servers(&self) -> &[Arc<McpServer>] {
        &self.servers
    }

    /// Starts every server at once and registers the tools of those that came up. A
    /// server that fails is reported (stderr log, `mcp_status`) and offers no tools;
    /// the session goes on without it.
    pub async fn connect_into(&self, ctx: &ToolContext, tools: &mut ToolRegistry) {
        let started = futures::future::join_all(self.servers.iter().map(|s| s.connect(ctx))).await;
        for (server, result) in self.servers.iter().zip(started) {
            match result {
                Ok(defs) => {
                    for def in &defs {
                        tools.register(Arc::new(tool::McpTool::new(server.clone(), def)));
                    }
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
    }

    /// The `mcp_status` answer: each server with its status, scope and tools.
    pub fn status(&self) -> Value {
        let mut list: Vec<Value> = self
            .servers
            .iter()
            .map(|s| {
                let (status, error, defs) = s.snapshot();
                let mut v = json!({
                    "name": s.name(),
                    "status": status,
                    "scope": s.config.scope,
                    "tools": defs.iter().map(|d| tool::full_name(s.name(), &d.name)).collect::<Vec<_>>(),
                });
                if let Some(e) = error {
                    v["error"] = Value::from(e);
                }
                v
            })
            .collect();
        list.extend(self.refused.iter().map(
            |r| json!({"name": r.name, "status": "disabled", "scope": r.scope, "error": r.why}),
        ));
        json!({ "mcpServers": list })
    }

    /// `[{name, status}]` for the stream-json init record.
    pub fn init_entries(&self) -> Vec<Value> {
        self.status()["mcpServers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| json!({"name": s["name"], "status": s["status"]}))
            .collect()
    }

    /// Stops every server (the session ends).
    pub async fn stop_all(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.stop())).await;
    }
}
