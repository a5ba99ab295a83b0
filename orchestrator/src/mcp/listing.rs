//! A server's tool list, paged by hand within bounds.
//!
//! Security: the server is a program a repository may have chosen, or a remote service;
//! the listing runs in Cordon's own process (on a team server, beside every tenant's
//! sessions). rmcp's `list_all_tools` follows `nextCursor` for as long as the server
//! hands one out, each page up to the transport's 16 MiB line, and keeps all of it. Here a
//! listing stops, and the server is refused, past [`MAX_PAGES`] pages, [`MAX_TOOLS`]
//! tools or [`MAX_BYTES`] of tool definitions (as JSON), whichever comes first.

use rmcp::ServiceError;
use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::{Peer, RoleClient};

/// Most pages one listing asks for.
pub const MAX_PAGES: usize = 100;
/// Most tools one server may offer (the largest real servers offer a few hundred).
pub const MAX_TOOLS: usize = 5_000;
/// Most bytes of tool definitions one server's list may hold.
pub const MAX_BYTES: usize = 32 << 20;

/// Why a listing gave no list.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error("its tool list is larger than Cordon takes: more than {0}")]
    TooLarge(String),
}

/// The server's whole tool list, or [`ListError::TooLarge`] past the bounds.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, ListError> {
    let mut bounds = Bounds::default();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let mut params = PaginatedRequestParams::default();
        params.cursor = cursor;
        let page = peer.list_tools(Some(params)).await?;
        bounds.take(page.tools)?;
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok(bounds.tools);
        }
    }
    Err(ListError::TooLarge(format!("{MAX_PAGES} pages")))
}

/// What a listing has taken so far.
#[derive(Default)]
struct Bounds {
    tools: Vec<Tool>,
    bytes: usize,
}

impl Bounds {
    fn take(&mut self, page: Vec<Tool>) -> Result<(), ListError> {
        for tool in page {
            self.bytes += serde_json::to_vec(&tool).map_or(0, |v| v.len());
            if self.bytes > MAX_BYTES {
                return Err(ListError::TooLarge(format!(
                    "{} MiB of tool definitions",
                    MAX_BYTES >> 20
                )));
            }
            if self.tools.len() == MAX_TOOLS {
                return Err(ListError::TooLarge(format!("{MAX_TOOLS} tools")));
            }
            self.tools.push(tool);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tool(name: &str, description: &str) -> Tool {
        Tool::new(
            name.to_string(),
            description.to_string(),
            Arc::new(Default::default()),
        )
    }

    #[test]
    fn a_list_past_its_tools_or_bytes_is_refused() {
        let mut b = Bounds::default();
        b.take((0..MAX_TOOLS).map(|i| tool(&format!("t{i}"), "")).collect())
            .unwrap();
        let err = b.take(vec![tool("one more", "")]).unwrap_err();
        assert!(err.to_string().contains("5000 tools"), "{err}");
        let mut b = Bounds::default();
        let big = "x".repeat(MAX_BYTES / 4);
        b.take(vec![tool("a", &big), tool("b", &big), tool("c", &big)])
            .unwrap();
        let err = b.take(vec![tool("d", &big)]).unwrap_err();
        assert!(err.to_string().contains("32 MiB"), "{err}");
    }
}
