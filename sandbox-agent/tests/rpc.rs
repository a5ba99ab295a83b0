//! The RPC contract against the real agent binary: the handshake gate, one controller,
//! deadlines, and bad input (malformed, oversized, wrong-version messages) answered with
//! clear errors while the agent keeps serving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut};
use sandbox_agent::client::{AgentClient, DEFAULT_CALL_DEADLINE, unix_channel, with_deadline};
use sandbox_agent::config::AgentConfig;
use sandbox_agent::error::{AgentError, ErrorCode};
use sandbox_agent::limits::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use sandbox_agent::proto::sandbox_agent_client::SandboxAgentClient;
use sandbox_agent::proto::*;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// An agent process serving on a socket in a temp dir, killed on drop.
struct Agent {
    child: Child,
    socket: PathBuf,
    workspace: PathBuf,
    _dir: tempfile::TempDir,
}

impl Agent {
    fn start() -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        let socket = dir.path().join("agent.sock");
        let config = AgentConfig {
            socket_path: socket.clone(),
            workspace: workspace.clone(),
            tmp_dir: tmp,
            extra_writable: vec![],
            extra_readable: Vec::new(),
            command_env: Vec::new(),
            protected_paths: vec![],
            network: false,
            egress: None,
            best_effort: false,
            rlimits: Default::default(),
            disk_budget_bytes: None,
            exec_cgroup: None,
            require_outside_peer: false,
        };
        let child = Command::new(env!("CARGO_BIN_EXE_sandbox-agent"))
            .arg("--config")
            .arg(serde_json::to_string(&config).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let agent = Agent {
            child,
            socket,
            workspace,
            _dir: dir,
        };
        let start = Instant::now();
        while !agent.socket.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "agent socket never appeared"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        agent
    }

    async fn raw(&self) -> SandboxAgentClient<tonic::transport::Channel> {
        SandboxAgentClient::new(unix_channel(self.socket.clone()).await.unwrap())
    }

    /// Polls without blocking the runtime, so connection teardown tasks can run.
    async fn exited_within(&mut self, wait: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < wait {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn code_of(status: &tonic::Status) -> ErrorCode {
    AgentError::from_status(status).code
}

async fn handshake(
    raw: &mut SandboxAgentClient<tonic::transport::Channel>,
    version: u32,
) -> Result<HandshakeResponse, tonic::Status> {
    handshake_on(raw, version, None).await
}

async fn handshake_on(
    raw: &mut SandboxAgentClient<tonic::transport::Channel>,
    version: u32,
    serve_on_cpu: Option<u32>,
) -> Result<HandshakeResponse, tonic::Status> {
    let req = HandshakeRequest {
        protocol_version: version,
        controller: "test".into(),
        serve_on_cpu,
    };
    raw.handshake(with_deadline(req, DEFAULT_CALL_DEADLINE))
        .await
        .map(|r| r.into_inner())
}

fn read_req(path: &Path) -> ReadRequest {
    ReadRequest {
        path: path.display().to_string(),
        ..Default::default()
    }
}

/// `Cpus_allowed_list` of one thread of `pid`, or of each.
fn cpus_of(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_default()
            .trim()
            .to_string();
        out.push((task.file_name().to_string_lossy().into_owned(), list));
    }
    out
}

#[tokio::test]
async fn a_handshake_that_names_a_cpu_pins_the_serving_thread_and_nothing_else() {
    let every = cpus_of(std::process::id())[0].1.clone();
    if every.len() == 1 {
        eprintln!("one CPU only ({every}): nothing to pin");
        return;
    }
    let mut agent = Agent::start();
    let mut raw = agent.raw().await;
    // A CPU this machine does not have: refused by the kernel, the agent serves
    // unpinned and the handshake goes through.
    handshake_on(&mut raw, PROTOCOL_VERSION, Some(1023))
        .await
        .unwrap();
    let pid = agent.child.id();
    assert!(
        cpus_of(pid).iter().all(|(_, l)| *l == every),
        "{:?}",
        cpus_of(pid)
    );
    handshake_on(&mut raw, PROTOCOL_VERSION, Some(1))
        .await
        .unwrap();
    let main = pid.to_string();
    for (tid, list) in cpus_of(pid) {
        let want = if tid == main { "1" } else { every.as_str() };
        assert_eq!(list, want, "thread {tid}");
    }
    // A command started after the pin has every CPU, not the serving thread's.
    let req = sandbox_agent::proto::ExecRequest {
        exec_id: "cpus".into(),
        argv: vec![
            "grep".into(),
            "Cpus_allowed_list".into(),
            "/proc/self/status".into(),
        ],
        ..Default::default()
    };
    let mut events = raw
        .exec(with_deadline(req, DEFAULT_CALL_DEADLINE))
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    while let Some(event) = events.message().await.unwrap() {
        if let Some(sandbox_agent::proto::exec_event::Event::Output(chunk)) = event.event {
            out.extend_from_slice(&chunk.data);
        }
    }
    let out = String::from_utf8_lossy(&out);
    assert_eq!(
        out.split(':').nth(1).map(str::trim),
        Some(every.as_str()),
        "{out}"
    );
    assert!(!agent.exited_within(Duration::ZERO).await);
}

#[tokio::test]
async fn calls_before_handshake_are_refused_then_served_after() {
    let agent = Agent::start();
    let mut raw = agent.raw().await;
    let err = raw
        .read(with_deadline(
            read_req(&agent.workspace.join("x")),
            DEFAULT_CALL_DEADLINE,
        ))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), ErrorCode::HandshakeRequired);
    assert!(err.message().contains("Handshake"), "{}", err.message());
    let info = handshake(&mut raw, PROTOCOL_VERSION).await.unwrap();
    assert_eq!(info.protocol_version, PROTOCOL_VERSION);
    assert_eq!(info.initial_cwd, agent.workspace.display().to_string());
}

