//! [`ClientMcp`]: the client's connection as the channel of its in-process MCP servers
//! ([`crate::mcp::sdk`]). Each JSON-RPC message goes out as an `mcp_message` control
//! request naming the server; the client's `mcp_response` is the server's answer.
//!
//! The client runs these servers' tools in its own process, as the caller's own code:
//! that is the Agent SDK's design, and the caller's choice. Cordon only carries the
//! messages; the calls still pass the session's permission gate, and their results are
//! handled as any tool result.

use std::sync::Arc;

use serde_json::{Value, json};

use super::channel::Controller;
use crate::mcp::sdk::ClientChannel;

/// Carries SDK MCP messages over the stream-json connection.
pub struct ClientMcp(pub Arc<Controller>);

#[tonic::async_trait]
impl ClientChannel for ClientMcp {
    async fn send(&self, server: &str, message: Value) -> Result<Value, String> {
        let answer = self
            .0
            .request(json!({
                "subtype": "mcp_message",
                "server_name": server,
                "message": message,
            }))
            .await
            .map_err(|e| e.to_string())?;
        answer
            .get("mcp_response")
            .cloned()
            .ok_or_else(|| "the client's answer carries no mcp_response".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_message_goes_out_as_mcp_message_and_the_response_comes_back() {
        let (controller, mut out) = Controller::new();
        let channel = ClientMcp(controller.clone());
        let sending = tokio::spawn(async move {
            channel
                .send(
                    "calc",
                    json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
                )
                .await
        });
        let sent = out.recv().await.unwrap();
        assert_eq!(sent["request"]["subtype"], "mcp_message");
        assert_eq!(sent["request"]["server_name"], "calc");
        assert_eq!(sent["request"]["message"]["method"], "tools/list");
        let id = sent["request_id"].as_str().unwrap();
        let response = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}});
        controller.resolve(id, Ok(json!({"mcp_response": response.clone()})));
        assert_eq!(sending.await.unwrap(), Ok(response));
        // An answer without the response, and a closed client, are errors.
        let channel = ClientMcp(controller.clone());
        let sending = tokio::spawn(async move { channel.send("calc", json!({"id": 4})).await });
        let id = out.recv().await.unwrap()["request_id"]
            .as_str()
            .unwrap()
            .to_string();
        controller.resolve(&id, Ok(json!({})));
        assert!(sending.await.unwrap().unwrap_err().contains("mcp_response"));
        controller.close();
        assert!(ClientMcp(controller).send("calc", json!({})).await.is_err());
    }
}
