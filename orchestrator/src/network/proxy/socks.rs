//! The SOCKS5 side of the proxy (RFC 1928): no authentication, CONNECT only (BIND and
//! UDP ASSOCIATE would open paths the policy does not see), names resolved by the proxy
//! (`socks5h`), so the sandbox never needs DNS to use it.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Reply codes the proxy sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reply {
    Succeeded = 0,
    GeneralFailure = 1,
    NotAllowed = 2,
    HostUnreachable = 4,
    ConnectionRefused = 5,
    CommandNotSupported = 7,
    AddressNotSupported = 8,
}

/// Why the SOCKS greeting or request was refused.
#[derive(Debug, thiserror::Error)]
pub enum SocksError {
    #[error("reading the SOCKS request: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Refused(String),
}

/// Reads the greeting and the CONNECT request; the first byte (5) was already read and
/// is `version`. Answers the greeting; the request's reply is the caller's.
pub async fn read_request<S>(stream: &mut S) -> Result<(String, u16), SocksError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let n = usize::from(stream.read_u8().await?);
    let mut methods = vec![0u8; n];
    stream.read_exact(&mut methods).await?;
    if !methods.contains(&0) {
        stream.write_all(&[5, 0xff]).await?;
        return Err(SocksError::Refused(
            "the client offers no method without authentication".into(),
        ));
    }
    stream.write_all(&[5, 0]).await?;
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await?;
    if head[0] != 5 {
        return Err(SocksError::Refused("not a SOCKS5 request".into()));
    }
    if head[1] != 1 {
        reply(stream, Reply::CommandNotSupported).await?;
        return Err(SocksError::Refused(format!(
            "SOCKS command {} is not CONNECT",
            head[1]
        )));
    }
    let host = match head[3] {
        1 => {
            let mut a = [0u8; 4];
            stream.read_exact(&mut a).await?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            stream.read_exact(&mut a).await?;
            std::net::Ipv6Addr::from(a).to_string()
        }
        3 => {
            let len = usize::from(stream.read_u8().await?);
            let mut name = vec![0u8; len];
            stream.read_exact(&mut name).await?;
            String::from_utf8(name)
                .map_err(|_| SocksError::Refused("host name is not text".into()))?
        }
        other => {
            reply(stream, Reply::AddressNotSupported).await?;
            return Err(SocksError::Refused(format!("SOCKS address type {other}")));
        }
    };
    let port = stream.read_u16().await?;
    Ok((host, port))
}

/// Sends a reply (the bound address is not disclosed: 0.0.0.0:0).
pub async fn reply<S: AsyncWrite + Unpin>(stream: &mut S, code: Reply) -> std::io::Result<()> {
    stream
        .write_all(&[5, code as u8, 0, 1, 0, 0, 0, 0, 0, 0])
        .await
}
