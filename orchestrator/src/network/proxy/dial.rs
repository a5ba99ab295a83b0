//! From an allowed host name to a connected socket: resolve (only names the policy
//! allows ever reach the resolver), drop the addresses `policies/network-refused.json`
//! refuses, connect to the first that answers.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use tokio::net::TcpStream;

use crate::network::NetworkPolicy;
use crate::network::addresses;

/// Resolves host names for the proxy.
pub trait Resolve: Send + Sync {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send + 'a>>;
}

/// The host's resolver (getaddrinfo: `/etc/hosts`, `/etc/resolv.conf`).
#[derive(Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send + 'a>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((host, port)).await?.collect()) })
    }
}

/// Why the proxy did not connect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialError {
    #[error("{0}")]
    Denied(String),
    #[error("{host} did not resolve: {why}")]
    Resolve { host: String, why: String },
    #[error("{host} resolved only to refused addresses: {why}")]
    Refused { host: String, why: String },
    #[error("connecting to {host}: {why}")]
    Connect { host: String, why: String },
}

impl DialError {
    /// Whether the policy (not the network) refused the connection.
    pub fn is_policy(&self) -> bool {
        matches!(self, Self::Denied(_) | Self::Refused { .. })
    }
}

/// A connected upstream socket and the rule that let it through.
#[derive(Debug)]
pub struct Dialed {
    pub stream: TcpStream,
    pub addr: SocketAddr,
    pub rule: String,
}

/// Decides, resolves, filters and connects.
#[derive(Clone)]
pub struct Dialer {
    pub policy: Arc<NetworkPolicy>,
    pub resolver: Arc<dyn Resolve>,
}

impl Dialer {
    /// Connects to `host:port` if the policy allows it and it resolves to an address the
    /// proxy may reach.
    pub async fn dial(&self, host: &str, port: u16) -> Result<Dialed, DialError> {
        let (addrs, rule) = self.addresses(host, port).await?;
        let mut last = String::from("no address");
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Dialed { stream, addr, rule });
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(DialError::Connect {
            host: crate::network::policy::normalize_host(host),
            why: last,
        })
    }

    /// Where `host:port` may be reached, and the rule that allows it: the policy's
    /// decision, then the name resolved and the refused ranges dropped. Everything that
    /// connects on a session's behalf (the proxy, WebFetch) asks here.
    pub async fn addresses(
        &self,
        host: &str,
        port: u16,
    ) -> Result<(Vec<SocketAddr>, String), DialError> {
        let decision = self.policy.decide(host, port);
        if !decision.allowed {
            return Err(DialError::Denied(decision.rule));
        }
        let host = crate::network::policy::normalize_host(host);
        let addrs = match host.parse::<IpAddr>() {
            // Security: an IP literal got here only through an entry naming exactly this
            // address; a refused one (loopback, private, metadata) only when that entry is
            // the operator's or the user's own, never a repository's or a tenant's.
            Ok(ip) => match addresses::refusal(ip) {
                Some(why) if !self.policy.may_reach_refused(ip, port) => {
                    return Err(DialError::Refused {
                        host,
                        why: format!(
                            "{why}; only an entry in the managed or the user's own settings may name such an address"
                        ),
                    });
                }
                _ => vec![SocketAddr::new(ip, port)],
            },
            Err(_) => self.resolve_checked(&host, port).await?,
        };
        Ok((addrs, decision.rule))
    }

    /// The addresses `host` resolves to, less the refused ones; refused when none is left.
    async fn resolve_checked(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, DialError> {
        let resolved = self
            .resolver
            .resolve(host, port)
            .await
            .map_err(|e| DialError::Resolve {
                host: host.to_string(),
                why: e.to_string(),
            })?;
        let mut why = None;
        let usable: Vec<SocketAddr> = resolved
            .into_iter()
            .filter(|a| match addresses::refusal(a.ip()) {
                Some(w) => {
                    why.get_or_insert(w);
                    false
                }
                None => true,
            })
            .collect();
        if usable.is_empty() {
            return Err(DialError::Refused {
                host: host.to_string(),
                why: why.unwrap_or_else(|| "no addresses".into()),
            });
        }
        Ok(usable)
    }
}

/// A fixed table of names (tests, and hosts whose operator pins addresses).
#[derive(Debug, Default, Clone)]
pub struct StaticResolver(pub std::collections::HashMap<String, Vec<IpAddr>>);

impl Resolve for StaticResolver {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send + 'a>> {
        let found = self.0.get(host).map(|ips| {
            ips.iter()
                .map(|ip| SocketAddr::new(*ip, port))
                .collect::<Vec<_>>()
        });
        Box::pin(async move {
            found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "unknown name"))
        })
    }
}
