//! The agent's gRPC service: the handshake gate, one controller only, and dispatch of each
//! operation to the module that does it. File and search work runs on the blocking pool so
//! a slow disk never stalls the socket.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::Stream;
use tokio::sync::{Mutex, Notify};
use tonic::{Request, Response, Status};

use crate::config::AgentConfig;
use crate::error::{AgentError, ErrorCode};
use crate::exec::Executor;
use crate::fsops::Resolver;
use crate::limits::{self, PROTOCOL_VERSION};
use crate::proto::sandbox_agent_server::{SandboxAgent, SandboxAgentServer};
use crate::proto::*;
use crate::{fsops, search};

mod listener;
pub use listener::{ControllerGate, serve_unix};

/// Shared state of one agent.
pub struct AgentService {
    config: AgentConfig,
    report: ConfinementReport,
    /// Shared with the listener: a controller that leaves before its handshake frees the
    /// slot instead of ending the agent.
    handshaken: Arc<AtomicBool>,
    resolver: Arc<Resolver>,
    cwd: Arc<Mutex<PathBuf>>,
    executor: Arc<Executor>,
    shutdown: Arc<Notify>,
}

impl AgentService {
    pub fn new(
        config: AgentConfig,
        report: ConfinementReport,
        executor: Executor,
    ) -> Result<Self, AgentError> {
        let resolver = Resolver::new(&config.writable_roots())?;
        Ok(Self {
            cwd: Arc::new(Mutex::new(config.workspace.clone())),
            config,
            report,
            handshaken: Arc::new(AtomicBool::new(false)),
            resolver: Arc::new(resolver),
            executor: Arc::new(executor),
            shutdown: Arc::new(Notify::new()),
        })
    }

    /// Set once a controller completed the handshake.
    pub fn handshaken(&self) -> Arc<AtomicBool> {
        self.handshaken.clone()
    }

    /// Resolves when a controller asked the agent to shut down.
    pub fn shutdown_signal(&self) -> Arc<Notify> {
        self.shutdown.clone()
    }

    pub fn into_server(self) -> SandboxAgentServer<Self> {
        SandboxAgentServer::new(self)
            .max_decoding_message_size(limits::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(limits::MAX_MESSAGE_BYTES)
    }

    /// Every call but the handshake passes here first.
    fn gate<T>(&self, req: &Request<T>) -> Result<(), AgentError> {
        if !self.handshaken.load(Ordering::Acquire) {
            return Err(AgentError::new(
                ErrorCode::HandshakeRequired,
                "call Handshake first: the agent serves nothing before the protocol version is agreed",
            ));
        }
        require_deadline(req)
    }
}

fn require_deadline<T>(req: &Request<T>) -> Result<(), AgentError> {
    if req.metadata().get("grpc-timeout").is_none() {
        return Err(AgentError::new(
            ErrorCode::DeadlineRequired,
            "every call needs a deadline (grpc-timeout); the agent refuses unbounded calls",
        ));
    }
    Ok(())
}

/// Files up to this size are read on the async thread: at page-cache speed that is tens of
/// microseconds, less than the hand-off to the blocking pool; larger ones (whose digest
/// needs every byte) go to the pool so they cannot hold up other calls.
const INLINE_READ_MAX_BYTES: u64 = 256 * 1024;

/// Runs blocking file work off the async threads.
async fn blocking<T, F>(f: F) -> Result<T, Status>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, AgentError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.map_err(Status::from),
        Err(join) => Err(AgentError::internal(format!("operation panicked: {join}")).into()),
    }
}

