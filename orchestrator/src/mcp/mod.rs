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
//! - [`sdk`]: servers inside the Agent SDK client's process, reached through its
//!   connection (`mcp_message` control requests).
//! - [`tool`]: each server tool as a [`crate::tools::Tool`] named `mcp__<server>__<tool>`.
//! - [`sync`]: a loop's MCP tools rebuilt when a server's list changed (`list_changed`).
//! - [`McpSet`] (here): a session's servers, connected at start, reported by `mcp_status`.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(settings: cordon::settings::Settings, ctx: cordon::tools::ToolContext) {
//! use cordon::mcp::McpSet;
//! let mut tools = cordon::tools::ToolRegistry::default_tools();
//! let mcp = McpSet::for_session(&settings, ctx.workspace(), None, &[], &Default::default());
//! mcp.connect_into(&ctx, &mut tools).await; // adds mcp__<server>__<tool> tools
//! println!("{}", mcp.status());
//! # }
//! ```

pub mod config;
pub mod expand;
pub mod http;
pub mod listing;
pub mod pipe;
pub mod sdk;
pub mod server;
pub mod sync;
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

/// What of Cordon's own environment an MCP entry's `${VAR}` may read.
///
/// Why: an entry's expanded values go into a process inside the sandbox (a stdio server's
/// `env` and `args`) or out to a server (an HTTP entry's `url` and `headers`), so a lookup
/// is a read of Cordon's environment on the entry author's behalf. On a team server the
/// entries of a session's own settings are its API caller's: they read nothing of the
/// server's environment (its model key, an operator's tokens), only the tenant's managed
/// entries do, and an unset variable looks the same as one withheld, so the error names
/// no secret. The variables brokered credentials are read from are withheld from every
/// entry, whoever wrote it: they exist so that the value reaches no process of the
/// session.
#[derive(Debug, Clone, Default)]
pub struct ProcessVars {
    /// A server tenant's session: only managed entries read the environment.
    pub tenant: bool,
    /// Never read.
    pub withheld: Vec<String>,
}

/// Cordon's own model credentials: never read by an entry of the workspace's files
/// (`.mcp.json`, scope `project`; `.claude/settings.local.json`, scope `local`).
///
/// Security: even in a trusted workspace the entry is the repository's text, and its
/// `${ANTHROPIC_API_KEY}` in an HTTP header or a server's `env` would hand the user's key
/// to a URL or program the repository chose (trust is given for hooks and rules, read
/// from a list that shows an MCP entry by name). The user's own entries may still name them.
pub const MODEL_CREDENTIALS: [&str; 2] = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"];

impl ProcessVars {
    pub fn lookup(&self, scope: &str, name: &str) -> Option<String> {
        self.lookup_in(scope, name, |n| std::env::var(n).ok())
    }

    /// [`ProcessVars::lookup`] with `read` for the environment.
    fn lookup_in(
        &self,
        scope: &str,
        name: &str,
        read: impl Fn(&str) -> Option<String>,
    ) -> Option<String> {
        if self.withheld.iter().any(|w| w == name)
            || (self.tenant && scope != "managed")
            || (matches!(scope, "project" | "local") && MODEL_CREDENTIALS.contains(&name))
        {
            return None;
        }
        read(name)
    }
}

impl McpSet {
    /// The servers `settings` and `plugins` configure for `workspace`, variables from
    /// Cordon's environment as `vars` lets each scope read it, time limits from
    /// `MCP_TIMEOUT` / `MCP_TOOL_TIMEOUT`; HTTP servers are reached under `egress`, the
    /// session's policy (none: not at all).
    pub fn for_session(
        settings: &Settings,
        workspace: &Path,
        egress: Option<Dialer>,
        plugins: &[crate::plugins::Plugin],
        vars: &ProcessVars,
    ) -> Self {
        let env = |scope: &str, name: &str| vars.lookup(scope, name);
        let mut cfg = config::load(settings, workspace, &env);
        config::add_plugin_servers(&mut cfg, settings, workspace, plugins, &env);
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

    /// The same set with `more` servers (the client's SDK servers, known once its
    /// connection is up), and the servers they replace: a configured server of the same
    /// name gives way (the caller named its own server explicitly; a repository's
    /// `.mcp.json` must not take over the name of the caller's in-process tools).
    pub fn with_servers(mut self, more: Vec<Arc<McpServer>>) -> (Self, Vec<Arc<McpServer>>) {
        let mut replaced = Vec::new();
        for server in more {
            if let Some(at) = self.servers.iter().position(|s| s.name() == server.name()) {
                tracing::warn!(
                    server = %server.name(),
                    "the client's SDK server replaces the configured MCP server of this name"
                );
                replaced.push(std::mem::replace(&mut self.servers[at], server));
            } else {
                self.servers.push(server);
            }
        }
        (self, replaced)
    }

    fn find(&self, name: &str) -> Result<&Arc<McpServer>, String> {
        self.servers
            .iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| match self.refused.iter().find(|r| r.name == name) {
                Some(r) => format!("MCP server `{name}` was not started: {}", r.why),
                None => format!("there is no MCP server named `{name}`"),
            })
    }

