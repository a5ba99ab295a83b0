//! One MCP server of a session: started on first need, its tools listed, calls sent with a
//! time limit, and restarted on the next call after it crashed, hung or sent garbage.
//!
//! A failed call never ends the session: the model gets an error result saying what
//! happened to the server (its exit and the tail of its stderr for a stdio server).
//!
//! A server that says its tools changed (`notifications/tools/list_changed`) is listed
//! again by [`McpServer::refresh_tools`], which the loop calls before every model request.
//! The tool list is kept in rmcp's response cache for the connection's life; rmcp drops
//! it in its reader the moment the notification arrives, before it reads any later
//! message, so a change announced during a tool call is seen by the request that follows
//! that call, and a refresh with nothing announced costs no round trip.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, Tool as McpToolDef};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{ClientCacheConfig, ClientHandler, MAX_CLIENT_CACHE_TTL, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::sync::Mutex;

use super::config::{ServerConfig, Transport};
use super::pipe::{self, PipeGuard};
use crate::tools::ToolContext;

/// Limits for one server's life.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Starting and initializing the server, and listing its tools (`MCP_TIMEOUT`).
    pub connect: Duration,
    /// One tool call (`MCP_TOOL_TIMEOUT`).
    pub call: Duration,
}

impl Timeouts {
    /// Claude Code's variables, in milliseconds; defaults 30 s to connect, 10 min a call.
    pub fn from_env() -> Self {
        let ms = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map_or(Duration::from_millis(default), Duration::from_millis)
        };
        Self {
            connect: ms("MCP_TIMEOUT", 30_000),
            call: ms("MCP_TOOL_TIMEOUT", 600_000),
        }
    }
}

/// Why a server could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    #[error("MCP server `{server}` could not be started: {why}")]
    Start { server: String, why: String },
    #[error("MCP server `{server}` did not finish starting within {secs} s")]
    StartTimedOut { server: String, secs: u64 },
    #[error(
        "MCP server `{server}` did not answer within {secs} s; it was stopped and will be restarted on the next call"
    )]
    CallTimedOut { server: String, secs: u64 },
    #[error(
        "MCP server `{server}` failed during the call ({why}); it will be restarted on the next call"
    )]
    Died { server: String, why: String },
    #[error("MCP server `{server}` answered with an error: {why}")]
    Protocol { server: String, why: String },
    #[error("the call to MCP server `{server}` was interrupted by the user")]
    Interrupted { server: String },
    #[error("MCP server `{server}` is disabled")]
    Disabled { server: String },
}

/// What `mcp_status` reports for a server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Connected,
    Failed,
    Disabled,
}

/// The client side of a connection: rmcp's defaults (a `list_changed` notification is
/// acted on through the response cache, see the module's text).
#[derive(Debug, Clone, Copy)]
struct Handler;

impl ClientHandler for Handler {}

/// The response cache of a connection: a tool list without the server's own `ttlMs` is
/// kept until the server says it changed (or for rmcp's longest time), so that refreshing
/// before every model request asks the server only after a change.
fn cache_config() -> ClientCacheConfig {
    ClientCacheConfig::default().with_default_ttl(MAX_CLIENT_CACHE_TTL)
}

/// A live connection.
struct Live {
    service: RunningService<RoleClient, Handler>,
    /// Kills the sandboxed process when dropped (stdio only).
    _guard: Option<PipeGuard>,
    exit: Option<Arc<std::sync::Mutex<pipe::Exit>>>,
    /// Where the client's own messages for an SDK server go (into rmcp, as if the server
    /// had written them).
    inbound: Option<tokio::sync::mpsc::UnboundedSender<Value>>,
}

impl Live {
    /// What became of a connection that failed: the stdio server's exit, else rmcp's word.
    fn failure(&self, err: &ServiceError) -> String {
        match &self.exit {
            Some(exit) => {
                let exit = exit
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if exit.status.is_some() || exit.stream_error.is_some() {
                    return format!("the server {}", exit.describe());
                }
                format!("{err}")
            }
            None => format!("{err}"),
        }
    }
}

