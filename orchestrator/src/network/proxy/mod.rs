//! The egress proxy: a session's only way out.
//!
//! One listener speaks three protocols, told apart by the first byte: SOCKS5 (`0x05`),
//! else HTTP (`CONNECT host:port`, or a plain request in absolute form). Every request
//! goes through [`dial::Dialer`] (policy, resolution of allowed names only, refused
//! address ranges), tunnels through [`tunnel::relay`] (SNI checked against the host) or,
//! to a host with a brokered credential, through [`crate::network::broker::relay`] (TLS
//! terminated, the credential added), and each connection, allowed or refused, ends as
//! one [`ConnectionRecord`].
//!
//! ```no_run
//! # async fn f(policy: cordon::network::NetworkPolicy) -> std::io::Result<()> {
//! use std::sync::Arc;
//! use cordon::network::proxy::{Proxy, dial::SystemResolver, record::TracingLog};
//! let proxy = Proxy::new("session-1", policy, Arc::new(SystemResolver), Arc::new(TracingLog));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! tokio::spawn(proxy.serve_tcp(listener, std::future::pending()));
//! # Ok(()) }
//! ```

pub mod dial;
pub mod http;
pub mod record;
pub mod sni;
pub mod socks;
pub mod tunnel;

use std::sync::Arc;
use std::time::Instant;

use sandbox_agent::egress::splice::SpliceSocket;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Semaphore;

use crate::network::NetworkPolicy;
use crate::network::broker::{self, Broker};
use dial::{DialError, Dialer, Resolve};
use http::HttpAsk;
pub use record::{ConnectionLog, ConnectionRecord, Protocol};

/// Connections one proxy serves at once; more wait for a slot.
const MAX_CONNECTIONS: usize = 512;
/// Descriptors one relayed connection holds: the client's and the server's sockets, and
/// the two pipes of the kernel relay (two ends each).
const FDS_PER_CONNECTION: u64 = 6;
/// Descriptors kept for everything else of this process (the server's database, its
/// listeners, the sandboxes' sockets, logs).
const FDS_RESERVED: u64 = 256;

/// The connections every proxy of this process serves at once, together: sized from the
/// descriptor limit (its soft value raised to the hard one first, at most 65,536), so no
/// session at its own cap can take the descriptors the others and the server need.
/// Security: without it one session's clients (512 connections, six descriptors each)
/// could exhaust the process's descriptors, and every other session's proxy, the
/// server's database and its API would fail with them.
fn process_slots() -> (Arc<Semaphore>, usize) {
    static SLOTS: std::sync::OnceLock<(Arc<Semaphore>, usize)> = std::sync::OnceLock::new();
    SLOTS
        .get_or_init(|| {
            let limit = raise_nofile();
            let n = limit.saturating_sub(FDS_RESERVED) / FDS_PER_CONNECTION;
            let n = usize::try_from(n.max(16)).unwrap_or(16);
            (Arc::new(Semaphore::new(n)), n)
        })
        .clone()
}

/// One session's own cap: [`MAX_CONNECTIONS`], and at most a quarter of the process's
/// budget, so a few sessions holding idle tunnels cannot starve every other one.
fn session_cap(shared_total: usize) -> usize {
    MAX_CONNECTIONS.min((shared_total / 4).max(16))
}

/// Raises this process's soft descriptor limit towards its hard one (at most 65,536);
/// returns the soft limit in force.
fn raise_nofile() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    let wanted = hard.min(65_536).max(soft);
    if wanted > soft && setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).is_ok() {
        return wanted;
    }
    soft
}
/// How long a client has to send its first request head (or SOCKS greeting): a slot held
/// by a client that sends nothing is given back.
const HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The pause after a failed accept: at the descriptor limit, accept fails at once, and
/// retrying without a pause would spin a core and flood the log for every session.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// One session's proxy.
#[derive(Clone)]
pub struct Proxy {
    session: Arc<str>,
    dialer: Dialer,
    log: Arc<dyn ConnectionLog>,
    slots: Arc<Semaphore>,
    /// The slots every proxy of this process shares ([`process_slots`]).
    shared: Arc<Semaphore>,
    /// The session's brokered credentials (none: every tunnel is relayed unread).
    broker: Option<Arc<Broker>>,
    /// How long a client has to send its request head ([`HEAD_TIMEOUT`]).
    head_timeout: std::time::Duration,
}

