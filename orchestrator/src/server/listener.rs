//! What the server accepts connections through: TCP, optionally TLS (rustls, from a PEM
//! certificate chain and key), behind a cap on open connections. TLS handshakes run in
//! their own tasks with a deadline, so a slow or silent client never holds up the others;
//! a connection counts against the cap from accept until it closes.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the certificate chain {path}: {source}")]
    Cert {
        path: String,
        source: tokio_rustls::rustls::pki_types::pem::Error,
    },
    #[error("reading the private key {path}: {source}")]
    Key {
        path: String,
        source: tokio_rustls::rustls::pki_types::pem::Error,
    },
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] tokio_rustls::rustls::Error),
}

/// A TLS acceptor from PEM files.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Cert {
            path: cert.display().to_string(),
            source,
        })?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key {
        path: key.display().to_string(),
        source,
    })?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A stream that holds one connection slot until it is dropped.
pub struct Capped<S> {
    inner: S,
    _slot: OwnedSemaphorePermit,
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Capped<S> {
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

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Plain TCP with at most `max` open connections.
pub struct CappedTcp {
    listener: TcpListener,
    slots: Arc<Semaphore>,
}

impl CappedTcp {
    pub fn new(listener: TcpListener, max: usize) -> Self {
        Self {
            listener,
            slots: Arc::new(Semaphore::new(max.max(1))),
        }
    }
}

/// Waits for a free slot (the semaphore is never closed).
async fn slot(slots: &Arc<Semaphore>) -> OwnedSemaphorePermit {
    loop {
        if let Ok(permit) = slots.clone().acquire_owned().await {
            return permit;
        }
        tokio::task::yield_now().await;
    }
}

/// Accepts one TCP connection, retrying (after a pause) on errors such as EMFILE.
async fn accept_tcp(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

impl Listener for CappedTcp {
    type Io = Capped<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let permit = slot(&self.slots).await;
        let (stream, addr) = accept_tcp(&self.listener).await;
        let _ = stream.set_nodelay(true);
        (
            Capped {
                inner: stream,
                _slot: permit,
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

type TlsIo = tokio_rustls::server::TlsStream<TcpStream>;

/// TLS over TCP with at most `max` open connections (handshakes in flight included).
pub struct CappedTls {
    addr: SocketAddr,
    ready: mpsc::Receiver<(Capped<TlsIo>, SocketAddr)>,
}

impl CappedTls {
    /// Starts accepting in the background.
    pub fn new(listener: TcpListener, max: usize, acceptor: TlsAcceptor) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        let slots = Arc::new(Semaphore::new(max.max(1)));
        let (tx, ready) = mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let permit = slot(&slots).await;
                let (stream, peer) = accept_tcp(&listener).await;
                let (acceptor, handed) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let io = Capped {
                                inner: tls,
                                _slot: permit,
                            };
                            let _ = handed.send((io, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(Self { addr, ready })
    }
}

impl Listener for CappedTls {
    type Io = Capped<TlsIo>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept task ends only when this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
