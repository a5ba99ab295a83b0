//! The per-session CA of brokered credentials, and the leaf certificates it signs.
//!
//! Made in memory when the session starts; its private key never leaves this process (no
//! file, no log, nothing the sandbox is handed): the sandbox gets its certificate only, to
//! trust. A leaf is made for a host the first time a brokered tunnel names it, and kept
//! for the session, with a key of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::BrokerError;

/// How long the CA and its leaves are valid: a session's life, with room for a clock a
/// little behind.
const VALID_BEFORE: time::Duration = time::Duration::hours(1);
const VALID_FOR: time::Duration = time::Duration::days(30);
/// Leaves kept at most: a wildcard domain could name any number of hosts, so the cache
/// starts over past this (a leaf is made again on its host's next tunnel).
const MAX_LEAVES: usize = 256;

/// One session's CA.
pub struct SessionCa {
    issuer: Issuer<'static, KeyPair>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    /// The TLS server configuration presenting each host's leaf, made once per host.
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl std::fmt::Debug for SessionCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCa").finish_non_exhaustive()
    }
}

fn validity(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - VALID_BEFORE;
    params.not_after = now + VALID_FOR;
}

impl SessionCa {
    /// A new CA (ECDSA P-256) named after `session`.
    pub fn new(session: &str) -> Result<SessionCa, BrokerError> {
        let key = KeyPair::generate().map_err(BrokerError::Ca)?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, "Cordon");
        name.push(
            DnType::CommonName,
            format!("Cordon egress CA for session {session}"),
        );
        params.distinguished_name = name;
        // It signs leaves only, never another CA.
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params);
        let cert = params.self_signed(&key).map_err(BrokerError::Ca)?;
        Ok(SessionCa {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA's certificate, PEM: what the sandbox trusts.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The server side for `host` (a name or an IP literal, normalized): its leaf and the
    /// CA as the chain, HTTP/1.1 only (ALPN).
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, BrokerError> {
        if let Some(c) = self.leaves.lock().ok().and_then(|m| m.get(host).cloned()) {
            return Ok(c);
        }
        let config = Arc::new(self.leaf_config(host)?);
        if let Ok(mut m) = self.leaves.lock() {
            if m.len() >= MAX_LEAVES {
                m.clear();
            }
            m.insert(host.to_string(), config.clone());
        }
        Ok(config)
    }

    fn leaf_config(&self, host: &str) -> Result<ServerConfig, BrokerError> {
        let (chain, key) = self.leaf(host)?;
        let mut config = ServerConfig::builder_with_provider(super::provider())
            .with_safe_default_protocol_versions()
            .map_err(BrokerError::Tls)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(BrokerError::Tls)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// A new leaf for `host` (its chain: the leaf, then the CA) and its key.
    fn leaf(
        &self,
        host: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), BrokerError> {
        let key = KeyPair::generate().map_err(BrokerError::Ca)?;
        // A name becomes a DNS SAN, an address an IP SAN.
        let mut params = CertificateParams::new(vec![host.to_string()]).map_err(BrokerError::Ca)?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, host);
        params.distinguished_name = name;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(BrokerError::Ca)?;
        let chain = vec![cert.der().clone(), self.cert_der.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok((chain, key))
    }
}

#[cfg(test)]
mod tests {
    use tokio_rustls::rustls::client::danger::ServerCertVerifier;
    use tokio_rustls::rustls::pki_types::ServerName;
    use tokio_rustls::rustls::pki_types::pem::PemObject;

    use super::*;

    /// A leaf verifies for its host against the session CA alone, and for no other name.
    #[test]
    fn a_leaf_verifies_for_its_host_against_the_session_ca() {
        let ca = SessionCa::new("s1").unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let config = ca.server_config("api.test").unwrap();
        assert!(Arc::ptr_eq(&config, &ca.server_config("api.test").unwrap()));
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap())
            .unwrap();
        let verifier = tokio_rustls::rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            super::super::provider(),
        )
        .build()
        .unwrap();
        let (leaf, _) = ca.leaf("api.test").unwrap();
        let now = tokio_rustls::rustls::pki_types::UnixTime::now();
        let verify = |name: &str| {
            verifier.verify_server_cert(
                &leaf[0],
                &leaf[1..],
                &ServerName::try_from(name.to_string()).unwrap(),
                &[],
                now,
            )
        };
        assert!(verify("api.test").is_ok());
        assert!(verify("other.test").is_err());
    }
}