impl Proxy {
    pub fn new(
        session: &str,
        policy: NetworkPolicy,
        resolver: Arc<dyn Resolve>,
        log: Arc<dyn ConnectionLog>,
    ) -> Proxy {
        let (shared, shared_total) = process_slots();
        Proxy {
            session: session.into(),
            dialer: Dialer {
                policy: Arc::new(policy),
                resolver,
            },
            log,
            slots: Arc::new(Semaphore::new(session_cap(shared_total))),
            shared,
            broker: None,
            head_timeout: HEAD_TIMEOUT,
        }
    }

    /// Gives clients `limit`, not [`HEAD_TIMEOUT`], to send their request head.
    #[must_use]
    pub fn with_head_timeout(mut self, limit: std::time::Duration) -> Proxy {
        self.head_timeout = limit;
        self
    }

    /// Shares `slots`, not the process's own budget, with the other proxies given it.
    #[must_use]
    pub fn with_shared_slots(mut self, slots: Arc<Semaphore>) -> Proxy {
        self.shared = slots;
        self
    }

    /// Brokers `broker`'s credentials: tunnels to their hosts are terminated.
    pub fn with_broker(mut self, broker: Arc<Broker>) -> Proxy {
        self.broker = Some(broker);
        self
    }

    /// Relays an allowed tunnel: terminated when a brokered credential covers its host,
    /// else the client's own bytes, checked and spliced.
    async fn tunnel<S>(
        &self,
        stream: S,
        upstream: tokio::net::TcpStream,
        early: Vec<u8>,
        host: &str,
        port: u16,
    ) -> tunnel::Relayed
    where
        S: AsyncRead + AsyncWrite + SpliceSocket + Unpin + Sync,
    {
        let brokered = self
            .broker
            .as_deref()
            .and_then(|b| Some((b, b.credential_for(host, port)?)));
        match brokered {
            Some((b, cred)) => {
                let host = crate::network::policy::normalize_host(host);
                broker::relay::relay(stream, upstream, early, &host, port, b, cred).await
            }
            None => {
                let allow_ech = self.dialer.policy.allow_encrypted_client_hello;
                tunnel::relay(stream, upstream, early, host, port, allow_ech).await
            }
        }
    }

    /// The policy this proxy enforces.
    pub fn policy(&self) -> &NetworkPolicy {
        &self.dialer.policy
    }

    /// Serves a Unix socket (the sandbox's end) until `shutdown` resolves.
    pub async fn serve_unix(
        self,
        listener: tokio::net::UnixListener,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => self.spawn(stream).await,
                    Err(e) => {
                        tracing::warn!("egress proxy accept: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
            }
        }
    }