#[tokio::test]
async fn unknown_protocol_version_is_refused_with_a_clear_error_and_agent_keeps_serving() {
    let agent = Agent::start();
    let mut raw = agent.raw().await;
    let err = handshake(&mut raw, PROTOCOL_VERSION + 41)
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), ErrorCode::UnsupportedProtocol);
    assert!(
        err.message()
            .contains(&format!("speaks version {PROTOCOL_VERSION}")),
        "{}",
        err.message()
    );
    // Still not handshaken: other calls stay refused.
    let err = raw
        .read(with_deadline(
            read_req(&agent.workspace.join("x")),
            DEFAULT_CALL_DEADLINE,
        ))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), ErrorCode::HandshakeRequired);
    // The right version is accepted on the same connection.
    handshake(&mut raw, PROTOCOL_VERSION).await.unwrap();
}

#[tokio::test]
async fn calls_without_a_deadline_are_refused() {
    let agent = Agent::start();
    let mut raw = agent.raw().await;
    handshake(&mut raw, PROTOCOL_VERSION).await.unwrap();
    let err = raw
        .read(tonic::Request::new(read_req(&agent.workspace.join("x"))))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), ErrorCode::DeadlineRequired);
}

#[tokio::test]
async fn oversized_message_is_refused_before_decoding_and_agent_keeps_serving() {
    let agent = Agent::start();
    let mut raw = agent.raw().await.max_encoding_message_size(usize::MAX);
    handshake(&mut raw, PROTOCOL_VERSION).await.unwrap();
    let huge = WriteRequest {
        path: agent.workspace.join("big").display().to_string(),
        content: vec![b'x'; MAX_MESSAGE_BYTES + 1024],
        create_parents: false,
    };
    let err = raw
        .write(with_deadline(huge, DEFAULT_CALL_DEADLINE))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::OutOfRange, "{err:?}");
    assert!(
        !agent.workspace.join("big").exists(),
        "nothing may be written"
    );
    // The connection and the agent survive.
    let err = raw
        .read(with_deadline(
            read_req(&agent.workspace.join("missing")),
            DEFAULT_CALL_DEADLINE,
        ))
        .await
        .unwrap_err();
    assert_ne!(code_of(&err), ErrorCode::HandshakeRequired);
}

/// Sends arbitrary bytes as a request body, so malformed protobuf reaches the agent.
#[derive(Clone, Default)]
struct RawCodec;
struct RawEncoder;
struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

