//! TLS for the test internet's servers: a CA of the test's own (made with the `openssl`
//! command) that only the sandboxes of one test are told to trust, a server certificate it
//! signs for the test's names, and an acceptor serving it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

/// A test CA and one server certificate it signed.
pub struct TestCa {
    /// The CA certificate (what a client is told to trust).
    pub ca_pem: PathBuf,
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (Debian package openssl) is needed for the TLS tests");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestCa {
    /// Makes a CA in `dir` and a server certificate for `names` (DNS names) signed by it.
    pub fn new(dir: &Path, names: &[&str]) -> TestCa {
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec!["req", "-x509", "-days", "1", "-subj", "/CN=cordon test CA"];
        ca.extend(ec);
        ca.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ]);
        openssl(&ca, dir);
        let subject = format!("/CN={}", names.first().copied().unwrap_or("test"));
        let mut csr = vec!["req", "-subj", &subject];
        csr.extend(ec);
        csr.extend(["-keyout", "server.key", "-out", "server.csr"]);
        openssl(&csr, dir);
        let sans: Vec<String> = names.iter().map(|n| format!("DNS:{n}")).collect();
        std::fs::write(
            dir.join("server.ext"),
            format!(
                "subjectAltName={}\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n",
                sans.join(",")
            ),
        )
        .unwrap();
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                "server.ext",
                "-out",
                "server.pem",
            ],
            dir,
        );
        TestCa {
            ca_pem: dir.join("ca.pem"),
            cert_pem: dir.join("server.pem"),
            key_pem: dir.join("server.key"),
        }
    }

    /// An acceptor presenting the server certificate.
    pub fn acceptor(&self) -> TlsAcceptor {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert_pem)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(&self.key_pem).unwrap();
        let config = ServerConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        TlsAcceptor::from(Arc::new(config))
    }

    /// Roots holding this CA only (what a client told to trust it has).
    pub fn roots(&self) -> RootCertStore {
        roots(&std::fs::read(&self.ca_pem).unwrap())
    }
}

/// Roots holding the certificates of `pem` (a PEM file's text).
pub fn roots(pem: &[u8]) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    roots
}
