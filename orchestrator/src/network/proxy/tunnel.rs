//! Relays an allowed tunnel (CONNECT, SOCKS5) after checking what the client sends first:
//! a TLS ClientHello must name the host the tunnel was opened for (no domain fronting),
//! port 443 carries TLS only, and plain HTTP elsewhere is checked and relayed as one
//! request, as a plain-HTTP request to the proxy is.

use sandbox_agent::egress::splice::{self, SpliceSocket};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http;
use super::sni::{FirstBytes, MAX_RECORD, inspect};
use crate::network::policy::normalize_host;

/// Bytes each way, why the tunnel was cut when a check refused it, and the brokered
/// credential added to its request, if any.
#[derive(Debug, Default)]
pub struct Relayed {
    pub up: u64,
    pub down: u64,
    pub refused: Option<String>,
    pub credential: Option<super::record::CredentialUse>,
}

/// What the first bytes mean for a tunnel to `host:port`: `Ok(())` to relay, `Err(why)`.
pub fn check_first_bytes(first: &FirstBytes, host: &str, port: u16) -> Result<(), String> {
    match first {
        FirstBytes::ClientHello {
            server_name: Some(sni),
        } if normalize_host(sni) != normalize_host(host) => Err(format!(
            "TLS server name {sni:?} differs from the tunnel's host {host:?}"
        )),
        FirstBytes::ClientHello { .. } => Ok(()),
        FirstBytes::Malformed(why) => Err(format!("TLS ClientHello refused: {why}")),
        FirstBytes::NotTls if port == 443 => Err("port 443 carries TLS only".into()),
        FirstBytes::NotTls | FirstBytes::NeedMore => Ok(()),
    }
}

/// Reads the client's first bytes (starting with `early`, already read), checks them, then
/// relays both ways until each side closed (in the kernel: [`splice`]).
///
/// Security: nothing the client sends reaches the server before the check passed. A
/// server that speaks first (SSH, SMTP) ends the wait: a TLS client never waits for the
/// server, so on port 443 that is refused, elsewhere the tunnel is relayed unchecked.
pub async fn relay<C>(
    mut client: C,
    mut upstream: TcpStream,
    early: Vec<u8>,
    host: &str,
    port: u16,
) -> Relayed
where
    C: AsyncRead + AsyncWrite + SpliceSocket + Unpin + Sync,
{
    let mut buf = early;
    loop {
        let first = inspect(&buf);
        // Plain bytes that may yet turn out an HTTP request line are read on.
        let undecided = first == FirstBytes::NotTls && http::starts_like_request(&buf).is_none();
        if (first != FirstBytes::NeedMore && !undecided) || buf.len() >= MAX_RECORD {
            if let Err(why) = check_first_bytes(&first, host, port) {
                return refuse(why);
            }
            break;
        }
        if !buf.is_empty() && buf[0] != 0x16 && http::starts_like_request(&buf).is_some() {
            break;
        }
        tokio::select! {
            read = client.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => {
                    // The client closed before sending anything checkable: nothing leaves.
                    return Relayed::default();
                }
                Ok(_) => {}
            },
            _ = upstream.readable(), if buf.is_empty() => {
                if port == 443 {
                    return refuse("the server spoke first on port 443".into());
                }
                break;
            }
        }
    }
    if http::starts_like_request(&buf) == Some(true) {
        return http_request(client, upstream, buf, host, port).await;
    }
    let mut out = Relayed::default();
    if !buf.is_empty() {
        if upstream.write_all(&buf).await.is_err() {
            return out;
        }
        out.up = buf.len() as u64;
    }
    if let Ok((up, down)) = splice::relay(&client, &upstream).await {
        out.up += up;
        out.down = down;
    }
    let _ = client.shutdown().await;
    out
}

/// Plain HTTP inside a tunnel (its first bytes a request line): the head is read whole and
/// checked ([`http::tunnel_request`]), then the one request and its body go to the server,
/// and only its answer comes back, as for a plain-HTTP request to the proxy.
async fn http_request<C>(
    mut client: C,
    mut upstream: TcpStream,
    mut buf: Vec<u8>,
    host: &str,
    port: u16,
) -> Relayed
where
    C: AsyncRead + AsyncWrite + SpliceSocket + Unpin + Sync,
{
    let end = loop {
        if let Some(i) = http::head_end(&buf) {
            break i;
        }
        if buf.len() > http::MAX_HEAD {
            return refuse_client(&mut client, 400, "request head too large").await;
        }
        match client.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return Relayed::default(),
            Ok(_) => {}
        }
    };
    let early = buf.split_off(end);
    let (head, body) = match http::tunnel_request(&buf, host, port) {
        Ok(checked) => checked,
        Err(e) => return refuse_client(&mut client, e.status, &e.why).await,
    };
    let mut out = Relayed::default();
    if upstream.write_all(&head).await.is_err() {
        return out;
    }
    match crate::network::broker::relay::body(&mut client, early, body, &mut upstream).await {
        Ok(sent) => out.up = head.len() as u64 + sent,
        Err(e) => return refuse(format!("the request body: {e}")),
    }
    if let Ok(down) = splice::one_way(&upstream, &client).await {
        out.down = down;
    }
    out
}

/// Answers a refused request inside a tunnel as the proxy answers one outside it.
async fn refuse_client<C: AsyncWrite + Unpin>(client: &mut C, status: u16, why: &str) -> Relayed {
    let _ = client.write_all(&http::error_response(status, why)).await;
    let _ = client.shutdown().await;
    refuse(why.to_string())
}

fn refuse(why: String) -> Relayed {
    Relayed {
        refused: Some(why),
        ..Relayed::default()
    }
}