    /// `mcp_toggle`: turns the server `name` off (its tools are no longer offered) or on.
    pub async fn toggle(&self, name: &str, enabled: bool, ctx: &ToolContext) -> Result<(), String> {
        let server = self.find(name)?;
        server
            .set_enabled(enabled, ctx)
            .await
            .map_err(|e| e.to_string())
    }

    /// The client's `mcp_message`: a message its in-process server `name` sent of its own
    /// accord, handed to that server's connection.
    pub async fn deliver(&self, name: &str, message: Value) -> Result<(), String> {
        self.find(name)?
            .deliver(message)
            .await
            .map_err(|e| e.to_string())
    }

    /// `mcp_reconnect`: connects the server `name` afresh.
    pub async fn reconnect(&self, name: &str, ctx: &ToolContext) -> Result<(), String> {
        self.find(name)?
            .reconnect(ctx)
            .await
            .map_err(|e| e.to_string())
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

    /// The `mcp_status` answer: each server with its status, scope and tools (names as
    /// the server gives them, the name the model calls, and the description).
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
                    "tools": defs.iter().map(|d| json!({
                        "name": d.name,
                        "fullName": tool::full_name(s.name(), &d.name),
                        "description": d.description,
                    })).collect::<Vec<_>>(),
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

    /// Each offered tool with its server and estimated size (description and schema,
    /// characters / 4), for `get_context_usage`.
    pub fn tool_sizes(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for s in &self.servers {
            let (status, _, defs) = s.snapshot();
            for d in &defs {
                let chars = d.description.as_deref().map_or(0, str::len)
                    + serde_json::to_string(&*d.input_schema).map_or(0, |t| t.len());
                out.push(json!({
                    "name": tool::full_name(s.name(), &d.name),
                    "serverName": s.name(),
                    "tokens": chars as u64 / crate::agent::compact::CHARS_PER_TOKEN,
                    "isLoaded": status == Status::Connected && !s.is_disabled(),
                }));
            }
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_session_and_brokered_variables_read_nothing_of_cordons_environment() {
        // PATH is set in every test process; HOME nearly so.
        let path = std::env::var("PATH").ok();
        assert!(path.is_some());
        let local = ProcessVars::default();
        assert_eq!(local.lookup("project", "PATH"), path);
        let tenant = ProcessVars {
            tenant: true,
            withheld: Vec::new(),
        };
        for scope in ["cli", "project", "user", "local", "plugin"] {
            assert_eq!(tenant.lookup(scope, "PATH"), None, "{scope}");
        }
        assert_eq!(tenant.lookup("managed", "PATH"), path);
        let brokered = ProcessVars {
            tenant: false,
            withheld: vec!["PATH".into()],
        };
        for scope in ["managed", "user", "cli", "project"] {
            assert_eq!(brokered.lookup(scope, "PATH"), None, "{scope}");
        }
    }

    #[test]
    fn a_workspaces_entry_never_reads_the_model_credentials() {
        let env = |n: &str| Some(format!("value of {n}"));
        let vars = ProcessVars::default();
        for name in MODEL_CREDENTIALS {
            // `.mcp.json` and the workspace's settings.local.json: the repository's files.
            for scope in ["project", "local"] {
                assert_eq!(vars.lookup_in(scope, name, env), None, "{scope}");
            }
            for scope in ["managed", "user", "cli"] {
                assert!(vars.lookup_in(scope, name, env).is_some(), "{scope}");
            }
        }
        assert!(vars.lookup_in("project", "GITHUB_TOKEN", env).is_some());
    }

    #[test]
    fn a_clients_sdk_server_replaces_a_configured_one_of_its_name() {
        let stdio = |name: &str| ServerConfig {
            name: name.into(),
            scope: "project",
            transport: Transport::Stdio {
                command: "x".into(),
                args: Vec::new(),
                env: Default::default(),
            },
        };
        let timeouts = Timeouts::from_env();
        let set = McpSet::new(
            McpConfig {
                servers: vec![stdio("calc"), stdio("time")],
                refused: Vec::new(),
            },
            timeouts,
            None,
        );
        let sdk = Arc::new(McpServer::new(sdk::config("calc"), timeouts, None));
        let notes = Arc::new(McpServer::new(sdk::config("notes"), timeouts, None));
        let (all, replaced) = set.with_servers(vec![sdk, notes]);
        let names: Vec<(&str, &str)> = all
            .servers()
            .iter()
            .map(|s| (s.name(), s.config.scope))
            .collect();
        assert_eq!(
            names,
            [("calc", "sdk"), ("time", "project"), ("notes", "sdk")]
        );
        assert_eq!(replaced.len(), 1);
        assert_eq!(replaced[0].config.scope, "project");
    }
}
