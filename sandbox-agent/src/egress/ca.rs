//! Trust inside the sandbox for the session CA of brokered credentials.
//!
//! When a session brokers a credential, the orchestrator's proxy terminates TLS for the
//! brokered domains with leaf certificates its per-session CA signs (the CA's key stays in
//! the orchestrator's memory; only its certificate comes here, in [`CaTrust`]). For tools
//! inside to accept them, the sandbox gets a combined bundle: the system roots the sandbox
//! sees, then the session CA.
//!
//! - The local backend's init writes it on the sandbox's own `/run` (read-only once the
//!   root is built) and binds it over the system bundle ([`SYSTEM_BUNDLE`]), so programs
//!   that read the system store trust it too.
//! - On the Docker backend the host writes it in the run dir from the image's own roots
//!   and binds it over the image's system bundle when that is a plain file (the
//!   orchestrator's `docker::ca_store`). For an image without one the agent writes it
//!   there before it confines itself ([`install`]); the image's root is read-only, so the
//!   variables alone point at it.
//! - Every command gets the variables the common tools read ([`ca_env`]); Landlock lets
//!   commands read the bundle and nothing else beside it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The session CA as the sandbox is told of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CaTrust {
    /// The CA's certificate, PEM (public: never its key).
    pub cert_pem: String,
    /// Where the combined bundle is, inside the sandbox.
    pub bundle: PathBuf,
}

/// The system bundle the local backend's init replaces (Debian's and Ubuntu's; what
/// OpenSSL, curl, git and Python read on such systems).
pub const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Where the system roots are found, in order (Debian, Fedora, openSUSE, Alpine and Arch).
const SYSTEM_BUNDLES: &[&str] = &[
    SYSTEM_BUNDLE,
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The local backend's bundle (on the sandbox's own `/run`).
pub const LOCAL_BUNDLE: &str = "/run/cordon-ca-bundle.crt";
/// The Docker backend's bundle, in the run dir.
pub const BUNDLE_NAME: &str = "ca-bundle.crt";

/// The largest system bundle read (Debian's is about 220 KB).
pub const MAX_SYSTEM_BUNDLE: u64 = 4 << 20;

/// The system roots found beneath `root` (`/` from inside; the staging root for the
/// init), then the session CA. Without system roots the bundle holds the CA alone.
pub fn combined_bundle(root: &Path, cert_pem: &str) -> Vec<u8> {
    let system = SYSTEM_BUNDLES
        .iter()
        .find_map(|p| read_bounded(&root.join(p.trim_start_matches('/'))));
    bundle_of(system.unwrap_or_default(), cert_pem)
}

/// The bundle made of `system` (the roots already read) and then the session CA.
pub fn bundle_of(system: Vec<u8>, cert_pem: &str) -> Vec<u8> {
    let mut out = system;
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(b"# the Cordon session CA of brokered credentials\n");
    out.extend_from_slice(cert_pem.trim_end().as_bytes());
    out.push(b'\n');
    out
}

fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut out = Vec::new();
    file.take(MAX_SYSTEM_BUNDLE).read_to_end(&mut out).ok()?;
    Some(out)
}

/// Writes `bytes` to a new file at `path`, readable by everyone (certificates only).
pub fn write_bundle(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)?;
    file.write_all(bytes)
}

/// The agent's part (call before confining): writes the bundle from the system roots it
/// sees, unless the backend already made it (the local init does, on a read-only `/run`).
pub fn install(ca: &CaTrust) -> std::io::Result<()> {
    if std::fs::symlink_metadata(&ca.bundle).is_ok() {
        return Ok(());
    }
    write_bundle(&ca.bundle, &combined_bundle(Path::new("/"), &ca.cert_pem))
}

/// The variables every command gets so that the common tools trust the bundle: OpenSSL's
/// (and so Ruby's, PHP's, wget's), Python requests', curl's, Node's (extra certificates, on
/// top of its own), git's, pip's and cargo's.
pub fn ca_env(bundle: &Path) -> Vec<(String, String)> {
    let path = bundle.display().to_string();
    [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "PIP_CERT",
        "CARGO_HTTP_CAINFO",
    ]
    .into_iter()
    .map(|k| (k.to_string(), path.clone()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn the_bundle_is_the_system_roots_then_the_session_ca() {
        let root = tempfile::tempdir().unwrap();
        let certs = root.path().join("etc/ssl/certs");
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::write(certs.join("ca-certificates.crt"), "SYSTEM ROOTS").unwrap();
        let bundle = String::from_utf8(combined_bundle(root.path(), PEM)).unwrap();
        assert!(bundle.starts_with("SYSTEM ROOTS\n"), "{bundle}");
        assert!(bundle.ends_with(PEM), "{bundle}");
        // No system roots: the CA alone.
        let empty = tempfile::tempdir().unwrap();
        let alone = String::from_utf8(combined_bundle(empty.path(), PEM)).unwrap();
        assert!(alone.ends_with(PEM) && !alone.contains("SYSTEM"), "{alone}");
    }

    #[test]
    fn install_keeps_a_bundle_the_backend_made() {
        let dir = tempfile::tempdir().unwrap();
        let ca = CaTrust {
            cert_pem: PEM.into(),
            bundle: dir.path().join(BUNDLE_NAME),
        };
        std::fs::write(&ca.bundle, "made by the init").unwrap();
        install(&ca).unwrap();
        assert_eq!(
            std::fs::read_to_string(&ca.bundle).unwrap(),
            "made by the init"
        );
        std::fs::remove_file(&ca.bundle).unwrap();
        install(&ca).unwrap();
        assert!(std::fs::read_to_string(&ca.bundle).unwrap().ends_with(PEM));
    }

    #[test]
    fn every_common_tool_is_pointed_at_the_bundle() {
        let env = ca_env(Path::new(LOCAL_BUNDLE));
        for k in ["SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "CARGO_HTTP_CAINFO"] {
            assert!(
                env.iter().any(|(n, v)| n == k && v == LOCAL_BUNDLE),
                "{k}: {env:?}"
            );
        }
    }
}