/// One configured server and its connection.
pub struct McpServer {
    pub config: ServerConfig,
    timeouts: Timeouts,
    live: Mutex<Option<Live>>,
    state: std::sync::Mutex<(Status, Option<String>, Vec<McpToolDef>)>,
    /// Bumped whenever the listed tools change (a loop rebuilds the server's tools then).
    generation: std::sync::atomic::AtomicU64,
    starts: std::sync::atomic::AtomicU64,
    /// How an HTTP server is reached: the session's egress policy (none: no egress).
    egress: Option<crate::network::proxy::dial::Dialer>,
    /// Turned off by the client (`mcp_toggle`): no tools offered, no calls, not started.
    disabled: AtomicBool,
    /// What carries an SDK server's messages (the client's connection).
    client: Option<Arc<dyn super::sdk::ClientChannel>>,
}

impl McpServer {
    pub fn new(
        config: ServerConfig,
        timeouts: Timeouts,
        egress: Option<crate::network::proxy::dial::Dialer>,
    ) -> Self {
        Self {
            config,
            timeouts,
            egress,
            live: Mutex::new(None),
            state: std::sync::Mutex::new((Status::Pending, None, Vec::new())),
            generation: std::sync::atomic::AtomicU64::new(0),
            starts: std::sync::atomic::AtomicU64::new(0),
            disabled: AtomicBool::new(false),
            client: None,
        }
    }

    /// The SDK server `name`, whose messages `client` carries.
    pub fn sdk(name: &str, client: Arc<dyn super::sdk::ClientChannel>, timeouts: Timeouts) -> Self {
        Self {
            client: Some(client),
            // Carried by the client's own connection: no network of Cordon's is used.
            ..Self::new(super::sdk::config(name), timeouts, None)
        }
    }

    /// Whether the client turned the server off.
    pub fn is_disabled(&self) -> bool {
        self.disabled.load(Ordering::Acquire)
    }

    /// `mcp_toggle`: off stops the server and hides its tools; on starts it again.
    pub async fn set_enabled(&self, enabled: bool, ctx: &ToolContext) -> Result<(), ServerError> {
        if !enabled {
            self.disabled.store(true, Ordering::Release);
            self.drop_live(|_| String::new()).await;
            self.set(Status::Disabled, None, None);
            return Ok(());
        }
        self.disabled.store(false, Ordering::Release);
        self.connect(ctx).await.map(|_| ())
    }