type ExecStream = Pin<Box<dyn Stream<Item = Result<ExecEvent, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl SandboxAgent for AgentService {
    async fn handshake(
        &self,
        req: Request<HandshakeRequest>,
    ) -> Result<Response<HandshakeResponse>, Status> {
        require_deadline(&req)?;
        let req = req.into_inner();
        if req.controller.len() > limits::MAX_CONTROLLER_NAME_BYTES {
            return Err(
                AgentError::new(ErrorCode::TooLarge, "controller name over 256 bytes").into(),
            );
        }
        if req.protocol_version != PROTOCOL_VERSION {
            return Err(AgentError::new(
                ErrorCode::UnsupportedProtocol,
                format!(
                    "protocol version {} is not supported: this agent ({}) speaks version {}",
                    req.protocol_version,
                    crate::AGENT_VERSION,
                    PROTOCOL_VERSION
                ),
            )
            .into());
        }
        // The serving thread (this one: the agent's runtime has one) joins the
        // controller's CPU. Refused (a CPU outside this container's or process's set), it
        // serves unpinned: slower, never wrong.
        if let Some(cpu) = req.serve_on_cpu
            && let Err(e) = crate::affinity::pin_to(cpu as usize)
        {
            tracing::info!(cpu, "serving unpinned: {e}");
        }
        self.handshaken.store(true, Ordering::Release);
        tracing::info!(controller = %req.controller, "handshake accepted");
        Ok(Response::new(HandshakeResponse {
            protocol_version: PROTOCOL_VERSION,
            agent_version: crate::AGENT_VERSION.to_string(),
            confinement: Some(self.report.clone()),
            writable_roots: path_strings(&self.config.writable_roots()),
            initial_cwd: self.config.workspace.display().to_string(),
            protected_paths: path_strings(&self.config.protected_paths),
        }))
    }

    async fn read(&self, req: Request<ReadRequest>) -> Result<Response<ReadResponse>, Status> {
        self.gate(&req)?;
        let req = req.into_inner();
        // Opening is cheap; a small file is read right here (a hand-off to the blocking
        // pool and back costs more than reading it), a large one off the async thread.
        let opened = fsops::read::open(&self.resolver, &req)?;
        if opened.size() <= INLINE_READ_MAX_BYTES {
            return fsops::read::read_opened(opened, &req)
                .map(Response::new)
                .map_err(Status::from);
        }
        blocking(move || fsops::read::read_opened(opened, &req))
            .await
            .map(Response::new)
    }

    async fn write(&self, req: Request<WriteRequest>) -> Result<Response<WriteResponse>, Status> {
        self.gate(&req)?;
        let resolver = self.resolver.clone();
        let req = req.into_inner();
        blocking(move || fsops::write(&resolver, &req))
            .await
            .map(Response::new)
    }

    async fn edit(&self, req: Request<EditRequest>) -> Result<Response<EditResponse>, Status> {
        self.gate(&req)?;
        let resolver = self.resolver.clone();
        let req = req.into_inner();
        blocking(move || fsops::edit(&resolver, &req))
            .await
            .map(Response::new)
    }

    type ExecStream = ExecStream;

    async fn exec(&self, req: Request<ExecRequest>) -> Result<Response<Self::ExecStream>, Status> {
        self.gate(&req)?;
        let req = req.into_inner();
        let stream = self.executor.start(req, self.cwd.clone()).await?;
        Ok(Response::new(stream))
    }

    type ExecInteractiveStream = ExecStream;

    async fn exec_interactive(
        &self,
        req: Request<tonic::Streaming<ExecInput>>,
    ) -> Result<Response<Self::ExecInteractiveStream>, Status> {
        self.gate(&req)?;
        let mut input = req.into_inner();
        let start = match input.message().await? {
            Some(ExecInput {
                input: Some(exec_input::Input::Start(start)),
            }) => start,
            _ => {
                return Err(AgentError::invalid(
                    "the first message of an interactive exec must be its start request",
                )
                .into());
            }
        };
        // Bounded: the controller waits when the command reads slowly.
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let stream = self
            .executor
            .start_interactive(start, rx, self.cwd.clone())
            .await?;
        tokio::spawn(async move {
            // Forwards input until the controller closes its side (or the call ends, which
            // drops the stream); a second start or an oversized chunk ends the input.
            while let Ok(Some(msg)) = input.message().await {
                match msg.input {
                    Some(exec_input::Input::Stdin(data))
                        if data.len() <= limits::MAX_CHUNK_BYTES =>
                    {
                        if tx.send(data).await.is_err() {
                            break;
                        }
                    }
                    _ => break,
                }
            }
        });
        Ok(Response::new(stream))
    }

    async fn glob(&self, req: Request<GlobRequest>) -> Result<Response<GlobResponse>, Status> {
        self.gate(&req)?;
        let resolver = self.resolver.clone();
        let cwd = self.cwd.lock().await.clone();
        let req = req.into_inner();
        blocking(move || search::glob(&resolver, &cwd, &req))
            .await
            .map(Response::new)
    }

    async fn grep(&self, req: Request<GrepRequest>) -> Result<Response<GrepResponse>, Status> {
        self.gate(&req)?;
        let resolver = self.resolver.clone();
        let cwd = self.cwd.lock().await.clone();
        let req = req.into_inner();
        blocking(move || search::grep(&resolver, &cwd, &req))
            .await
            .map(Response::new)
    }

    async fn cancel(
        &self,
        req: Request<CancelRequest>,
    ) -> Result<Response<CancelResponse>, Status> {
        self.gate(&req)?;
        let found = self.executor.cancel(&req.into_inner().exec_id);
        Ok(Response::new(CancelResponse { found }))
    }

    async fn shutdown(
        &self,
        req: Request<ShutdownRequest>,
    ) -> Result<Response<ShutdownResponse>, Status> {
        self.gate(&req)?;
        self.executor.kill_all();
        self.shutdown.notify_one();
        Ok(Response::new(ShutdownResponse {}))
    }
}

fn path_strings(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}
