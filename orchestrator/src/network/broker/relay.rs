//! A brokered tunnel: the client's TLS terminated with the session CA's leaf for the
//! tunnel's host, the server's TLS verified, and one request relayed with the credential.
//!
//! Order, each step refusing (and recorded) before anything reaches the server:
//! 1. the ClientHello's server name must be the tunnel's host (no fronting);
//! 2. the handshake with the client completes (it trusts the session CA);
//! 3. the request head's Host names the tunnel's host (else 403);
//! 4. the server's certificate verifies for the tunnel's host against the host's roots
//!    (else the client is answered 502: the credential never goes to an unverified peer);
//! 5. the head goes with the credential, then the body up to its end, and the response
//!    comes back until the server closes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::server::Acceptor;
use tokio_rustls::{LazyConfigAcceptor, TlsConnector};

use super::http1::{self, Body, ChunkedEnd};
use super::{Broker, Credential};
use crate::network::policy::normalize_host;
use crate::network::proxy::http::{MAX_HEAD, error_response};
use crate::network::proxy::record::CredentialUse;
use crate::network::proxy::tunnel::Relayed;

/// Bytes read or written at once.
const CHUNK: usize = 16 * 1024;

/// Relays a tunnel to `host:port` (normalized) whose client speaks to the proxy as the
/// server, adding `cred` to its request. `early`: client bytes already read.
pub async fn relay<C>(
    client: C,
    upstream: TcpStream,
    early: Vec<u8>,
    host: &str,
    port: u16,
    broker: &Broker,
    cred: &Credential,
) -> Relayed
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let client = Prefixed {
        early,
        at: 0,
        inner: client,
    };
    let start = match LazyConfigAcceptor::new(Acceptor::default(), client).await {
        Ok(s) => s,
        Err(e) => return refuse(format!("a brokered domain takes TLS only: {e}")),
    };
    if let Some(sni) = start.client_hello().server_name()
        && normalize_host(sni) != host
    {
        return refuse(format!(
            "TLS server name {sni:?} differs from the tunnel's host {host:?}"
        ));
    }
    let config = match broker.ca.server_config(host) {
        Ok(c) => c,
        Err(e) => return refuse(e.to_string()),
    };
    let client = match start.into_stream(config).await {
        Ok(c) => c,
        Err(e) => return refuse(format!("TLS handshake with the client failed: {e}")),
    };
    exchange(client, upstream, host, port, broker, cred).await
}

/// The TLS connection to the server, its certificate verified for `host`.
async fn verified_server(
    broker: &Broker,
    host: &str,
    upstream: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host:?} is not a TLS server name: {e}"))?;
    TlsConnector::from(broker.client.clone())
        .connect(name, upstream)
        .await
        .map_err(|e| {
            format!(
                "TLS with {host} failed (its certificate must verify against the host's roots): {e}"
            )
        })
}

/// The one request, checked before the server's TLS starts, and its response.
async fn exchange<C>(
    mut client: C,
    upstream: TcpStream,
    host: &str,
    port: u16,
    broker: &Broker,
    cred: &Credential,
) -> Relayed
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = Vec::new();
    let end = match read_head(&mut client, &mut buf).await {
        Ok(Some(end)) => end,
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            let why = "the request head is larger than 64 KiB";
            let _ = client.write_all(&error_response(400, why)).await;
            let _ = client.shutdown().await;
            return refuse(why.into());
        }
        // The client closed (or broke off) before a whole request: nothing was sent.
        Ok(None) | Err(_) => return Relayed::default(),
    };
    let leftover = buf.split_off(end);
    let forward = match http1::request(&buf, host, port, cred) {
        Ok(f) => f,
        Err(e) => {
            let _ = client.write_all(&error_response(e.status, &e.why)).await;
            let _ = client.shutdown().await;
            return refuse(e.why);
        }
    };
    let mut server = match verified_server(broker, host, upstream).await {
        Ok(s) => s,
        Err(why) => {
            let _ = client.write_all(&error_response(502, &why)).await;
            let _ = client.shutdown().await;
            return refuse(why);
        }
    };
    let mut out = Relayed {
        credential: Some(CredentialUse {
            header: cred.header.clone(),
            from: cred.from.clone(),
        }),
        ..Relayed::default()
    };
    if server.write_all(&forward.head).await.is_err() || server.flush().await.is_err() {
        return out;
    }
    out.up = forward.head.len() as u64;
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut sr, mut sw) = tokio::io::split(server);
    let up = body(&mut cr, leftover, forward.body, &mut sw);
    let down = response(&mut sr, &mut cw);
    tokio::pin!(up, down);
    let mut up_done = false;
    loop {
        tokio::select! {
            r = &mut up, if !up_done => {
                up_done = true;
                match r {
                    Ok(n) => out.up += n,
                    // The client cut its body short or framed it wrong: the server would
                    // wait for the rest, so the request is abandoned.
                    Err(e) if matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData) => break,
                    // The server stopped reading (it may answer early): its answer comes.
                    Err(_) => {}
                }
            },
            r = &mut down => {
                out.down = r.unwrap_or_else(|(n, _)| n);
                break;
            }
        }
    }
    out
}

