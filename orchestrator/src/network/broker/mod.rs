//! Brokered credentials: the proxy adds a host secret (a header) to requests for chosen
//! domains, so the secret never enters the sandbox.
//!
//! - [`config`]: `sandbox.network.brokeredCredentials` in the settings (managed and user
//!   only), and reading each value from the host.
//! - [`ca`]: the session's CA (its key in this process only) and a leaf per host.
//! - [`http1`]: the request checked (Host against the tunnel's host) and rewritten with the
//!   credential; the body's end; the response told to close.
//! - [`relay`]: a brokered tunnel end to end: TLS from the client terminated (its SNI
//!   checked), TLS to the server verified against the host's roots, one request across.
//!
//! Only tunnels (CONNECT, SOCKS5) to a matching host are terminated; every other tunnel
//! stays the client's own TLS, relayed unread. A credential is only ever sent over TLS
//! whose server certificate verified: never over plain HTTP.
//!
//! ```no_run
//! # fn f(spec: cordon::network::broker::CredentialSpec) -> Result<(), cordon::network::broker::BrokerError> {
//! use cordon::network::broker::{Broker, host_roots};
//! let broker = Broker::new("session-1", vec![spec.load()?], host_roots()?)?;
//! let trust_inside = broker.ca_pem();
//! # Ok(()) }
//! ```

pub mod ca;
pub mod config;
pub mod http1;
pub mod relay;

use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

pub use config::{CredentialSpec, ValueSource};

use crate::network::policy::DomainRule;

/// A secret value: kept in memory, never printed (its `Debug` is redacted).
pub struct Secret(String);

impl Secret {
    /// The value, for the one place that writes it: the request to the server.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A credential with its value read: which requests get it, and the header.
#[derive(Debug)]
pub struct Credential {
    pub domain: DomainRule,
    pub header: String,
    value: Secret,
    /// Where the value came from (`env NAME`, `file PATH`), for the records.
    pub from: String,
    /// The variable of this process the value came from, if it did.
    env: Option<String>,
}

impl Credential {
    /// A credential (the header's whole value, prefix included) from `from`.
    pub fn new(domain: DomainRule, header: &str, value: String, from: &str) -> Credential {
        Credential {
            domain,
            header: header.to_string(),
            value: Secret(value),
            from: from.to_string(),
            env: None,
        }
    }
}

/// Why brokering could not start.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("brokered credential for {domain}: the environment variable {name} is not set")]
    MissingEnv { domain: String, name: String },
    #[error("brokered credential for {domain}: reading {path}: {source}")]
    ReadFile {
        domain: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("brokered credential for {domain}: {why}")]
    BadValue { domain: String, why: String },
    #[error("brokered credentials: no trusted root certificates to verify servers with: {0}")]
    Roots(String),
    #[error("brokered credentials: making the session CA: {0}")]
    Ca(rcgen::Error),
    #[error("brokered credentials: TLS configuration: {0}")]
    Tls(tokio_rustls::rustls::Error),
}

/// The crypto the proxy's TLS uses (the workspace's rustls build: aws-lc-rs).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider())
}

/// The host's trusted roots, as Cordon's own process finds them: the system store, or
/// the bundle `SSL_CERT_FILE` (or the directory `SSL_CERT_DIR`) names. An operator adds
/// a private root there, as for any program on the host.
pub fn host_roots() -> Result<RootCertStore, BrokerError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (_, ignored) = roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = match found.errors.first() {
            Some(e) => e.to_string(),
            None if ignored > 0 => format!("{ignored} certificates could not be parsed"),
            None => "the system store is empty".into(),
        };
        return Err(BrokerError::Roots(why));
    }
    Ok(roots)
}

/// A session's brokered credentials, its CA and the verifying client for the servers.
pub struct Broker {
    credentials: Vec<Credential>,
    ca: ca::SessionCa,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// Makes the session's CA; servers are verified against `roots` (HTTP/1.1 only).
    pub fn new(
        session: &str,
        credentials: Vec<Credential>,
        roots: RootCertStore,
    ) -> Result<Broker, BrokerError> {
        let mut client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(BrokerError::Tls)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Broker {
            credentials,
            ca: ca::SessionCa::new(session)?,
            client: Arc::new(client),
        })
    }

    /// The session CA's certificate (PEM), for the sandbox to trust.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// The variables of this process the credentials were read from.
    pub fn secret_variables(&self) -> Vec<String> {
        self.credentials
            .iter()
            .filter_map(|c| c.env.clone())
            .collect()
    }

    /// The credential for a tunnel to `host:port`: the first whose domain covers it.
    pub fn credential_for(&self, host: &str, port: u16) -> Option<&Credential> {
        self.credentials
            .iter()
            .find(|c| c.domain.covers(host, port))
    }
}
