//! The session CA of brokered credentials in a container's system trust store.
//!
//! The image's root is read-only from inside, so its agent can only write the combined
//! bundle in the run dir and point the common variables at it; a program that reads the
//! system store alone (a Go binary, a JVM's default, anything that ignores the variables)
//! would then refuse the proxy's certificates. So the host makes the bundle from the
//! image's own system roots and binds it read-only over the image's system bundle, as the
//! local backend's init does for its root:
//!
//! - a claim (root: pooled and cold sessions) reads the roots in the container's own
//!   writable layer on the host ([`from_layer`]);
//! - a Cordon that is not root (the compose deploy's server) has no such view: it asks the
//!   engine for the file out of a container created from the image and never started
//!   ([`ImageRoots`]), once per image id, and binds the bundle at create time.
//!
//! The image is untrusted data here (a repository's devcontainer may have built it): in
//! the layer its roots are read beneath the layer's directory with no link followed at
//! any step, so an image whose bundle is `-> /root/.ssh/id_ed25519` makes the host read
//! nothing of its own; from the engine only a regular file of that name is taken. Such an
//! image, or one without a system bundle, keeps the variables alone. A FIFO or an
//! oversized file is refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bollard::Docker;
use futures::StreamExt;
use sandbox_agent::beneath::read::WorkspaceReader;
use sandbox_agent::egress::ca::{self, CaTrust};

use super::masks::Bind;

/// The system bundle's path relative to a root.
fn bundle_rel() -> &'static Path {
    Path::new(ca::SYSTEM_BUNDLE.trim_start_matches('/'))
}

/// A claim's bind: the image's system roots found beneath `merged` (the container's root
/// as the host sees it), then the session CA, written into `run_dir` (see [`bind_with`]).
/// `None`, leaving the bundle to the agent, when the image has no plain-file system bundle
/// or the bundle cannot be made here (the reason logged).
pub fn from_layer(merged: &Path, run_dir: &Path, ca: &CaTrust) -> Option<Bind> {
    let image = match WorkspaceReader::open(merged) {
        Ok(reader) => reader.read_bytes(bundle_rel(), ca::MAX_SYSTEM_BUNDLE),
        Err(e) => Err(e),
    };
    match image {
        Ok(Some(system)) => bind_with(run_dir, ca, system),
        Ok(None) => None,
        Err(why) => {
            tracing::info!(%why, "the image's system CA bundle is not used for the session CA");
            None
        }
    }
}

/// Writes the bundle of `system` (the image's roots) and the session CA into `run_dir`
/// (the host dir the container sees at the bundle's own directory, [`CaTrust::bundle`]),
/// and returns its read-only bind over the image's system bundle.
pub fn bind_with(run_dir: &Path, ca: &CaTrust, system: Vec<u8>) -> Option<Bind> {
    let source: PathBuf = run_dir.join(ca.bundle.file_name()?);
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

/// The system roots of each image id already asked for (`None`: it has none to use).
/// Immutable by id, so kept for the backend's life; an engine that failed to answer is
/// asked again next time.
#[derive(Debug, Default)]
pub struct ImageRoots(Mutex<HashMap<String, Option<Arc<Vec<u8>>>>>);

/// The bytes of the engine's archive of one file taken at most: the bundle's cap and room
/// for the tar headers.
const MAX_ARCHIVE: u64 = ca::MAX_SYSTEM_BUNDLE + 64 * 1024;

impl ImageRoots {
    /// The system bundle of `image`, out of a container created from it and never started
    /// (named and labelled as a session's, so that a crash before its removal leaves it
    /// to [`super::adopt::reconcile`]); removed before this returns.
    pub async fn get(&self, docker: &Docker, image: &str, run_root: &Path) -> Option<Arc<Vec<u8>>> {
        let id = docker.inspect_image(image).await.ok()?.id?;
        if let Some(known) = self.0.lock().ok()?.get(&id) {
            return known.clone();
        }
        let roots = match from_engine(docker, &id, run_root).await {
            Ok(roots) => roots.map(Arc::new),
            Err(why) => {
                tracing::warn!("cannot read the image's system CA bundle: {why}");
                return None;
            }
        };
        self.0.lock().ok()?.insert(id, roots.clone());
        roots
    }
}

/// The image's system bundle: `Ok(None)` when it has none to use (missing, too large, not
/// a regular file), `Err` when the engine did not answer.
async fn from_engine(
    docker: &Docker,
    image_id: &str,
    run_root: &Path,
) -> Result<Option<Vec<u8>>, bollard::errors::Error> {
    use bollard::models::{ContainerCreateBody, HostConfig};
    use bollard::query_parameters::{
        CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    };
    static ASKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        "cordon-ca-roots-{}-{nanos}-{}",
        std::process::id(),
        ASKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut labels = HashMap::from([
        (super::labels::SESSION.to_string(), name.clone()),
        // Never made: once this process is gone, reconcile finds it unreachable.
        (
            super::labels::RUN_DIR.to_string(),
            run_root.join(&name).display().to_string(),
        ),
    ]);
    if let Some(owner) = super::adopt::this_process() {
        labels.insert(super::labels::OWNER_PID.to_string(), owner.pid.to_string());
        labels.insert(
            super::labels::OWNER_START.to_string(),
            owner.start.to_string(),
        );
    }
    let body = ContainerCreateBody {
        image: Some(image_id.to_string()),
        entrypoint: Some(Vec::new()),
        cmd: Some(vec!["/never-started".into()]),
        network_disabled: Some(true),
        labels: Some(labels),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    docker.create_container(Some(options), body).await?;
    let archive = DownloadFromContainerOptionsBuilder::new()
        .path(ca::SYSTEM_BUNDLE)
        .build();
    let mut stream = docker.download_from_container(&name, Some(archive));
    let mut tar_bytes = Vec::new();
    let mut read = Ok(true);
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) if (tar_bytes.len() + bytes.len()) as u64 <= MAX_ARCHIVE => {
                tar_bytes.extend_from_slice(&bytes);
            }
            // Larger than any bundle taken, or missing: the image has none to use.
            Ok(_)
            | Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {
                read = Ok(false);
                break;
            }
            Err(e) => {
                read = Err(e);
                break;
            }
        }
    }
    drop(stream);
    if let Err(e) = super::container::remove(docker, &name).await {
        tracing::warn!("cannot remove {name}: {e}");
    }
    Ok(read?.then(|| regular_file_in(&tar_bytes)).flatten())
}

