//! [`AgentClient`]: the orchestrator's side of the contract. Connects over the session's
//! Unix socket, performs the handshake before anything else, and gives every call a
//! deadline. Errors come back as typed [`AgentError`]s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::{Stream, StreamExt};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::error::{AgentError, ErrorCode};
use crate::limits::{self, PROTOCOL_VERSION};
use crate::proto::sandbox_agent_client::SandboxAgentClient;
use crate::proto::*;

/// Deadline for quick calls (file operations, search, handshake).
pub const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(60);
/// Extra time an exec's deadline gets beyond its own timeout, so the agent reports the
/// timeout itself rather than the transport cutting the stream.
pub const EXEC_DEADLINE_SLACK: Duration = Duration::from_secs(10);

/// A handshaken connection to one sandbox agent.
#[derive(Clone)]
pub struct AgentClient {
    inner: SandboxAgentClient<Channel>,
    info: HandshakeResponse,
    call_deadline: Duration,
}

impl AgentClient {
    /// Connects to the agent listening at `socket` and performs the handshake.
    pub async fn connect_unix(socket: impl AsRef<Path>) -> Result<Self, AgentError> {
        let channel = unix_channel(socket.as_ref().to_path_buf()).await?;
        Self::handshake_on(channel, PROTOCOL_VERSION).await
    }

    /// Connects, retrying until the agent answers or `wait` passes (a starting agent: the
    /// socket file appears at `bind`, a moment before the agent listens on it).
    pub async fn connect_unix_waiting(
        socket: impl AsRef<Path>,
        wait: Duration,
    ) -> Result<Self, AgentError> {
        let socket = socket.as_ref();
        let start = std::time::Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            let err = if socket.exists() {
                match Self::connect_unix(socket).await {
                    Ok(client) => return Ok(client),
                    // Only a transport failure is worth retrying; an answer from the agent
                    // (a refused protocol version) is final.
                    Err(e) if e.code == ErrorCode::Io => e,
                    Err(e) => return Err(e),
                }
            } else {
                AgentError::new(
                    ErrorCode::Io,
                    format!("sandbox agent socket {} did not appear", socket.display()),
                )
            };
            if start.elapsed() > wait {
                return Err(AgentError::new(
                    ErrorCode::Io,
                    format!("{} within {wait:?}", err.message),
                ));
            }
            tokio::time::sleep(pause).await;
            // A short cap: an agent appears within milliseconds, and each poll is one stat
            // or one refused connect; a longer pause would be paid in full at start-up.
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }

