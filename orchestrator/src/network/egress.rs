//! A session's egress: its policy, its brokered credentials, where its connection records
//! go, and the proxy the backend starts on the session's socket dir.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sandbox_agent::egress::ca::CaTrust;
use sandbox_agent::egress::{DEFAULT_PORT, EgressConfig, PROXY_SOCKET_NAME};

use super::NetworkPolicy;
use super::broker::{Broker, BrokerError, CredentialSpec};
use super::layers::Resolved;
use super::proxy::Proxy;
use super::proxy::dial::{Resolve, SystemResolver};
use super::proxy::record::{ConnectionLog, TracingLog};

/// What a sandbox with a way out needs besides its spec.
#[derive(Clone)]
pub struct EgressSpec {
    pub policy: NetworkPolicy,
    pub log: Arc<dyn ConnectionLog>,
    pub resolver: Arc<dyn Resolve>,
    /// The brokered credentials and the session CA (none: no tunnel is terminated).
    pub broker: Option<Arc<Broker>>,
}

impl std::fmt::Debug for EgressSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressSpec")
            .field("policy", &self.policy)
            .field("broker", &self.broker)
            .finish_non_exhaustive()
    }
}

impl EgressSpec {
    /// The policy with the host's resolver and records logged through `tracing`.
    pub fn new(policy: NetworkPolicy) -> EgressSpec {
        EgressSpec {
            policy,
            log: Arc::new(TracingLog),
            resolver: Arc::new(SystemResolver),
            broker: None,
        }
    }

    /// The session's egress from its resolved settings: the policy, and the brokered
    /// credentials with their values read from the host and a new session CA.
    pub fn for_session(session: &str, network: &Resolved) -> Result<EgressSpec, BrokerError> {
        let mut spec = EgressSpec::new(network.policy.clone());
        if !network.credentials.is_empty() {
            let credentials = network
                .credentials
                .iter()
                .map(CredentialSpec::load)
                .collect::<Result<Vec<_>, _>>()?;
            let broker = Broker::new(session, credentials, super::broker::host_roots()?)?;
            spec.broker = Some(Arc::new(broker));
        }
        Ok(spec)
    }

    /// The variables of this process that brokered credentials are read from: kept from
    /// any process the sandbox is made of.
    pub fn secret_variables(&self) -> Vec<String> {
        self.broker
            .as_ref()
            .map(|b| b.secret_variables())
            .unwrap_or_default()
    }

    /// What the agent is told: the proxy's socket inside the sandbox (in
    /// `socket_dir`, the session's socket dir as the sandbox sees it: the local backend's
    /// [`sandbox_agent::launch::SOCKET_DIR_IN_SANDBOX`], the Docker backend's run dir), the
    /// bridge's port, the DNS stub on; with brokered credentials, the session CA's
    /// certificate and where the backend puts its bundle (`ca_bundle`).
    pub fn agent_config(&self, socket_dir: &Path, ca_bundle: &Path) -> EgressConfig {
        EgressConfig {
            proxy_socket: socket_dir.join(PROXY_SOCKET_NAME),
            port: DEFAULT_PORT,
            dns: true,
            // The proxy's key, not the agent's (nor one an older image's agent knows).
            policy: NetworkPolicy {
                allow_encrypted_client_hello: false,
                ..self.policy.clone()
            },
            ca: self.broker.as_ref().map(|b| CaTrust {
                cert_pem: b.ca_pem().to_string(),
                bundle: ca_bundle.to_path_buf(),
            }),
        }
    }

    /// Starts the session's proxy on `socket_dir/egress.sock` (the host side of the dir
    /// the sandbox sees as its socket dir); the task ends when aborted.
    pub fn serve(&self, session: &str, socket_dir: &Path) -> std::io::Result<ProxyTask> {
        let path = socket_dir.join(PROXY_SOCKET_NAME);
        // bind(2) refuses an existing name, link or not: nothing in the dir is followed.
        let listener = tokio::net::UnixListener::bind(&path)?;
        // The sandbox's uid differs from ours; the socket is reachable only through the
        // session's own dir, so any uid that can see it may connect.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
        let mut proxy = Proxy::new(
            session,
            self.policy.clone(),
            self.resolver.clone(),
            self.log.clone(),
        );
        if let Some(broker) = &self.broker {
            proxy = proxy.with_broker(broker.clone());
        }
        let task = tokio::spawn(proxy.serve_unix(listener, std::future::pending()));
        Ok(ProxyTask { task, path })
    }
}

/// A running session proxy; dropping it stops accepting.
#[derive(Debug)]
pub struct ProxyTask {
    task: tokio::task::JoinHandle<()>,
    path: PathBuf,
}

impl Drop for ProxyTask {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_never_sent_the_proxys_ech_key() {
        let policy = NetworkPolicy {
            allow_encrypted_client_hello: true,
            ..NetworkPolicy::default()
        };
        let config =
            EgressSpec::new(policy).agent_config(Path::new("/run/cordon"), Path::new("/ca"));
        assert!(!config.policy.allow_encrypted_client_hello);
        let json = serde_json::to_string(&config).unwrap();
        assert!(!json.contains("encrypted_client_hello"), "{json}");
    }
}
