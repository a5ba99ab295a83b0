//! What the proxy records of every connection it accepted or refused, and where it goes.

use std::net::SocketAddr;
use std::sync::Mutex;

/// How the client asked for the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// `CONNECT host:port` (a tunnel, usually TLS).
    Connect,
    /// A plain-HTTP request forwarded by the proxy.
    Http,
    /// A SOCKS5 CONNECT.
    Socks5,
    /// A WebFetch tool call's GET, made by the orchestrator on the session's behalf (one
    /// record per request, redirects included).
    #[serde(rename = "webfetch")]
    WebFetch,
}

/// One connection, as the transcript and the audit log see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConnectionRecord {
    /// The session the proxy serves.
    pub session: String,
    pub protocol: Protocol,
    /// The host the client named (empty when the request could not be read).
    pub host: String,
    pub port: u16,
    /// The address the proxy connected to, when it did.
    pub addr: Option<SocketAddr>,
    /// Bytes from the sandbox to the server, and back.
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
    pub allowed: bool,
    /// The policy entry that decided, or why the connection was refused or ended.
    pub rule: String,
    /// The brokered credential the proxy added to the tunnel's request (TLS terminated
    /// for it); absent for every other connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<CredentialUse>,
}

impl ConnectionRecord {
    /// A record of `session`'s connection by `protocol` before anything is known of it:
    /// refused, to nowhere, no bytes (each field is filled as the connection goes).
    pub fn begin(session: impl Into<String>, protocol: Protocol) -> Self {
        Self {
            session: session.into(),
            protocol,
            host: String::new(),
            port: 0,
            addr: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            allowed: false,
            rule: String::new(),
            credential: None,
        }
    }
}

/// That a brokered credential was added, and which: never its value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CredentialUse {
    /// The header the proxy set.
    pub header: String,
    /// Where its value came from (`env NAME`, `file PATH`).
    pub from: String,
}

/// Receives every [`ConnectionRecord`] (the transcript, metrics, the audit log).
pub trait ConnectionLog: Send + Sync {
    fn record(&self, record: ConnectionRecord);
}

/// Keeps records in memory (tests, `cordon sandbox`'s summary).
#[derive(Debug, Default)]
pub struct MemoryLog(Mutex<Vec<ConnectionRecord>>);

impl MemoryLog {
    pub fn records(&self) -> Vec<ConnectionRecord> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl ConnectionLog for MemoryLog {
    fn record(&self, record: ConnectionRecord) {
        if let Ok(mut v) = self.0.lock() {
            v.push(record);
        }
    }
}

/// Logs records through `tracing` only.
#[derive(Debug, Default)]
pub struct TracingLog;

impl ConnectionLog for TracingLog {
    fn record(&self, r: ConnectionRecord) {
        tracing::info!(
            target: "cordon::egress",
            session = %r.session,
            host = %r.host,
            port = r.port,
            allowed = r.allowed,
            rule = %r.rule,
            credential = r.credential.as_ref().map(|c| c.header.as_str()),
            up = r.bytes_up,
            down = r.bytes_down,
            "egress connection"
        );
    }
}

/// Appends one JSON line per record to a file (a session's `<transcript>.egress.jsonl`,
/// beside its transcript), and logs it through `tracing`.
#[derive(Debug)]
pub struct JsonlLog(Mutex<std::fs::File>);

impl JsonlLog {
    /// Opens (creates, mode 0600) `path` for appending.
    pub fn open(path: &std::path::Path) -> std::io::Result<JsonlLog> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        Ok(JsonlLog(Mutex::new(file)))
    }
}

impl ConnectionLog for JsonlLog {
    fn record(&self, record: ConnectionRecord) {
        use std::io::Write;
        if let (Ok(mut line), Ok(mut file)) = (serde_json::to_vec(&record), self.0.lock()) {
            line.push(b'\n');
            if let Err(e) = file.write_all(&line) {
                tracing::warn!("egress log: {e}");
            }
        }
        TracingLog.record(record);
    }
}