    /// Performs a handshake speaking `version` over `channel` (tests use other versions).
    pub async fn handshake_on(channel: Channel, version: u32) -> Result<Self, AgentError> {
        let mut inner = SandboxAgentClient::new(channel)
            .max_decoding_message_size(limits::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(limits::MAX_MESSAGE_BYTES);
        let req = with_deadline(
            HandshakeRequest {
                protocol_version: version,
                controller: format!("cordon {}", crate::AGENT_VERSION),
                // The calling thread's pin, if the session runtime pinned it.
                serve_on_cpu: crate::affinity::pinned_cpu().and_then(|c| u32::try_from(c).ok()),
            },
            DEFAULT_CALL_DEADLINE,
        );
        let info = inner
            .handshake(req)
            .await
            .map_err(|s| AgentError::from_status(&s))?
            .into_inner();
        Ok(Self {
            inner,
            info,
            call_deadline: DEFAULT_CALL_DEADLINE,
        })
    }

    /// What the agent said in the handshake, confinement report included.
    pub fn info(&self) -> &HandshakeResponse {
        &self.info
    }

    pub async fn read(
        &mut self,
        path: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ReadResponse, AgentError> {
        self.read_request(ReadRequest {
            path: path.to_string(),
            offset,
            limit,
            raw: false,
        })
        .await
    }

    /// The file's bytes whole (`raw_content`), at most `limits::MAX_READ_RAW_BYTES`.
    pub async fn read_raw(&mut self, path: &str) -> Result<ReadResponse, AgentError> {
        self.read_request(ReadRequest {
            path: path.to_string(),
            raw: true,
            ..Default::default()
        })
        .await
    }

    async fn read_request(&mut self, req: ReadRequest) -> Result<ReadResponse, AgentError> {
        let req = with_deadline(req, self.call_deadline);
        self.inner
            .read(req)
            .await
            .map(|r| r.into_inner())
            .map_err(|s| AgentError::from_status(&s))
    }

    pub async fn write(&mut self, req: WriteRequest) -> Result<WriteResponse, AgentError> {
        let req = with_deadline(req, self.call_deadline);
        self.inner
            .write(req)
            .await
            .map(|r| r.into_inner())
            .map_err(|s| AgentError::from_status(&s))
    }

    pub async fn edit(&mut self, req: EditRequest) -> Result<EditResponse, AgentError> {
        let req = with_deadline(req, self.call_deadline);
        self.inner
            .edit(req)
            .await
            .map(|r| r.into_inner())
            .map_err(|s| AgentError::from_status(&s))
    }

    pub async fn glob(&mut self, req: GlobRequest) -> Result<GlobResponse, AgentError> {
        let req = with_deadline(req, self.call_deadline);
        self.inner
            .glob(req)
            .await
            .map(|r| r.into_inner())
            .map_err(|s| AgentError::from_status(&s))
    }

    pub async fn grep(&mut self, req: GrepRequest) -> Result<GrepResponse, AgentError> {
        let req = with_deadline(req, self.call_deadline);
        self.inner
            .grep(req)
            .await
            .map(|r| r.into_inner())
            .map_err(|s| AgentError::from_status(&s))
    }

    /// Starts a command; the stream yields output chunks and ends with one Exit event.
    pub async fn exec(
        &mut self,
        req: ExecRequest,
    ) -> Result<impl Stream<Item = Result<ExecEvent, AgentError>> + use<>, AgentError> {
        let timeout = match req.timeout_ms {
            0 => limits::DEFAULT_EXEC_TIMEOUT_MS,
            ms => ms.min(limits::MAX_EXEC_TIMEOUT_MS),
        };
        let deadline = Duration::from_millis(timeout) + EXEC_DEADLINE_SLACK;
        let stream = self
            .inner
            .exec(with_deadline(req, deadline))
            .await
            .map_err(|s| AgentError::from_status(&s))?
            .into_inner();
        Ok(stream.map(|item| item.map_err(|s| AgentError::from_status(&s))))
    }

    /// Starts a long-lived command whose stdin is fed from `stdin` as it yields chunks (each
    /// at most 64 KiB; the end of `stdin` closes the command's). The stream yields its
    /// output (stdout whole, uncapped) and ends with one Exit event; dropping it kills the
    /// command.
    pub async fn exec_interactive<S>(
        &mut self,
        req: ExecRequest,
        stdin: S,
    ) -> Result<impl Stream<Item = Result<ExecEvent, AgentError>> + use<S>, AgentError>
    where
        S: Stream<Item = Vec<u8>> + Send + 'static,
    {
        let timeout = match req.timeout_ms {
            0 => limits::MAX_INTERACTIVE_TIMEOUT_MS,
            ms => ms.min(limits::MAX_INTERACTIVE_TIMEOUT_MS),
        };
        let deadline = Duration::from_millis(timeout) + EXEC_DEADLINE_SLACK;
        let first = ExecInput {
            input: Some(exec_input::Input::Start(req)),
        };
        let rest = stdin.map(|data| ExecInput {
            input: Some(exec_input::Input::Stdin(data)),
        });
        let input = futures::stream::iter([first]).chain(rest);
        let stream = self
            .inner
            .exec_interactive(with_deadline(input, deadline))
            .await
            .map_err(|s| AgentError::from_status(&s))?
            .into_inner();
        Ok(stream.map(|item| item.map_err(|s| AgentError::from_status(&s))))
    }

    /// Runs a command to completion, collecting its output (stdout and stderr interleaved
    /// as they came) and its exit status.
    pub async fn exec_collect(
        &mut self,
        req: ExecRequest,
    ) -> Result<(Vec<u8>, ExitStatus), AgentError> {
        let mut stream = Box::pin(self.exec(req).await?);
        let mut out = Vec::new();
        while let Some(event) = stream.next().await {
            match event?.event {
                Some(exec_event::Event::Output(chunk)) => out.extend_from_slice(&chunk.data),
                Some(exec_event::Event::Exit(status)) => return Ok((out, status)),
                None => {}
            }
        }
        Err(AgentError::new(
            ErrorCode::Io,
            "exec stream ended without an exit status",
        ))
    }

    pub async fn cancel(&mut self, exec_id: &str) -> Result<bool, AgentError> {
        let req = with_deadline(
            CancelRequest {
                exec_id: exec_id.to_string(),
            },
            self.call_deadline,
        );
        self.inner
            .cancel(req)
            .await
            .map(|r| r.into_inner().found)
            .map_err(|s| AgentError::from_status(&s))
    }

    pub async fn shutdown(&mut self) -> Result<(), AgentError> {
        let req = with_deadline(ShutdownRequest {}, self.call_deadline);
        self.inner
            .shutdown(req)
            .await
            .map(|_| ())
            .map_err(|s| AgentError::from_status(&s))
    }

    /// The raw generated client, for tests that send what a well-behaved client would not.
    pub fn raw(&mut self) -> &mut SandboxAgentClient<Channel> {
        &mut self.inner
    }
}

/// Wraps `msg` in a request carrying `deadline` as its grpc-timeout.
pub fn with_deadline<T>(msg: T, deadline: Duration) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.set_timeout(deadline);
    req
}

/// A channel whose every connection is a fresh connect to `socket`.
pub async fn unix_channel(socket: PathBuf) -> Result<Channel, AgentError> {
    // The URI is required by the API but never used: the connector below dials the socket.
    let endpoint = Endpoint::try_from("http://[::]:50051")
        .map_err(|e| AgentError::internal(format!("endpoint: {e}")))?;
    let path = socket.clone();
    endpoint
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { connect_socket(&path).await.map(TokioIo::new) }
        }))
        .await
        .map_err(|e| {
            AgentError::new(
                ErrorCode::Io,
                format!(
                    "cannot connect to sandbox agent at {}: {}",
                    socket.display(),
                    error_chain(&e)
                ),
            )
        })
}

/// `sun_path` holds 108 bytes; a socket deep in a long `$CORDON_HOME` has a longer path.
const MAX_SOCKET_PATH: usize = 100;

/// Connects to the socket at `path`, however long: a long path is reached through a
/// descriptor of its directory (`/proc/self/fd/N/NAME`), which the kernel resolves to the
/// same socket.
async fn connect_socket(path: &Path) -> std::io::Result<UnixStream> {
    if path.as_os_str().len() <= MAX_SOCKET_PATH {
        return UnixStream::connect(path).await;
    }
    use std::os::fd::AsRawFd;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return UnixStream::connect(path).await;
    };
    let dir = std::fs::File::open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    let stream = UnixStream::connect(&short).await;
    drop(dir);
    stream
}

/// An error and its sources, joined: tonic's own message ("transport error") hides the
/// cause in the chain.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