/// The content of the archive's one entry when it is a regular file named as the system
/// bundle, within the cap; a link, a directory or anything else gives `None`.
fn regular_file_in(tar_bytes: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut archive = tar::Archive::new(tar_bytes);
    let mut entries = archive.entries().ok()?;
    let mut entry = entries.next()?.ok()?;
    let named = entry.path().ok()?.file_name()? == bundle_rel().file_name()?;
    let regular = entry.header().entry_type() == tar::EntryType::Regular;
    if !named || !regular || entry.size() > ca::MAX_SYSTEM_BUNDLE {
        return None;
    }
    let mut out = Vec::new();
    (&mut entry)
        .take(ca::MAX_SYSTEM_BUNDLE)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
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
        let bind = from_layer(merged, &run, &trust(&run)).expect("a bind");
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
        assert!(from_layer(root.path(), &run, &trust(&run)).is_none());
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
        assert!(from_layer(image.path(), &run2, &trust(&run2)).is_none());
    }

    fn archive_of(entry_type: tar::EntryType, name: &str, body: &[u8]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(entry_type);
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        if entry_type == tar::EntryType::Symlink {
            h.set_link_name("/root/.ssh/id_ed25519").unwrap();
        }
        b.append_data(&mut h, name, body).unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn from_the_engine_only_a_regular_file_of_the_bundles_name_is_taken() {
        let plain = archive_of(tar::EntryType::Regular, "ca-certificates.crt", b"ROOTS");
        assert_eq!(regular_file_in(&plain).as_deref(), Some(&b"ROOTS"[..]));
        let link = archive_of(tar::EntryType::Symlink, "ca-certificates.crt", b"");
        assert_eq!(regular_file_in(&link), None);
        let other = archive_of(tar::EntryType::Regular, "other.pem", b"ROOTS");
        assert_eq!(regular_file_in(&other), None);
        assert_eq!(regular_file_in(b"not a tar"), None);
    }

    #[test]
    fn no_system_bundle_or_a_planted_name_leaves_the_bundle_to_the_agent() {
        let empty = tempfile::tempdir().unwrap();
        let run = empty.path().join("run");
        assert!(from_layer(empty.path(), &run, &trust(&run)).is_none());
        // A FIFO where the bundle is: refused without blocking.
        let (root, run) =
            image_with(|b| nix::unistd::mkfifo(b, nix::sys::stat::Mode::S_IRWXU).unwrap());
        assert!(from_layer(root.path(), &run, &trust(&run)).is_none());
        // A name already in the run dir is never written through.
        let (root, run) = image_with(|b| std::fs::write(b, "IMAGE ROOTS\n").unwrap());
        let ca = trust(&run);
        let target = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(target.path(), run.join(ca::BUNDLE_NAME)).unwrap();
        assert!(from_layer(root.path(), &run, &ca).is_none());
        assert_eq!(std::fs::read_to_string(target.path()).unwrap(), "");
    }
}
