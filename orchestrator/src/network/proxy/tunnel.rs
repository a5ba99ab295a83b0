//! Relays an allowed tunnel (CONNECT, SOCKS5) after checking what the client sends first:
//! a TLS ClientHello must name the host the tunnel was opened for (no domain fronting),
//! and port 443 carries TLS only.

use sandbox_agent::egress::splice::{self, SpliceSocket};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

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
        if first != FirstBytes::NeedMore || buf.len() >= MAX_RECORD {
            if let Err(why) = check_first_bytes(&first, host, port) {
                return refuse(why);
            }
            break;
        }
        if !buf.is_empty() && buf[0] != 0x16 {
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

fn refuse(why: String) -> Relayed {
    Relayed {
        refused: Some(why),
        ..Relayed::default()
    }
}
