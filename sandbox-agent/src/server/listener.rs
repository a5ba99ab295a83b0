//! One controller, and only one: the first peer that connects to the agent's socket is
//! its controller for life. Every later connection is closed unanswered, so a process
//! inside the sandbox that finds the socket cannot drive the agent. When the controller's
//! connection ends (session over, orchestrator dead), the agent shuts down and takes every
//! process it started with it. A connection that ends before its handshake completed (a
//! connect attempt the orchestrator abandoned) frees the slot instead: the orchestrator
//! retries, and only a handshaken controller owns the agent for good.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;
use tonic::transport::server::Connected;

/// Decides which peer becomes the controller.
#[derive(Debug)]
pub struct ControllerGate {
    taken: AtomicBool,
    /// Set by the service when a controller completes the handshake.
    handshaken: Arc<AtomicBool>,
    /// Refuse peers whose pid is visible in our pid namespace: the real controller lives
    /// outside the sandbox, so a visible pid means a sandboxed process is knocking.
    require_outside_peer: bool,
}

impl ControllerGate {
    pub fn new(require_outside_peer: bool, handshaken: Arc<AtomicBool>) -> Self {
        Self {
            taken: AtomicBool::new(false),
            handshaken,
            require_outside_peer,
        }
    }

    /// The controller's connection ended: true when the agent should shut down (the
    /// controller had handshaken); otherwise the slot is freed for another attempt.
    fn controller_left(&self) -> bool {
        if self.handshaken.load(Ordering::Acquire) {
            return true;
        }
        self.taken.store(false, Ordering::Release);
        false
    }

    /// Admits `stream` as the controller, or says why not.
    pub fn admit(&self, stream: &UnixStream) -> Result<(), String> {
        if self.require_outside_peer {
            let cred = stream
                .peer_cred()
                .map_err(|e| format!("cannot read peer credentials: {e}"))?;
            // SO_PEERCRED reports pid 0 for a peer in a pid namespace we cannot see into,
            // i.e. an ancestor namespace: the orchestrator. Anything else is inside.
            if cred.pid().unwrap_or(0) != 0 {
                return Err(format!("peer pid {:?} is inside the sandbox", cred.pid()));
            }
        }
        if self.taken.swap(true, Ordering::AcqRel) {
            return Err("a controller is already connected".to_string());
        }
        Ok(())
    }
}

/// Serves `server` on `listener` to exactly one controller, until the controller leaves or
/// `shutdown` is notified.
pub async fn serve_unix<S>(
    listener: UnixListener,
    server: S,
    gate: Arc<ControllerGate>,
    shutdown: Arc<Notify>,
) -> Result<(), tonic::transport::Error>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let gone = shutdown.clone();
    let incoming = futures::stream::unfold(
        (listener, gate, gone),
        |(listener, gate, gone)| async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => match gate.admit(&stream) {
                        Ok(()) => {
                            tracing::info!("controller connected");
                            let conn = ControllerConn {
                                inner: stream,
                                gone: gone.clone(),
                                gate: gate.clone(),
                            };
                            return Some((Ok::<_, io::Error>(conn), (listener, gate, gone)));
                        }
                        Err(why) => {
                            tracing::warn!(%why, "refused a connection");
                            drop(stream);
                        }
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                }
            }
        },
    );
    tonic::transport::Server::builder()
        .add_service(server)
        .serve_with_incoming_shutdown(incoming, async move { shutdown.notified().await })
        .await
}

/// The controller's connection. Dropping it (the peer hung up) asks the agent to shut down.
struct ControllerConn {
    inner: UnixStream,
    gone: Arc<Notify>,
    gate: Arc<ControllerGate>,
}

impl Drop for ControllerConn {
    fn drop(&mut self) {
        if self.gate.controller_left() {
            tracing::info!("controller disconnected; shutting down");
            self.gone.notify_one();
        } else {
            tracing::info!("a connection left before its handshake; waiting for the controller");
        }
    }
}

impl Connected for ControllerConn {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for ControllerConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ControllerConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
