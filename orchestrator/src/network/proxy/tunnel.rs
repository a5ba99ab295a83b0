//! Relays an allowed tunnel (CONNECT, SOCKS5) after checking what the client sends first:
//! a TLS ClientHello must name the host the tunnel was opened for (no domain fronting)
//! and, unless the operator allowed it, must not be an encrypted one (ECH), port 443 carries TLS only, and plain HTTP elsewhere is checked and relayed as one
//! request, as a plain-HTTP request to the proxy is.

use sandbox_agent::egress::splice::{self, SpliceSocket};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http;
use super::sni::{FirstBytes, MAX_RECORD, ServerFirst, inspect, second_hello, server_first};
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
/// `allow_ech`: the operator's `sandbox.network.allowEncryptedClientHello`.
pub fn check_first_bytes(
    first: &FirstBytes,
    host: &str,
    port: u16,
    allow_ech: bool,
) -> Result<(), String> {
    match first {
        FirstBytes::ClientHello {
            server_name: Some(sni),
            ..
        } if normalize_host(sni) != normalize_host(host) => Err(format!(
            "TLS server name {sni:?} differs from the tunnel's host {host:?}"
        )),
        // Security: an encrypted ClientHello seals the name the server acts on; the outer
        // name checked above may be the allowed host while the sealed one is another site
        // of the same front server (fronting the proxy cannot see). A client that only
        // pretends (a decoy, as Chromium sends by default) is refused as well: the two
        // look alike by design.
        FirstBytes::ClientHello { ech: true, .. } if !allow_ech => Err(format!(
            "an encrypted TLS ClientHello (ECH) to {host:?}: the server name it seals is \
             out of the proxy's sight (the user's or the managed settings may allow it: \
             sandbox.network.allowEncryptedClientHello; Chromium sends none under its \
             EncryptedClientHelloEnabled=false policy)"
        )),
        // Security: with no name the server answers as its default site, which may be
        // any it hosts (fronting by omission). Clients name the host they dial whenever
        // it is a dotted name; only a tunnel to an address or a single label goes
        // without.
        FirstBytes::ClientHello {
            server_name: None, ..
        } if named_host(host) => Err(format!(
            "a TLS ClientHello without a server name, to the named host {host:?}"
        )),
        FirstBytes::ClientHello { .. } => Ok(()),
        FirstBytes::Malformed(why) => Err(format!("TLS ClientHello refused: {why}")),
        FirstBytes::NotTls if port == 443 => Err("port 443 carries TLS only".into()),
        FirstBytes::NotTls | FirstBytes::NeedMore => Ok(()),
    }
}

/// Whether `host` is a name that clients send in SNI: a dotted name, not an address. Java
/// and others send none for a single label (`nexus`), which names no site of a shared
/// server either.
fn named_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>().is_err() && bare.trim_end_matches('.').contains('.')
}

/// How long the server's first answer and a second ClientHello may take: a slot held by a
/// handshake that never goes on is given back.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

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
    allow_ech: bool,
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
            if let Err(why) = check_first_bytes(&first, host, port, allow_ech) {
                return refuse(why);
            }
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
    let hello = matches!(inspect(&buf), FirstBytes::ClientHello { .. });
    // Security: a second ClientHello sent ahead, in the first flight, would reach a server
    // that asks for one again (a HelloRetryRequest) unread: only the first hello and
    // non-handshake records (early data) may come before the server answers.
    if hello && more_handshake_after_first(&buf) {
        return refuse("more than one handshake record before the server's answer".into());
    }
    if !buf.is_empty() {
        if upstream.write_all(&buf).await.is_err() {
            return out;
        }
        out.up = buf.len() as u64;
    }
    if hello {
        match second_look(&mut client, &mut upstream, host, port, allow_ech).await {
            Ok((up, down)) => {
                out.up += up;
                out.down += down;
            }
            Err(Stop::Refused(why)) => {
                let mut refused = refuse(why);
                refused.up = out.up;
                return refused;
            }
            Err(Stop::Ended) => return out,
        }
    }
    if let Ok((up, down)) = splice::relay(&client, &upstream).await {
        out.up += up;
        out.down += down;
    }
    let _ = client.shutdown().await;
    out
}

/// Whether `buf` (a first TLS record, a ClientHello, and what came with it) holds a
/// further handshake record.
fn more_handshake_after_first(buf: &[u8]) -> bool {
    let mut rest = buf;
    let mut first = true;
    while rest.len() >= 5 {
        if rest[0] == 0x16 && !first {
            return true;
        }
        first = false;
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        rest = rest.get(5 + len..).unwrap_or_default();
    }
    false
}

