//! Egress from inside the sandbox: the sandbox's network namespace has only `lo`, so the
//! one way out is the orchestrator's proxy, reached through a Unix socket in the
//! session's socket dir.
//!
//! - [`bridge`]: 127.0.0.1:[`EgressConfig::port`] inside the namespace, relayed to the
//!   proxy's Unix socket (in the agent's own runtime: no socat, no extra process).
//! - [`dns`]: a stub on 127.0.0.1:53 answering the names the policy allows (with a
//!   placeholder address) and REFUSED for the rest, so no query leaves as data.
//! - [`policy`]: the allow and deny entries, shared with the orchestrator.
//! - [`splice`]: relaying between two sockets inside the kernel (the bridge and the
//!   orchestrator's proxy).
//! - [`ca`]: trust for the session CA of brokered credentials (the bundle and its
//!   variables), when the session has one.
//! - [`proxy_env`]: the variables every command gets so tools find the proxy.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub mod bridge;
pub mod ca;
pub mod dns;
pub mod policy;
pub mod splice;

/// The default port of the bridge inside the sandbox (HTTP and SOCKS5 on one port: the
/// proxy tells them apart by the first byte).
pub const DEFAULT_PORT: u16 = 3128;
/// Where the proxy's socket appears inside the sandbox (in the session's socket dir).
pub const PROXY_SOCKET_NAME: &str = "egress.sock";

/// What the agent needs to give its commands a way out.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EgressConfig {
    /// The proxy's Unix socket, as seen inside the sandbox.
    pub proxy_socket: PathBuf,
    /// The loopback port the bridge listens on.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Serve the DNS stub on 127.0.0.1:53 (the backend points resolv.conf at it).
    #[serde(default)]
    pub dns: bool,
    /// The session's policy: the DNS stub answers by it (the proxy enforces it).
    pub policy: policy::NetworkPolicy,
    /// The session CA to trust (only with brokered credentials: every other tunnel is the
    /// client's own TLS). Left out of the JSON when absent, so a session without brokered
    /// credentials hands an agent the same configuration as before they existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<ca::CaTrust>,
}

impl EgressConfig {
    /// The variables every command starts with: the proxy's, and the CA bundle's when the
    /// session has one.
    pub fn command_env(&self) -> Vec<(String, String)> {
        let mut env = proxy_env(self.port);
        if let Some(ca) = &self.ca {
            env.extend(ca::ca_env(&ca.bundle));
        }
        env
    }
}

/// The egress sockets, bound before the agent confines itself.
#[derive(Debug)]
pub struct Bound {
    bridge: std::net::TcpListener,
    dns: Option<std::net::UdpSocket>,
    config: EgressConfig,
}

impl Bound {
    /// Binds 127.0.0.1:port and, when asked, 127.0.0.1:53.
    pub fn bind(config: &EgressConfig) -> std::io::Result<Bound> {
        let dns = match config.dns {
            true => Some(dns::bind(std::net::SocketAddr::from((
                std::net::Ipv4Addr::LOCALHOST,
                53,
            )))?),
            false => None,
        };
        Ok(Bound {
            bridge: bridge::bind(config.port)?,
            dns,
            config: config.clone(),
        })
    }

    /// Serves both on the current tokio runtime.
    pub fn spawn(self) -> std::io::Result<()> {
        let bridge = tokio::net::TcpListener::from_std(self.bridge)?;
        tokio::spawn(bridge::serve(bridge, self.config.proxy_socket.clone()));
        if let Some(dns) = self.dns {
            let dns = tokio::net::UdpSocket::from_std(dns)?;
            tokio::spawn(dns::serve(dns, self.config.policy));
        }
        Ok(())
    }
}

fn default_port() -> u16 {
    DEFAULT_PORT
}

/// The proxy variables for every command: the common spellings, and the settings pip,
/// npm, cargo, git (through libcurl's `http_proxy`/`https_proxy`) and curl read.
/// `NO_PROXY` names the sandbox's own loopback only: local servers a command starts stay
/// reachable directly, and nothing else skips the proxy.
pub fn proxy_env(port: u16) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let no_proxy = "localhost,127.0.0.1,::1".to_string();
    let mut env = Vec::new();
    for (k, v) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &no_proxy),
    ] {
        env.push((k.to_string(), v.clone()));
        env.push((k.to_ascii_lowercase(), v.clone()));
    }
    for (k, v) in [
        ("PIP_PROXY", &http),
        ("npm_config_proxy", &http),
        ("npm_config_https_proxy", &http),
        ("npm_config_noproxy", &no_proxy),
        ("CARGO_HTTP_PROXY", &http),
        ("NODE_USE_ENV_PROXY", &"1".to_string()),
    ] {
        env.push((k.to_string(), v.clone()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_finds_the_proxy() {
        let env = proxy_env(3128);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("https_proxy"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("ALL_PROXY"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("NO_PROXY"), Some("localhost,127.0.0.1,::1"));
        assert_eq!(get("CARGO_HTTP_PROXY"), Some("http://127.0.0.1:3128"));
    }
}
