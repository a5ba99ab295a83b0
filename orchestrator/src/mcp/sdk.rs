//! SDK MCP servers: MCP servers that live inside the Agent SDK client's own process (the
//! Python SDK's `create_sdk_mcp_server` with `@tool` functions). The SDK names them in
//! `--mcp-config` as `{"type": "sdk", "name": ...}`; Cordon speaks MCP to them as to any
//! server, each JSON-RPC message carried to the client in an `mcp_message` control request
//! and the server's answer coming back in the control response.
//!
//! Trust: these tools are the caller's own code, run by the caller's own process outside
//! any sandbox, which is the SDK's documented design (the caller chose to hand the model
//! these functions). Cordon does not confine them and cannot; what it keeps is the rest:
//! each call passes the session's permission gate like every MCP tool (`mcp__server__tool`
//! rules, hooks, can_use_tool), and what a tool returns is handed to the model as an
//! untrusted tool result, capped like any other.
//!
//! The bridge is a byte pipe for rmcp (as [`super::pipe`] is for a sandboxed server), so
//! the handshake, paging of tool lists and call time limits are [`super::McpServer`]'s.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf,
};
use tokio::sync::mpsc;

use super::config::{ServerConfig, Transport};

/// The `type` the SDK gives its in-process servers in `--mcp-config`.
pub const SDK_TYPE: &str = "sdk";
/// The scope `mcp_status` reports for them.
pub const SCOPE: &str = "sdk";
/// Bytes buffered in each direction between rmcp and the bridge.
const PIPE_BYTES: usize = 64 * 1024;
/// Longest JSON-RPC message rmcp may hand the bridge (the client's own limit for a
/// control line is of the same order).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// Carries one JSON-RPC message to the client's server `server` and returns the client's
/// answer: the server's JSON-RPC response (for a notification, whatever acknowledgement
/// the client sends, which is dropped).
#[tonic::async_trait]
pub trait ClientChannel: Send + Sync {
    async fn send(&self, server: &str, message: Value) -> Result<Value, String>;
}

/// The SDK servers among `--mcp-config` values: the names of JSON entries of type `sdk`
/// (a value that is a file path, or not JSON, names none: the SDK passes its servers
/// inline). Other entries are left to the MCP configuration.
pub fn servers_in_mcp_config(values: &[String]) -> Vec<String> {
    let mut names = Vec::new();
    for value in values {
        let Ok(parsed) = serde_json::from_str::<Value>(value) else {
            continue;
        };
        let servers = parsed.get("mcpServers").and_then(Value::as_object);
        for (name, entry) in servers.into_iter().flatten() {
            if entry.get("type").and_then(Value::as_str) == Some(SDK_TYPE) && !names.contains(name)
            {
                names.push(name.clone());
            }
        }
    }
    names
}

/// The configuration of the SDK server `name`.
pub fn config(name: &str) -> ServerConfig {
    ServerConfig {
        name: name.to_string(),
        scope: SCOPE,
        transport: Transport::Sdk,
    }
}

/// rmcp's ends of a bridge to the client's server `server`, and where the messages the
/// client sends on its server's behalf (`mcp_message` from the client) enter it.
pub struct Bridge {
    pub read: ReadHalf<DuplexStream>,
    pub write: WriteHalf<DuplexStream>,
    pub inbound: mpsc::UnboundedSender<Value>,
}

