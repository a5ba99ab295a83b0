//! A loop's MCP tools kept in step with its servers: before every model request
//! [`ToolSync::sync`] refreshes each server (a new `tools/list` only after the server sent
//! `notifications/tools/list_changed`, see [`super::server`]) and rebuilds, in the loop's
//! registry, the tools of each server whose list changed since the loop last looked.

use std::sync::Arc;

use super::server::McpServer;
use super::tool::McpTool;
use crate::tools::{Tool, ToolRegistry};

/// Which of a server's tools (by the name the model calls) a loop offers.
pub type Keep = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The servers one loop offers tools from, and the list generation it last built.
#[derive(Clone)]
pub struct ToolSync {
    servers: Vec<Arc<McpServer>>,
    keep: Keep,
    /// Per server: the generation whose tools are in the registry (none: not built yet,
    /// so the first sync builds every server's tools from its current list).
    seen: Vec<Option<u64>>,
}

impl ToolSync {
    /// The tools of `servers` whose names pass `keep`.
    pub fn new(servers: Vec<Arc<McpServer>>, keep: Keep) -> Self {
        let seen = vec![None; servers.len()];
        Self {
            servers,
            keep,
            seen,
        }
    }

    /// Every tool of `servers`.
    pub fn all(servers: Vec<Arc<McpServer>>) -> Self {
        Self::new(servers, Arc::new(|_| true))
    }

    /// Brings `tools` up to date with the servers' lists; true when any server's tools
    /// were rebuilt.
    pub async fn sync(&mut self, tools: &mut ToolRegistry) -> bool {
        futures::future::join_all(self.servers.iter().map(|s| s.refresh_tools())).await;
        let mut changed = false;
        for (server, seen) in self.servers.iter().zip(&mut self.seen) {
            let generation = server.tools_generation();
            if *seen == Some(generation) {
                continue;
            }
            *seen = Some(generation);
            changed = true;
            let name = server.name();
            tools.retain(|t| t.mcp_server() != Some(name));
            for def in &server.snapshot().2 {
                let tool = McpTool::new(server.clone(), def);
                if (self.keep)(tool.name()) {
                    tools.register(Arc::new(tool));
                }
            }
        }
        changed
    }
}