/// Reads into `buf` until it holds a whole head; `Some(end)` just past its blank line,
/// `None` when the peer closed first.
async fn read_head<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> io::Result<Option<usize>> {
    let mut searched = 0;
    loop {
        if let Some(i) = buf[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(searched + i + 4));
        }
        searched = buf.len().saturating_sub(3);
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "head too large"));
        }
        let mut chunk = [0u8; CHUNK];
        match read_or_end(r, &mut chunk).await? {
            0 => return Ok(None),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A read where a peer that closed its TLS without close_notify counts as an end.
async fn read_or_end<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    match r.read(buf).await {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
        other => other,
    }
}

/// Sends the request's body (starting with `leftover`) and not a byte past its end.
/// Reading the client fails as `UnexpectedEof` (or `InvalidData` for a malformed chunked
/// body); any other error is the server's side.
pub(crate) async fn body<R, W>(
    client: &mut R,
    leftover: Vec<u8>,
    framing: Body,
    server: &mut W,
) -> io::Result<u64>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut sent = 0u64;
    let mut chunk = leftover;
    let mut buf = vec![0u8; CHUNK];
    match framing {
        Body::None => {}
        Body::Length(len) => {
            while sent < len {
                if chunk.is_empty() {
                    let want = usize::try_from(len - sent).unwrap_or(CHUNK).min(CHUNK);
                    let n = more_body(client, &mut buf[..want]).await?;
                    chunk = buf[..n].to_vec();
                }
                let take = usize::try_from(len - sent)
                    .unwrap_or(usize::MAX)
                    .min(chunk.len());
                server.write_all(&chunk[..take]).await?;
                server.flush().await?;
                sent += take as u64;
                chunk.clear();
            }
        }
        Body::Chunked => {
            let mut end = ChunkedEnd::default();
            loop {
                let found = end
                    .feed(&chunk)
                    .map_err(|why| io::Error::new(io::ErrorKind::InvalidData, why))?;
                let take = found.unwrap_or(chunk.len());
                server.write_all(&chunk[..take]).await?;
                server.flush().await?;
                sent += take as u64;
                if found.is_some() {
                    break;
                }
                let n = more_body(client, &mut buf).await?;
                chunk = buf[..n].to_vec();
            }
        }
    }
    Ok(sent)
}

/// The next bytes of the client's body; its end or any failure is a body cut short.
async fn more_body<R: AsyncRead + Unpin>(client: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    match read_or_end(client, buf).await {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the request body was cut short",
        )),
    }
}

/// Relays the response (informational heads first) until the server closes; the bytes
/// sent, or those sent so far and the error.
async fn response<R, W>(server: &mut R, client: &mut W) -> Result<u64, (u64, io::Error)>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut sent = 0u64;
    let mut buf = Vec::new();
    loop {
        let end = match read_head(server, &mut buf).await {
            Ok(Some(end)) => end,
            Ok(None) => {
                return Err(gateway(client, sent, "the server closed before it answered").await);
            }
            Err(e) => {
                return Err(
                    gateway(client, sent, &format!("reading the server's answer: {e}")).await,
                );
            }
        };
        let rest = buf.split_off(end);
        let (head, informational) = match http1::response(&buf) {
            Ok(r) => r,
            Err(e) => return Err(gateway(client, sent, &e.why).await),
        };
        client.write_all(&head).await.map_err(|e| (sent, e))?;
        sent += head.len() as u64;
        buf = rest;
        if !informational {
            break;
        }
    }
    client.write_all(&buf).await.map_err(|e| (sent, e))?;
    sent += buf.len() as u64;
    let mut chunk = vec![0u8; CHUNK];
    loop {
        client.flush().await.map_err(|e| (sent, e))?;
        let n = read_or_end(server, &mut chunk)
            .await
            .map_err(|e| (sent, e))?;
        if n == 0 {
            break;
        }
        client.write_all(&chunk[..n]).await.map_err(|e| (sent, e))?;
        sent += n as u64;
    }
    let _ = client.shutdown().await;
    Ok(sent)
}

/// Answers 502 when nothing of the response went to the client yet.
async fn gateway<W: AsyncWrite + Unpin>(client: &mut W, sent: u64, why: &str) -> (u64, io::Error) {
    if sent == 0 {
        let _ = client.write_all(&error_response(502, why)).await;
        let _ = client.shutdown().await;
    }
    (sent, io::Error::other(why.to_string()))
}

fn refuse(why: String) -> Relayed {
    Relayed {
        refused: Some(why),
        ..Relayed::default()
    }
}

/// A stream whose first bytes were already read: those, then the stream.
struct Prefixed<S> {
    early: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.early.len() {
            let n = buf.remaining().min(this.early.len() - this.at);
            buf.put_slice(&this.early[this.at..this.at + n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
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