    /// Serves a TCP listener (tests, benchmarks, a host-side port) until `shutdown`.
    pub async fn serve_tcp(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        self.spawn(stream).await;
                    }
                    Err(e) => {
                        tracing::warn!("egress proxy accept: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
            }
        }
    }

    async fn spawn<S>(&self, stream: S)
    where
        S: AsyncRead + AsyncWrite + SpliceSocket + Unpin + Send + Sync + 'static,
    {
        // Waited for here, in the accept loop: while every slot is taken, no further
        // connection is accepted (the kernel's backlog holds them), so waiting ones hold
        // no descriptor of this process.
        let Ok(own) = self.slots.clone().acquire_owned().await else {
            return;
        };
        let Ok(shared) = self.shared.clone().acquire_owned().await else {
            return;
        };
        let this = self.clone();
        tokio::spawn(async move {
            let record = this.handle(stream).await;
            this.log.record(record);
            drop((own, shared));
        });
    }

    /// Serves one client connection and says what became of it.
    pub async fn handle<S>(&self, mut stream: S) -> ConnectionRecord
    where
        S: AsyncRead + AsyncWrite + SpliceSocket + Unpin + Sync,
    {
        let start = Instant::now();
        let mut rec = ConnectionRecord::begin(self.session.to_string(), Protocol::Http);
        // One byte only: a SOCKS client's greeting must stay unread for the handshake.
        let mut first = [0u8; 1];
        let read = tokio::time::timeout(self.head_timeout, stream.read_exact(&mut first)).await;
        match read.unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())) {
            Err(_) => rec.rule = "the client sent nothing".into(),
            Ok(_) if first[0] == 5 => self.socks(stream, &mut rec).await,
            Ok(_) => self.http(stream, first.to_vec(), &mut rec).await,
        }
        rec.duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        rec
    }

    async fn http<S>(&self, mut stream: S, mut buf: Vec<u8>, rec: &mut ConnectionRecord)
    where
        S: AsyncRead + AsyncWrite + SpliceSocket + Unpin + Sync,
    {
        let deadline = tokio::time::Instant::now() + self.head_timeout;
        let mut search = http::HeadSearch::default();
        let end = loop {
            if let Some(i) = search.end(&buf) {
                break i;
            }
            if buf.len() > http::MAX_HEAD {
                return refuse_http(&mut stream, rec, 400, "request head too large").await;
            }
            match tokio::time::timeout_at(deadline, stream.read_buf(&mut buf)).await {
                Err(_) => {
                    return refuse_http(&mut stream, rec, 408, "no full request head in time")
                        .await;
                }
                Ok(Ok(0) | Err(_)) => {
                    rec.rule = "the client closed before a full request".into();
                    return;
                }
                Ok(Ok(_)) => {}
            }
        };
        let early = buf.split_off(end);
        let ask = match http::parse(&buf) {
            Ok(ask) => ask,
            Err(e) => return refuse_http(&mut stream, rec, e.status, &e.why).await,
        };
        let (host, port, head) = match ask {
            HttpAsk::Connect { host, port } => {
                rec.protocol = Protocol::Connect;
                (host, port, None)
            }
            HttpAsk::Forward {
                host,
                port,
                head,
                body,
            } => (host, port, Some((head, body))),
        };
        rec.host = host.clone();
        rec.port = port;
        let dialed = match self.dialer.dial(&host, port).await {
            Ok(d) => d,
            Err(e) => {
                let status = if e.is_policy() { 403 } else { 502 };
                return refuse_http(&mut stream, rec, status, &e.to_string()).await;
            }
        };
        rec.addr = Some(dialed.addr);
        rec.allowed = true;
        rec.rule = dialed.rule;
        match head {
            None => {
                if stream
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                let r = self.tunnel(stream, dialed.stream, early, &host, port).await;
                finish(rec, r);
            }
            Some((head, body)) => {
                let mut upstream = dialed.stream;
                match tunnel::one_request(&mut stream, &mut upstream, &head, early, body).await {
                    Ok((up, down)) => (rec.bytes_up, rec.bytes_down) = (up, down),
                    Err(tunnel::OneRequestError::Send) => {}
                    Err(tunnel::OneRequestError::Body(e)) => {
                        rec.rule = format!("{}; the request body: {e}", rec.rule);
                    }
                }
            }
        }
    }

    async fn socks<S>(&self, mut stream: S, rec: &mut ConnectionRecord)
    where
        S: AsyncRead + AsyncWrite + SpliceSocket + Unpin + Sync,
    {
        use socks::{Reply, SocksError};
        rec.protocol = Protocol::Socks5;
        let (host, port) = match socks::read_request(&mut stream).await {
            Ok(target) => target,
            Err(SocksError::Io(e)) => {
                rec.rule = format!("reading the SOCKS request: {e}");
                return;
            }
            Err(SocksError::Refused(why)) => {
                rec.rule = why;
                return;
            }
        };
        rec.host = host.clone();
        rec.port = port;
        let dialed = match self.dialer.dial(&host, port).await {
            Ok(d) => d,
            Err(e) => {
                let code = match &e {
                    DialError::Denied(_) | DialError::Refused { .. } => Reply::NotAllowed,
                    DialError::Resolve { .. } => Reply::HostUnreachable,
                    DialError::Connect { .. } => Reply::ConnectionRefused,
                };
                let _ = socks::reply(&mut stream, code).await;
                rec.rule = e.to_string();
                return;
            }
        };
        if socks::reply(&mut stream, Reply::Succeeded).await.is_err() {
            return;
        }
        rec.addr = Some(dialed.addr);
        rec.allowed = true;
        rec.rule = dialed.rule;
        let r = self
            .tunnel(stream, dialed.stream, Vec::new(), &host, port)
            .await;
        finish(rec, r);
    }
}

/// Folds a tunnel's outcome into its record: a tunnel the first-bytes check cut counts
/// as refused.
fn finish(rec: &mut ConnectionRecord, r: tunnel::Relayed) {
    rec.bytes_up = r.up;
    rec.bytes_down = r.down;
    rec.credential = r.credential;
    if let Some(why) = r.refused {
        rec.allowed = false;
        rec.rule = why;
    }
}

async fn refuse_http<S>(stream: &mut S, rec: &mut ConnectionRecord, status: u16, why: &str)
where
    S: AsyncWrite + Unpin,
{
    rec.rule = why.to_string();
    http::send_error(stream, status, why).await;
}