#[tokio::test]
async fn malformed_protobuf_gets_a_clear_error_and_agent_keeps_serving() {
    let agent = Agent::start();
    let channel = unix_channel(agent.socket.clone()).await.unwrap();
    let mut typed = SandboxAgentClient::new(channel.clone());
    handshake(&mut typed, PROTOCOL_VERSION).await.unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let garbage: Vec<Vec<u8>> = vec![
        vec![0xff; 64],                           // invalid tags
        vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f], // a length far past the end
        vec![0x0a, 0x02, 0xc3, 0x28],             // a string field that is not UTF-8
    ];
    for body in garbage {
        grpc.ready().await.unwrap();
        let path = http::uri::PathAndQuery::from_static("/cordon.agent.v1.SandboxAgent/Read");
        let err = grpc
            .unary::<Vec<u8>, Vec<u8>, _>(
                with_deadline(body, DEFAULT_CALL_DEADLINE),
                path,
                RawCodec,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.code(),
                tonic::Code::Internal | tonic::Code::InvalidArgument
            ),
            "{err:?}"
        );
    }
    // Still serving on the same connection.
    let err = typed
        .read(with_deadline(
            read_req(&agent.workspace.join("missing")),
            DEFAULT_CALL_DEADLINE,
        ))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), ErrorCode::NotFound, "{err:?}");
}

#[tokio::test]
async fn a_second_controller_is_refused_while_the_first_keeps_working() {
    let agent = Agent::start();
    let mut first = AgentClient::connect_unix(&agent.socket).await.unwrap();
    let second = tokio::time::timeout(
        Duration::from_secs(5),
        AgentClient::connect_unix(&agent.socket),
    )
    .await;
    match second {
        Ok(Ok(_)) => panic!("a second controller was accepted"),
        Ok(Err(e)) => assert_eq!(e.code, ErrorCode::Io, "{e:?}"),
        Err(_) => panic!("second connection hung instead of being refused"),
    }
    let err = first
        .read(&agent.workspace.join("missing").display().to_string(), 0, 0)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn agent_exits_when_its_controller_goes_away() {
    let mut agent = Agent::start();
    let client = AgentClient::connect_unix(&agent.socket).await.unwrap();
    drop(client);
    assert!(
        agent.exited_within(Duration::from_secs(10)).await,
        "agent outlived its controller"
    );
}

#[tokio::test]
async fn shutdown_is_answered_then_the_agent_exits() {
    let mut agent = Agent::start();
    let mut client = AgentClient::connect_unix(&agent.socket).await.unwrap();
    client.shutdown().await.unwrap();
    assert!(
        agent.exited_within(Duration::from_secs(10)).await,
        "agent did not exit after shutdown"
    );
}

#[tokio::test]
async fn a_connection_abandoned_before_its_handshake_does_not_end_the_agent() {
    let mut agent = Agent::start();
    // Connect at the transport level and go away without a handshake (an aborted attempt).
    let raw = agent.raw().await;
    drop(raw);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !agent.exited_within(Duration::from_millis(200)).await,
        "the agent exited"
    );
    // The real controller still gets the agent, and then owns it for good.
    let mut client = AgentClient::connect_unix_waiting(&agent.socket, Duration::from_secs(5))
        .await
        .unwrap();
    let err = client
        .read(&agent.workspace.join("missing").display().to_string(), 0, 0)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    drop(client);
    assert!(
        agent.exited_within(Duration::from_secs(10)).await,
        "agent outlived its controller"
    );
}

#[tokio::test]
async fn a_socket_path_longer_than_sun_path_still_connects() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a".repeat(60)).join("b".repeat(60));
    std::fs::create_dir_all(&deep).unwrap();
    let socket = deep.join("agent.sock");
    assert!(socket.as_os_str().len() > 108);
    // Bind through a short alias of the same directory, as a sandbox does from inside.
    let alias = dir.path().join("s");
    std::os::unix::fs::symlink(&deep, &alias).unwrap();
    let listener = tokio::net::UnixListener::bind(alias.join("agent.sock")).unwrap();
    let accepted = tokio::spawn(async move { listener.accept().await.is_ok() });
    // A transport-level connect is enough to prove the path is reachable.
    let _ = sandbox_agent::client::unix_channel(socket).await;
    assert!(
        tokio::time::timeout(Duration::from_secs(5), accepted)
            .await
            .unwrap()
            .unwrap()
    );
}