    /// `mcp_reconnect`: a fresh connection (the old one, if any, is closed first).
    pub async fn reconnect(&self, ctx: &ToolContext) -> Result<(), ServerError> {
        if self.is_disabled() {
            return Err(ServerError::Disabled {
                server: self.config.name.clone(),
            });
        }
        self.drop_live(|_| String::new()).await;
        self.connect(ctx).await.map(|_| ())
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The status, the last error, and the tools last listed.
    pub fn snapshot(&self) -> (Status, Option<String>, Vec<McpToolDef>) {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set(&self, status: Status, error: Option<String>, tools: Option<Vec<McpToolDef>>) {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.0 = status;
        s.1 = error;
        if let Some(tools) = tools
            && tools != s.2
        {
            s.2 = tools;
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Changes whenever the server's listed tools change.
    pub fn tools_generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Lists the tools of a connected server again when it said they changed (otherwise
    /// rmcp answers from its cache, without a round trip); the session goes on with the
    /// old list when listing fails. A server that is not running is left alone: it lists
    /// its tools when it next starts.
    pub async fn refresh_tools(&self) {
        let peer = {
            let live = self.live.lock().await;
            match live.as_ref() {
                Some(l) if !l.service.is_closed() => l.service.peer().clone(),
                _ => return,
            }
        };
        match tokio::time::timeout(self.timeouts.connect, super::listing::list_tools(&peer)).await {
            Ok(Ok(tools)) => {
                let (status, error, _) = self.snapshot();
                self.set(status, error, Some(tools));
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %self.config.name, "listing its changed tools failed: {e}");
            }
            Err(_) => tracing::warn!(
                server = %self.config.name,
                "listing its changed tools took longer than {} s",
                self.timeouts.connect.as_secs()
            ),
        }
    }

    /// Starts the server (if it is not running) and lists its tools.
    pub async fn connect(&self, ctx: &ToolContext) -> Result<Vec<McpToolDef>, ServerError> {
        let mut live = self.live.lock().await;
        self.ensure(&mut live, ctx).await?;
        Ok(self.snapshot().2)
    }

    /// Calls `tool` with `arguments`; the result as JSON (`{content, isError, ...}`).
    pub async fn call(
        &self,
        ctx: &ToolContext,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, ServerError> {
        let peer = {
            let mut live = self.live.lock().await;
            self.ensure(&mut live, ctx).await?;
            match live.as_ref() {
                Some(l) => l.service.peer().clone(),
                None => return Err(self.died("the connection was lost".into())),
            }
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let mut interrupts = ctx.interrupt_signal();
        // An interrupt ends the wait; the server keeps running (a late answer is dropped).
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(self.timeouts.call, peer.call_tool(params)) => outcome,
            Ok(()) = interrupts.changed() => {
                return Err(ServerError::Interrupted {
                    server: self.config.name.clone(),
                });
            }
        };
        match outcome {
            Ok(Ok(result)) => Ok(serde_json::to_value(&result).unwrap_or(Value::Null)),
            Ok(Err(ServiceError::McpError(e))) => Err(ServerError::Protocol {
                server: self.config.name.clone(),
                why: e.message.to_string(),
            }),
            Ok(Err(e)) => {
                let why = self.drop_live(|l| l.failure(&e)).await;
                self.set(Status::Failed, Some(why.clone()), None);
                Err(self.died(why))
            }
            Err(_) => {
                self.drop_live(|_| String::new()).await;
                let err = ServerError::CallTimedOut {
                    server: self.config.name.clone(),
                    secs: self.timeouts.call.as_secs(),
                };
                self.set(Status::Failed, Some(err.to_string()), None);
                Err(err)
            }
        }
    }

    /// A message the client's in-process server sent of its own accord (the client's
    /// `mcp_message` request): handed to the connection as the server's, so a
    /// notification is handled as from any server and a request of the server's is
    /// answered (the answer goes back to the client). `notifications/tools/list_changed`
    /// lists the tools again at once.
    pub async fn deliver(&self, message: Value) -> Result<(), ServerError> {
        let refuse = |why: &str| ServerError::Protocol {
            server: self.config.name.clone(),
            why: why.to_string(),
        };
        if self.config.transport != Transport::Sdk {
            return Err(refuse(
                "only the client's own (SDK) servers' messages come from the client",
            ));
        }
        let method = message.get("method").and_then(Value::as_str);
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || method.is_none() {
            return Err(refuse(
                "the message is not a JSON-RPC 2.0 notification or request of the server's",
            ));
        }
        let relist = method == Some("notifications/tools/list_changed");
        let live = self.live.lock().await;
        let Some(inbound) = live.as_ref().and_then(|l| l.inbound.clone()) else {
            return Err(self.died("it is not connected".into()));
        };
        if inbound.send(message).is_err() {
            return Err(self.died("its connection is closed".into()));
        }
        if relist {
            // rmcp drops its cached list when it reads the notification, in its own
            // time; clearing it here makes the listing below the new one at once.
            if let Some(l) = live.as_ref() {
                l.service.peer().clear_response_cache().await;
            }
            drop(live);
            self.refresh_tools().await;
        }
        Ok(())
    }

    /// How many times the server was started (for tests and status).
    pub fn starts(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    /// Stops the server (the session ends).
    pub async fn stop(&self) {
        if let Some(live) = self.live.lock().await.take() {
            let mut service = live.service;
            let _ = service.close_with_timeout(Duration::from_secs(1)).await;
        }
    }

    fn died(&self, why: String) -> ServerError {
        ServerError::Died {
            server: self.config.name.clone(),
            why,
        }
    }

    /// Drops the live connection (killing a stdio server); returns `describe` of it.
    async fn drop_live(&self, describe: impl FnOnce(&Live) -> String) -> String {
        let mut live = self.live.lock().await;
        let why = live.as_ref().map(describe).unwrap_or_default();
        *live = None;
        why
    }

    /// A running, initialized server in `live`, its tools listed when it (re)started.
    async fn ensure(&self, live: &mut Option<Live>, ctx: &ToolContext) -> Result<(), ServerError> {
        if self.is_disabled() {
            return Err(ServerError::Disabled {
                server: self.config.name.clone(),
            });
        }
        if live.as_ref().is_some_and(|l| l.service.is_closed()) {
            *live = None;
        }
        if live.is_none() {
            let started = tokio::time::timeout(self.timeouts.connect, self.start(ctx)).await;
            let started = match started {
                Ok(r) => r,
                Err(_) => Err(ServerError::StartTimedOut {
                    server: self.config.name.clone(),
                    secs: self.timeouts.connect.as_secs(),
                }),
            };
            let fresh = match started {
                Ok(l) => l,
                Err(e) => {
                    self.set(Status::Failed, Some(e.to_string()), None);
                    return Err(e);
                }
            };
            fresh
                .service
                .peer()
                .set_response_cache_config(cache_config())
                .await;
            let l = live.insert(fresh);
            let listed = tokio::time::timeout(
                self.timeouts.connect,
                super::listing::list_tools(l.service.peer()),
            )
            .await;
            match listed {
                Ok(Ok(tools)) => self.set(Status::Connected, None, Some(tools)),
                Ok(Err(e)) => {
                    let why = match &e {
                        super::listing::ListError::Service(e) => l.failure(e),
                        too_large => too_large.to_string(),
                    };
                    *live = None;
                    let err = ServerError::Start {
                        server: self.config.name.clone(),
                        why: format!("listing its tools failed: {why}"),
                    };
                    self.set(Status::Failed, Some(err.to_string()), None);
                    return Err(err);
                }
                Err(_) => {
                    *live = None;
                    let err = ServerError::StartTimedOut {
                        server: self.config.name.clone(),
                        secs: self.timeouts.connect.as_secs(),
                    };
                    self.set(Status::Failed, Some(err.to_string()), None);
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    async fn start(&self, ctx: &ToolContext) -> Result<Live, ServerError> {
        let n = self.starts.fetch_add(1, Ordering::Relaxed);
        let fail = |why: String| ServerError::Start {
            server: self.config.name.clone(),
            why,
        };
        match &self.config.transport {
            Transport::Stdio { command, args, env } => {
                let mut env: std::collections::HashMap<String, String> =
                    env.clone().into_iter().collect();
                env.insert(
                    "CLAUDE_PROJECT_DIR".into(),
                    ctx.workspace().display().to_string(),
                );
                let id = format!("mcp-{}-{n}-{}", self.config.name, uuid::Uuid::new_v4());
                let id: String = id.chars().take(128).collect();
                let p = pipe::spawn(ctx, &id, command, args, env)
                    .await
                    .map_err(|e| fail(e.message.clone()))?;
                let exit = p.exit.clone();
                match Handler.serve((p.read, p.write)).await {
                    Ok(service) => Ok(Live {
                        service,
                        _guard: Some(p.guard),
                        exit: Some(exit),
                        inbound: None,
                    }),
                    Err(e) => {
                        drop(p.guard);
                        let exit = exit
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let why = if exit.status.is_some() || exit.stream_error.is_some() {
                            format!("it {}", exit.describe())
                        } else {
                            format!("initialization failed: {e}")
                        };
                        Err(fail(why))
                    }
                }
            }
            Transport::Sdk => {
                let Some(client) = &self.client else {
                    return Err(fail(
                        "an SDK server runs in the Agent SDK's process and needs its connection \
                         (--input-format stream-json)"
                            .into(),
                    ));
                };
                let bridge = super::sdk::bridge(&self.config.name, client.clone());
                let mut live = self.serve_unowned((bridge.read, bridge.write)).await?;
                live.inbound = Some(bridge.inbound);
                Ok(live)
            }
            Transport::Http { url, headers } => {
                let transport = super::http::transport(url, headers, self.egress.as_ref())
                    .await
                    .map_err(fail)?;
                self.serve_unowned(transport).await
            }
        }
    }

    /// Initializes a connection with no process of ours behind it (HTTP, SDK).
    async fn serve_unowned<T, E, A>(&self, transport: T) -> Result<Live, ServerError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let service = Handler
            .serve(transport)
            .await
            .map_err(|e| ServerError::Start {
                server: self.config.name.clone(),
                why: format!("initialization failed: {e}"),
            })?;
        Ok(Live {
            service,
            _guard: None,
            exit: None,
            inbound: None,
        })
    }
}