/// Why [`second_look`] stopped the tunnel.
enum Stop {
    /// A check refused what the client sent.
    Refused(String),
    /// A side closed or failed: nothing more to relay.
    Ended,
}

/// After the client's ClientHello went out: reads the server's first records and passes
/// them on; when they are a HelloRetryRequest, reads the client's second ClientHello and
/// checks it as the first was before it goes out. The bytes relayed each way.
///
/// Security: a second ClientHello may name another host than the first (the server
/// asked for it again); a server that routes by it would be fronted past the first check.
async fn second_look<C>(
    client: &mut C,
    upstream: &mut TcpStream,
    host: &str,
    port: u16,
    allow_ech: bool,
) -> Result<(u64, u64), Stop>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let mut down = Vec::new();
    let first = loop {
        match server_first(&down) {
            ServerFirst::NeedMore if down.len() < 2 * MAX_RECORD => {}
            ServerFirst::NeedMore => break ServerFirst::Other,
            decided => break decided,
        }
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, upstream.read_buf(&mut down)).await {
            Ok(Ok(0) | Err(_)) => break ServerFirst::Other,
            Err(_) => return Err(Stop::Ended),
            Ok(Ok(_)) => {}
        }
    };
    if !down.is_empty() && client.write_all(&down).await.is_err() {
        return Err(Stop::Ended);
    }
    if first != ServerFirst::HelloRetry {
        return Ok((0, down.len() as u64));
    }
    let mut up = Vec::new();
    let second = loop {
        match second_hello(&up) {
            FirstBytes::NeedMore if up.len() < 2 * MAX_RECORD => {}
            other => break other,
        }
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, client.read_buf(&mut up)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => return Err(Stop::Ended),
            Ok(Ok(_)) => {}
        }
    };
    if !matches!(second, FirstBytes::ClientHello { .. }) {
        return Err(Stop::Refused(
            "after a HelloRetryRequest the client sent no second ClientHello".into(),
        ));
    }
    check_first_bytes(&second, host, port, allow_ech).map_err(|why| {
        Stop::Refused(format!(
            "second ClientHello (after a HelloRetryRequest): {why}"
        ))
    })?;
    upstream.write_all(&up).await.map_err(|_| Stop::Ended)?;
    Ok((up.len() as u64, down.len() as u64))
}

/// Plain HTTP inside a tunnel (its first bytes a request line): the head is read whole and
/// checked ([`http::tunnel_request`]), then it goes as the connection's one request
/// ([`one_request`]), as a plain-HTTP request to the proxy does.
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
    let mut search = http::HeadSearch::default();
    let end = loop {
        if let Some(i) = search.end(&buf) {
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
    match one_request(&mut client, &mut upstream, &head, early, body).await {
        Ok((up, down)) => Relayed {
            up,
            down,
            ..Relayed::default()
        },
        Err(OneRequestError::Send) => Relayed::default(),
        Err(OneRequestError::Body(e)) => refuse(format!("the request body: {e}")),
    }
}

/// Why [`one_request`] stopped before the answer.
#[derive(Debug)]
pub enum OneRequestError {
    /// The head could not be sent (the server is gone): nothing was relayed.
    Send,
    /// The client's body was cut short or malformed, or the server stopped taking it.
    Body(std::io::Error),
}

/// Sends `head` (checked, and asking the server to close after its answer), then the one
/// body `body` frames, starting with `early`, and not a byte past it; then relays the
/// server's answer alone until it closes. The bytes sent each way.
///
/// Security: a second request pipelined behind the first (naming another Host, which no
/// check saw) never reaches the server; what the client sends past the body stays unread.
pub async fn one_request<C>(
    client: &mut C,
    upstream: &mut TcpStream,
    head: &[u8],
    early: Vec<u8>,
    body: http::Body,
) -> Result<(u64, u64), OneRequestError>
where
    C: AsyncRead + AsyncWrite + SpliceSocket + Unpin,
{
    upstream
        .write_all(head)
        .await
        .map_err(|_| OneRequestError::Send)?;
    let sent = crate::network::broker::relay::body(client, early, body, upstream)
        .await
        .map_err(OneRequestError::Body)?;
    let down = splice::one_way(&*upstream, &*client).await.unwrap_or(0);
    Ok((head.len() as u64 + sent, down))
}

/// Answers a refused request inside a tunnel as the proxy answers one outside it.
async fn refuse_client<C: AsyncWrite + Unpin>(client: &mut C, status: u16, why: &str) -> Relayed {
    http::send_error(client, status, why).await;
    refuse(why.to_string())
}

fn refuse(why: String) -> Relayed {
    Relayed {
        refused: Some(why),
        ..Relayed::default()
    }
}