/// Starts the tasks that carry rmcp's messages to the client and the answers back. They
/// end when rmcp closes its side, or when the client is gone (rmcp then sees the pipe
/// close, and the server is reported failed).
pub fn bridge(server: &str, channel: Arc<dyn ClientChannel>) -> Bridge {
    let (rmcp_side, our_side) = tokio::io::duplex(PIPE_BYTES);
    let (read, write) = tokio::io::split(rmcp_side);
    let (our_read, mut our_write) = tokio::io::split(our_side);
    let (answers, mut to_rmcp) = mpsc::unbounded_channel::<Value>();
    let inbound = answers.clone();
    tokio::spawn(async move {
        while let Some(answer) = to_rmcp.recv().await {
            let mut line = answer.to_string().into_bytes();
            line.push(b'\n');
            if our_write.write_all(&line).await.is_err() || our_write.flush().await.is_err() {
                break;
            }
        }
    });
    let server = server.to_string();
    tokio::spawn(async move {
        let mut lines = BufReader::new(our_read);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match (&mut lines)
                .take(MAX_MESSAGE_BYTES as u64 + 1)
                .read_until(b'\n', &mut buf)
                .await
            {
                Ok(0) | Err(_) => break,
                Ok(_) if buf.len() > MAX_MESSAGE_BYTES => {
                    tracing::warn!(%server, "an MCP message over the size limit was not sent");
                    break;
                }
                Ok(_) => {}
            }
            let Ok(message) = serde_json::from_slice::<Value>(&buf) else {
                continue;
            };
            let (channel, server, answers) = (channel.clone(), server.clone(), answers.clone());
            // A response of rmcp's (to a request the client delivered for its server) goes
            // back the same way; the client's acknowledgement is dropped.
            if message.get("method").is_none() {
                tokio::spawn(async move {
                    if let Err(why) = channel.send(&server, message).await {
                        tracing::debug!(%server, %why, "an answer to the server was not delivered");
                    }
                });
                continue;
            }
            // Requests run side by side (parallel tool calls); each answer is one line.
            tokio::spawn(async move {
                let id = message.get("id").cloned();
                let answer = channel.send(&server, message).await;
                let Some(id) = id else {
                    return; // a notification: the client's acknowledgement is dropped
                };
                let response = match answer {
                    Ok(response) => response,
                    Err(why) => json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "error": {"code": -32603, "message": why},
                    }),
                };
                let _ = answers.send(response);
            });
        }
    });
    Bridge {
        read,
        write,
        inbound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn sdk_servers_are_found_in_inline_configs_only() {
        let values = vec![
            r#"{"mcpServers":{"calc":{"type":"sdk","name":"calc"},"time":{"command":"uvx","args":["mcp-server-time"]}}}"#.to_string(),
            "/some/file.json".to_string(),
            r#"{"mcpServers":{"calc":{"type":"sdk","name":"calc"},"notes":{"type":"sdk","name":"notes"}}}"#.to_string(),
        ];
        assert_eq!(servers_in_mcp_config(&values), ["calc", "notes"]);
        assert!(servers_in_mcp_config(&["not json".into()]).is_empty());
    }

    /// A client that answers every request with its own method name as the result.
    struct Echo(Mutex<Vec<(String, Value)>>);

    #[tonic::async_trait]
    impl ClientChannel for Echo {
        async fn send(&self, server: &str, message: Value) -> Result<Value, String> {
            self.0
                .lock()
                .unwrap()
                .push((server.into(), message.clone()));
            if message["method"] == "fail" {
                return Err("the client said no".into());
            }
            Ok(
                json!({"jsonrpc": "2.0", "id": message["id"], "result": {"echo": message["method"]}}),
            )
        }
    }

    #[tokio::test]
    async fn messages_reach_the_client_and_answers_come_back_by_line() {
        let echo = Arc::new(Echo(Mutex::default()));
        let Bridge {
            read,
            mut write,
            inbound,
        } = bridge("calc", echo.clone());
        let mut read = BufReader::new(read).lines();
        write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n")
            .await
            .unwrap();
        let line = read.next_line().await.unwrap().unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], 1);
        assert_eq!(answer["result"]["echo"], "tools/list");
        // A notification is carried too, and gets no line back; a failed request gets
        // a JSON-RPC error for its id.
        write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"fail\"}\n")
            .await
            .unwrap();
        let line = read.next_line().await.unwrap().unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], 2);
        assert_eq!(answer["error"]["message"], "the client said no");
        // What the client sends on its server's behalf reaches rmcp as the server's; the
        // answer rmcp gives a request of the server's goes back to the client.
        inbound
            .send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
            .unwrap();
        let line = read.next_line().await.unwrap().unwrap();
        let delivered: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(delivered["method"], "notifications/tools/list_changed");
        write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n")
            .await
            .unwrap();
        let answered = loop {
            let seen = echo.0.lock().unwrap().clone();
            if seen.len() == 4 {
                break seen;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(answered[3].1["id"], 9);
        assert!(answered.iter().all(|(server, _)| server == "calc"));
    }
}
