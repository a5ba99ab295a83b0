//! The loopback bridge: every TCP connection to 127.0.0.1:port inside the sandbox is
//! relayed to the egress proxy's Unix socket. The listener is bound before the agent
//! confines itself (its seccomp filter refuses new INET sockets when it was not granted
//! network); accepting on it and connecting to a Unix socket need nothing more.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixStream};

/// Binds the bridge's listener (call before confinement).
pub fn bind(port: u16) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Relays connections from `listener` to `proxy` until the task is dropped. A
/// connection the proxy cannot take is closed (the client sees a reset, not a hang).
pub async fn serve(listener: TcpListener, proxy: PathBuf) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(e) => {
                // Out of descriptors, most likely: let connections end before retrying.
                tracing::warn!("egress bridge accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let _ = client.set_nodelay(true);
            relay(client, &proxy).await;
        });
    }
}

async fn relay(client: tokio::net::TcpStream, proxy: &Path) {
    match UnixStream::connect(proxy).await {
        Ok(upstream) => {
            let _ = super::splice::relay(&client, &upstream).await;
        }
        Err(e) => tracing::warn!("egress proxy {} unreachable: {e}", proxy.display()),
    }
}
