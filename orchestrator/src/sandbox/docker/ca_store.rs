//! The session CA of brokered credentials in a container's system trust store.
//!
//! The image's root is read-only from inside, so its agent can only write the combined
//! bundle in the run dir and point the common variables at it; a program that reads the
//! system store alone (a Go binary, a JVM's default, anything that ignores the variables)
//! would then refuse the proxy's certificates. A claim (made as root, with the container's
//! writable layer on the host) does better: the host makes the bundle from the image's own
//! system roots and binds it read-only over the image's system bundle, as the local
//! backend's init does for its root.
//!
//! The image is untrusted data here (a repository's devcontainer may have built it): its
//! roots are read beneath the layer's directory with no link followed at any step, so an
//! image whose bundle is `-> /root/.ssh/id_ed25519` makes the host read nothing of its own
//! (that image keeps the variables alone), and a FIFO or an oversized file is refused.

use std::path::{Path, PathBuf};

use sandbox_agent::beneath::read::WorkspaceReader;
use sandbox_agent::egress::ca::{self, CaTrust};

use super::masks::Bind;

/// Writes the session's bundle (the image's system roots found beneath `merged`, the
/// container's root as the host sees it, then the session CA) into `run_dir` (the host dir
/// the container sees at the bundle's own directory) and returns the bind of it over the
/// image's system bundle. `None`, leaving the bundle to the agent, when the image has no
/// plain-file system bundle or the bundle cannot be made here (the reason logged).
pub fn system_store_bind(merged: &Path, run_dir: &Path, ca: &CaTrust) -> Option<Bind> {
    let rel = Path::new(ca::SYSTEM_BUNDLE.trim_start_matches('/'));
    let image = match WorkspaceReader::open(merged) {
        Ok(reader) => reader.read_bytes(rel, ca::MAX_SYSTEM_BUNDLE),
        Err(e) => Err(e),
    };
    let system = match image {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return None,
        Err(why) => {
            tracing::info!(%why, "the image's system CA bundle is not used for the session CA");
            return None;
        }
    };
    let name = ca.bundle.file_name()?;
    let source: PathBuf = run_dir.join(name);
    // create_new: never through a name already there (nothing of the sandbox has run yet,
    // but a link planted in the run dir would otherwise redirect the host's write).
    if let Err(e) = ca::write_bundle(&source, &ca::bundle_of(system, &ca.cert_pem)) {
        tracing::warn!(bundle = %source.display(), "cannot write the session CA bundle: {e}");
        return None;
    }
    Some(Bind {
        source,
        target: PathBuf::from(ca::SYSTEM_BUNDLE),
        read_only: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    /// The session CA as a claim has it, its run dir (`run`) made.
    fn trust(run: &Path) -> CaTrust {
        std::fs::create_dir_all(run).unwrap();
        CaTrust {
            cert_pem: PEM.into(),
            bundle: Path::new("/run/cordon").join(ca::BUNDLE_NAME),
        }
    }

    fn image_with(bundle: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let certs = root.path().join("etc/ssl/certs");
        std::fs::create_dir_all(&certs).unwrap();
        bundle(&certs.join("ca-certificates.crt"));
        let run = root.path().join("run");
        (root, run)
    }

    #[test]
    fn the_images_roots_and_the_session_ca_are_bound_over_its_system_bundle() {
        let (root, run) = image_with(|b| std::fs::write(b, "IMAGE ROOTS\n").unwrap());
        let merged = root.path();
        let bind = system_store_bind(merged, &run, &trust(&run)).expect("a bind");
        assert_eq!(bind.target, Path::new(ca::SYSTEM_BUNDLE));
        assert!(bind.read_only);
        assert_eq!(bind.source, run.join(ca::BUNDLE_NAME));
        let made = std::fs::read_to_string(&bind.source).unwrap();
        assert!(
            made.starts_with("IMAGE ROOTS\n") && made.ends_with(PEM),
            "{made}"
        );
    }

    #[test]
    fn an_image_whose_bundle_links_out_makes_the_host_read_nothing() {
        // A host secret the test made, and an image pointing its bundle at it (as a
        // hostile devcontainer image would at the host's keys).
        let secret = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secret.path(), "HOST SECRET").unwrap();
        let (root, run) = image_with(|b| std::os::unix::fs::symlink(secret.path(), b).unwrap());
        assert!(system_store_bind(root.path(), &run, &trust(&run)).is_none());
        assert!(!run.join(ca::BUNDLE_NAME).exists(), "nothing written");
        // A link on the way (etc/ssl -> elsewhere) is refused the same.
        let other = tempfile::tempdir().unwrap();
        let certs = other.path().join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::write(certs.join("ca-certificates.crt"), "HOST ROOTS").unwrap();
        let image = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(image.path().join("etc")).unwrap();
        std::os::unix::fs::symlink(other.path(), image.path().join("etc/ssl")).unwrap();
        let run2 = image.path().join("run");
        assert!(system_store_bind(image.path(), &run2, &trust(&run2)).is_none());
    }

    #[test]
    fn no_system_bundle_or_a_planted_name_leaves_the_bundle_to_the_agent() {
        let empty = tempfile::tempdir().unwrap();
        let run = empty.path().join("run");
        assert!(system_store_bind(empty.path(), &run, &trust(&run)).is_none());
        // A FIFO where the bundle is: refused without blocking.
        let (root, run) =
            image_with(|b| nix::unistd::mkfifo(b, nix::sys::stat::Mode::S_IRWXU).unwrap());
        assert!(system_store_bind(root.path(), &run, &trust(&run)).is_none());
        // A name already in the run dir is never written through.
        let (root, run) = image_with(|b| std::fs::write(b, "IMAGE ROOTS\n").unwrap());
        let ca = trust(&run);
        let target = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(target.path(), run.join(ca::BUNDLE_NAME)).unwrap();
        assert!(system_store_bind(root.path(), &run, &ca).is_none());
        assert_eq!(std::fs::read_to_string(target.path()).unwrap(), "");
    }
}
