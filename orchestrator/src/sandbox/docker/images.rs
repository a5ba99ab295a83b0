//! Building the sandbox images from local files only (no registry is reachable).
//!
//! - `cordon-minimal`: `FROM scratch` with the static agent and busybox, built through the
//!   engine's classic builder from an in-memory tar context. Seconds.
//! - `cordon-dev`: a debootstrapped Debian root filesystem imported as `cordon-dev-base`
//!   (cached in `$CORDON_HOME/cache/dev-rootfs`), then the agent on top. Minutes, once.
//!
//! - `cordon-server`: `FROM scratch` with `cordon` itself, the agent and their shared
//!   libraries, for running `cordon serve` in a container (`deploy/`); see [`super::server_image`].
//!
//! No source tree is needed: the recipes are compiled in, and the agent is found beside
//! `cordon` (`cargo install --path sandbox-agent`). A dynamically linked agent gets its
//! interpreter and libraries copied beside it ([`super::elf_deps`]), so it runs in a
//! `FROM scratch` image without a separate static build.
//!
//! Every image carries labels naming the agent version and the SHA-256 of the agent binary
//! and of its recipe; [`build_images`] skips an image whose labels already match and
//! rebuilds when the agent (or the recipe) changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateImageOptionsBuilder, ListImagesOptionsBuilder,
};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::{ImageReport, connect, cordon_home, docker_err};
use crate::sandbox::SandboxError;

pub const MINIMAL: &str = "cordon-minimal";
pub const DEV: &str = "cordon-dev";
const DEV_BASE: &str = "cordon-dev-base";

pub const LABEL_AGENT_VERSION: &str = "cordon.agent-version";
pub const LABEL_AGENT_SHA256: &str = "cordon.agent-sha256";
pub const LABEL_RECIPE_SHA256: &str = "cordon.recipe-sha256";

const MINIMAL_DOCKERFILE: &str = include_str!("../../../../images/minimal/Dockerfile");
const DEV_DOCKERFILE: &str = include_str!("../../../../images/dev/Dockerfile");
const BUILD_ROOTFS_SH: &str = include_str!("../../../../images/dev/build-rootfs.sh");

/// Which images to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImageSet {
    Minimal,
    Dev,
    /// Minimal and dev (the sandbox images).
    All,
    /// `cordon-server`: this `cordon` and the agent, to run `cordon serve` in a container.
    Server,
}

/// What [`build_images`] did for one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub image: String,
    /// False when an image with the same labels already existed.
    pub rebuilt: bool,
}

/// Builds the images in `which`, skipping those already current. `progress` receives one
/// line per step and the builder's output.
pub async fn build_images(
    which: ImageSet,
    mut progress: impl FnMut(String),
) -> Result<Vec<Built>, SandboxError> {
    let docker = connect().await?;
    let agent = agent_binary()?;
    let bytes = std::fs::read(&agent).map_err(|source| SandboxError::Setup {
        step: "read agent binary",
        source,
    })?;
    // The minimal image has no dynamic loader of its own: a dynamic agent takes its
    // interpreter and libraries with it, or it would fail at session start with nothing
    // but "agent did not come up".
    let libs = RuntimeFiles::of(&agent, &bytes)?;
    progress(format!(
        "agent binary {} ({} bytes, {})",
        agent.display(),
        bytes.len(),
        if libs.files.is_empty() {
            "static".to_string()
        } else {
            format!(
                "dynamic: {} runtime files copied beside it",
                libs.files.len()
            )
        }
    ));
    let mut done = Vec::new();
    if matches!(which, ImageSet::Minimal | ImageSet::All) {
        done.push(build_minimal(&docker, &bytes, &libs, &mut progress).await?);
    }
    if matches!(which, ImageSet::Dev | ImageSet::All) {
        if !libs.files.is_empty() {
            progress(format!(
                "{DEV}: the agent is dynamic and uses the image's own glibc (Debian bookworm)"
            ));
        }
        done.push(build_dev(&docker, &bytes, &mut progress).await?);
    }
    if which == ImageSet::Server {
        done.push(super::server_image::build_server(&docker, &agent, &bytes, &mut progress).await?);
    }
    Ok(done)
}

/// The static agent binary and its bytes, for images built on a user's base: those may
/// have no loader or libraries of the agent's kind, so a dynamic agent is refused there.
pub(super) fn static_agent() -> Result<(PathBuf, Vec<u8>), SandboxError> {
    let agent = static_agent_binary()?;
    let bytes = std::fs::read(&agent).map_err(|source| SandboxError::Setup {
        step: "read agent binary",
        source,
    })?;
    if !is_static_elf(&bytes) {
        return Err(SandboxError::Setup {
            step: "check agent binary (run images/build-agent.sh for a static one)",
            source: std::io::Error::other(format!("{} is not a static binary", agent.display())),
        });
    }
    Ok((agent, bytes))
}

/// The agent binary the images carry: a static one where there is one
/// (`$CORDON_AGENT_BIN`, the source tree's `target/x86_64-unknown-linux-gnu/release/`,
/// `sandbox-agent-static` beside `cordon`), else the one the local backend runs (beside
/// `cordon`, as `cargo install --path sandbox-agent` puts it, or on `PATH`), which may be
/// dynamic: [`build_images`] then copies its libraries in.
pub fn agent_binary() -> Result<PathBuf, SandboxError> {
    static_agent_binary().or_else(|static_err| {
        crate::paths::find_agent_binary()
            .ok()
            .filter(|p| std::fs::read(p).is_ok_and(|b| b.starts_with(b"\x7fELF")))
            .ok_or(static_err)
    })
}

fn static_agent_binary() -> Result<PathBuf, SandboxError> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("CORDON_AGENT_BIN") {
        candidates.push(PathBuf::from(p));
    }
    let rel = "x86_64-unknown-linux-gnu/release/sandbox-agent";
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(t).join(rel));
    }
    candidates.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target")
            .join(rel),
    );
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        candidates.push(dir.join("sandbox-agent-static"));
    }
    candidates
        .into_iter()
        .find(|p| std::fs::read(p).is_ok_and(|b| is_static_elf(&b)))
        .ok_or_else(|| SandboxError::Setup {
            step: "find the agent binary (install it beside cordon: cargo install --path sandbox-agent)",
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
}

/// Whether `elf` is an x86-64 ELF executable without a program interpreter (`PT_INTERP`),
/// i.e. one that runs in an image with no dynamic loader.
pub fn is_static_elf(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    // ELF magic, 64-bit class, little endian.
    if elf.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    let Ok(phoff) = usize::try_from(phoff) else {
        return false;
    };
    (0..usize::from(phnum)).all(|i| {
        let at = phoff + i * usize::from(phentsize);
        u32_at(at).is_some_and(|t| t != PT_INTERP)
    })
}

/// Makes sure `image` exists in the engine. A missing Cordon image (`cordon-minimal`,
/// `cordon-dev`) is built now, reporting through `progress`; any other missing image is
/// an error (no registry is reachable to pull it from).
pub async fn ensure(
    docker: &Docker,
    image: &str,
    mut progress: impl FnMut(String),
) -> Result<(), SandboxError> {
    if image_labels(docker, image).await.is_some() {
        return Ok(());
    }
    let (set, name) = match image {
        MINIMAL => (ImageSet::Minimal, "minimal"),
        DEV => (ImageSet::Dev, "dev"),
        other => {
            return Err(SandboxError::Docker(format!(
                "image {other} is not in the docker engine (no registry is reachable: build or \
                 import it first)"
            )));
        }
    };
    progress(format!(
        "image {image} is not built: building it now (as `cordon images build {name}` does)"
    ));
    build_images(set, progress).await.map(drop).map_err(|e| {
        SandboxError::Docker(format!(
            "image {image} is not built and building it failed: {e}; run \
             `images/build-agent.sh` then `cordon images build {name}`"
        ))
    })
}

pub(super) fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    hex::encode(h.finalize())
}

pub(super) fn wanted_labels(agent: &[u8], recipe: &[&[u8]]) -> HashMap<String, String> {
    HashMap::from([
        (
            LABEL_AGENT_VERSION.to_string(),
            sandbox_agent::AGENT_VERSION.to_string(),
        ),
        (LABEL_AGENT_SHA256.to_string(), sha256_hex(&[agent])),
        (LABEL_RECIPE_SHA256.to_string(), sha256_hex(recipe)),
    ])
}

/// Labels of `image`, or `None` when the engine has no such image.
pub(super) async fn image_labels(docker: &Docker, image: &str) -> Option<HashMap<String, String>> {
    let info = docker.inspect_image(image).await.ok()?;
    Some(info.config.and_then(|c| c.labels).unwrap_or_default())
}

pub(super) async fn is_current(
    docker: &Docker,
    image: &str,
    want: &HashMap<String, String>,
) -> bool {
    image_labels(docker, image)
        .await
        .is_some_and(|have| want.iter().all(|(k, v)| have.get(k) == Some(v)))
}

async fn build_minimal(
    docker: &Docker,
    agent: &[u8],
    libs: &RuntimeFiles,
    progress: &mut impl FnMut(String),
) -> Result<Built, SandboxError> {
    let busybox_path = std::env::var_os("CORDON_BUSYBOX")
        .map_or_else(|| PathBuf::from("/bin/busybox"), PathBuf::from);
    let busybox = std::fs::read(&busybox_path).map_err(|source| SandboxError::Setup {
        step: "read busybox (apt-get install busybox-static)",
        source,
    })?;
    let want = wanted_labels(
        agent,
        &[
            MINIMAL_DOCKERFILE.as_bytes(),
            &busybox,
            libs.digest.as_bytes(),
        ],
    );
    if is_current(docker, MINIMAL, &want).await {
        progress(format!("{MINIMAL}: up to date"));
        return Ok(Built {
            image: MINIMAL.into(),
            rebuilt: false,
        });
    }
    progress(format!("{MINIMAL}: building"));
    let applets = busybox_applets(&busybox_path)?;
    let context =
        minimal_context(agent, &busybox, &applets, libs).map_err(|source| SandboxError::Setup {
            step: "assemble build context",
            source,
        })?;
    build(docker, Some(MINIMAL), context, &want, progress).await?;
    Ok(Built {
        image: MINIMAL.into(),
        rebuilt: true,
    })
}

/// The applets this busybox provides, from `busybox --list`.
fn busybox_applets(busybox: &Path) -> Result<Vec<String>, SandboxError> {
    let out = std::process::Command::new(busybox)
        .arg("--list")
        .output()
        .map_err(|source| SandboxError::Setup {
            step: "list busybox applets",
            source,
        })?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && !a.contains('/') && *a != "busybox")
        .map(String::from)
        .collect())
}

fn minimal_context(
    agent: &[u8],
    busybox: &[u8],
    applets: &[String],
    libs: &RuntimeFiles,
) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    add_file(&mut tar, "Dockerfile", MINIMAL_DOCKERFILE.as_bytes(), 0o644)?;
    add_file(&mut tar, "rootfs/sandbox-agent", agent, 0o755)?;
    libs.add_to(&mut tar, "rootfs")?;
    add_file(&mut tar, "rootfs/bin/busybox", busybox, 0o755)?;
    for applet in applets {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        tar.append_link(&mut h, format!("rootfs/bin/{applet}"), "busybox")?;
    }
    // No account database is needed (numeric uids), but a tiny one keeps `id` and `ls -l`
    // readable for root and nobody.
    let passwd = "root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n";
    add_file(&mut tar, "rootfs/etc/passwd", passwd.as_bytes(), 0o644)?;
    add_file(
        &mut tar,
        "rootfs/etc/group",
        b"root:x:0:\nnogroup:x:65534:\n",
        0o644,
    )?;
    add_dir(&mut tar, "rootfs/tmp", 0o1777)?;
    add_dir(&mut tar, "rootfs/run/cordon", 0o755)?;
    tar.into_inner()
}

pub(super) fn add_file(
    tar: &mut tar::Builder<Vec<u8>>,
    path: &str,
    data: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, path, data)
}

pub(super) fn add_dir(
    tar: &mut tar::Builder<Vec<u8>>,
    path: &str,
    mode: u32,
) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_size(0);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_entry_type(tar::EntryType::Directory);
    tar.append_data(&mut h, path, std::io::empty())
}

/// Runs the classic builder on `context` (its `Dockerfile`), forwarding its output to
/// `progress`; `tag` names the image, or `None` leaves it untagged. Returns the image id.
/// A failure names the step that failed (`Step 3/5 : RUN make`) and the builder's message.
pub(super) async fn build(
    docker: &Docker,
    tag: Option<&str>,
    context: Vec<u8>,
    labels: &HashMap<String, String>,
    progress: &mut impl FnMut(String),
) -> Result<Option<String>, SandboxError> {
    let what = tag.unwrap_or("image");
    let mut options = BuildImageOptionsBuilder::new()
        .dockerfile("Dockerfile")
        .labels(labels)
        .rm(true)
        .forcerm(true);
    if let Some(tag) = tag {
        options = options.t(tag);
    }
    let mut stream = docker.build_image(
        options.build(),
        None,
        Some(bollard::body_full(bytes::Bytes::from(context))),
    );
    let mut step = None;
    let mut id = None;
    while let Some(item) = stream.next().await {
        let info = item.map_err(docker_err("build image"))?;
        if let Some(detail) = info.error_detail {
            let message = detail.message.unwrap_or_default();
            return Err(SandboxError::Docker(match step {
                Some(step) => format!("build {what} failed at {step}: {message}"),
                None => format!("build {what}: {message}"),
            }));
        }
        if let Some(image) = info.aux {
            id = image.id.or(id);
        }
        if let Some(line) = info.stream {
            let line = line.trim_end();
            if line.starts_with("Step ") {
                step = Some(line.to_string());
            }
            if !line.is_empty() {
                progress(format!("{what}: {line}"));
            }
        }
    }
    Ok(id)
}

async fn build_dev(
    docker: &Docker,
    agent: &[u8],
    progress: &mut impl FnMut(String),
) -> Result<Built, SandboxError> {
    let want = wanted_labels(agent, &[DEV_DOCKERFILE.as_bytes()]);
    if is_current(docker, DEV, &want).await {
        progress(format!("{DEV}: up to date"));
        return Ok(Built {
            image: DEV.into(),
            rebuilt: false,
        });
    }
    if image_labels(docker, DEV_BASE).await.is_none() {
        let rootfs = dev_rootfs(progress)?;
        import_rootfs(docker, &rootfs, progress).await?;
    }
    progress(format!("{DEV}: adding the agent"));
    let mut tar = tar::Builder::new(Vec::new());
    let context = (|| {
        add_file(&mut tar, "Dockerfile", DEV_DOCKERFILE.as_bytes(), 0o644)?;
        add_file(&mut tar, "sandbox-agent", agent, 0o755)?;
        tar.into_inner()
    })()
    .map_err(|source| SandboxError::Setup {
        step: "assemble build context",
        source,
    })?;
    build(docker, Some(DEV), context, &want, progress).await?;
    Ok(Built {
        image: DEV.into(),
        rebuilt: true,
    })
}

/// The cached debootstrap tree, made by `images/dev/build-rootfs.sh` when missing.
fn dev_rootfs(progress: &mut impl FnMut(String)) -> Result<PathBuf, SandboxError> {
    let dir = cordon_home().join("cache/dev-rootfs");
    if dir.join("usr/bin/bash").exists() {
        progress(format!("{DEV_BASE}: reusing {}", dir.display()));
        return Ok(dir);
    }
    // The recipe is compiled in (no source tree needed): written to a private temporary
    // file for bash to run.
    let script = tempfile::Builder::new()
        .prefix("cordon-build-rootfs")
        .suffix(".sh")
        .tempfile()
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(BUILD_ROOTFS_SH.as_bytes())?;
            Ok(f.into_temp_path())
        })
        .map_err(|source| SandboxError::Setup {
            step: "write build-rootfs.sh",
            source,
        })?;
    progress(format!("{DEV_BASE}: debootstrap (minutes)"));
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|source| SandboxError::Setup {
            step: "create cache dir",
            source,
        })?;
    }
    // Minutes of work: every CPU, not the session thread's pin.
    let status = sandbox_agent::affinity::with_every_cpu(|| {
        std::process::Command::new("bash")
            .arg(&*script)
            .arg(&dir)
            .status()
    })
    .map_err(|source| SandboxError::Setup {
        step: "run build-rootfs.sh",
        source,
    })?;
    if !status.success() {
        return Err(SandboxError::Docker(format!(
            "build-rootfs.sh failed: {status}"
        )));
    }
    Ok(dir)
}

/// `tar -C rootfs -c . | docker import - cordon-dev-base`, through the API.
async fn import_rootfs(
    docker: &Docker,
    rootfs: &Path,
    progress: &mut impl FnMut(String),
) -> Result<(), SandboxError> {
    progress(format!("{DEV_BASE}: importing {}", rootfs.display()));
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    let archive = tar
        .append_dir_all(".", rootfs)
        .and_then(|()| tar.into_inner())
        .map_err(|source| SandboxError::Setup {
            step: "archive dev rootfs",
            source,
        })?;
    let options = CreateImageOptionsBuilder::new()
        .from_src("-")
        .repo(DEV_BASE)
        .tag("latest")
        .build();
    let mut stream = docker.create_image(
        Some(options),
        Some(bollard::body_full(bytes::Bytes::from(archive))),
        None,
    );
    while let Some(item) = stream.next().await {
        let info = item.map_err(docker_err("import dev rootfs"))?;
        if let Some(status) = info.status {
            progress(format!("{DEV_BASE}: {status}"));
        }
    }
    Ok(())
}

/// A binary's interpreter and shared libraries (none for a static one), read now, to be
/// copied into an image at their own paths.
#[derive(Debug, Default)]
pub(super) struct RuntimeFiles {
    pub files: Vec<(PathBuf, Vec<u8>)>,
    /// Of the paths and contents, for the image's recipe label.
    pub digest: String,
}

impl RuntimeFiles {
    pub fn of(bin: &Path, elf: &[u8]) -> Result<Self, SandboxError> {
        let mut files = Vec::new();
        for path in super::elf_deps::runtime_files(bin, elf)? {
            let bytes = std::fs::read(&path).map_err(|source| SandboxError::Setup {
                step: "read a shared library of the agent",
                source,
            })?;
            files.push((path, bytes));
        }
        let mut parts: Vec<&[u8]> = Vec::new();
        for (path, bytes) in &files {
            parts.push(path.as_os_str().as_encoded_bytes());
            parts.push(bytes);
        }
        Ok(Self {
            digest: sha256_hex(&parts),
            files,
        })
    }

    /// Adds `other`'s files not already here.
    pub fn merge(&mut self, other: RuntimeFiles) {
        for (path, bytes) in other.files {
            if !self.files.iter().any(|(p, _)| *p == path) {
                self.files.push((path, bytes));
            }
        }
        self.digest = sha256_hex(&[self.digest.as_bytes(), other.digest.as_bytes()]);
    }

    /// Adds every file under `root/` in the context, at its own path (a symbolic link's
    /// target's content at the link's path: the image needs no link farm).
    pub fn add_to(&self, tar: &mut tar::Builder<Vec<u8>>, root: &str) -> std::io::Result<()> {
        for (path, bytes) in &self.files {
            let rel = path.strip_prefix("/").unwrap_or(path);
            add_file(tar, &format!("{root}/{}", rel.display()), bytes, 0o755)?;
        }
        Ok(())
    }
}

/// The Cordon images the engine holds, for `cordon doctor`.
pub async fn report(docker: &Docker) -> Vec<ImageReport> {
    let current_sha = agent_binary()
        .ok()
        .and_then(|p| std::fs::read(p).ok())
        .map(|b| sha256_hex(&[&b]));
    let filters = HashMap::from([("reference".to_string(), vec!["cordon-*".to_string()])]);
    let options = ListImagesOptionsBuilder::new().filters(&filters).build();
    let Ok(images) = docker.list_images(Some(options)).await else {
        return Vec::new();
    };
    images
        .into_iter()
        .flat_map(|img| {
            let sha = img.labels.get(LABEL_AGENT_SHA256).cloned();
            let version = img.labels.get(LABEL_AGENT_VERSION).cloned();
            let current = sha.is_some() && sha == current_sha;
            img.repo_tags.into_iter().map(move |name| ImageReport {
                name,
                agent_version: version.clone(),
                agent_sha256: sha.clone(),
                current,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_elf_detection() {
        assert!(!is_static_elf(b"#!/bin/sh\n"));
        assert!(!is_static_elf(&[]));
        // This test binary is dynamic (cargo's default); /bin/busybox from busybox-static
        // is static where installed.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(!is_static_elf(&me), "a dynamic test binary");
        if let Ok(bb) = std::fs::read("/bin/busybox") {
            assert!(is_static_elf(&bb), "busybox-static");
        }
    }

    #[test]
    fn labels_change_with_the_agent() {
        let a = wanted_labels(b"agent one", &[b"recipe"]);
        let b = wanted_labels(b"agent two", &[b"recipe"]);
        assert_ne!(a[LABEL_AGENT_SHA256], b[LABEL_AGENT_SHA256]);
        assert_eq!(a[LABEL_RECIPE_SHA256], b[LABEL_RECIPE_SHA256]);
        assert_eq!(a[LABEL_AGENT_VERSION], sandbox_agent::AGENT_VERSION);
    }

    #[test]
    fn the_minimal_context_holds_agent_busybox_and_applets() {
        let libs = RuntimeFiles {
            files: vec![(PathBuf::from("/lib64/ld.so"), b"L".to_vec())],
            digest: String::new(),
        };
        let ctx = minimal_context(b"A", b"B", &["sh".into(), "ls".into()], &libs).unwrap();
        let mut archive = tar::Archive::new(&ctx[..]);
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        for want in [
            "Dockerfile",
            "rootfs/sandbox-agent",
            "rootfs/bin/busybox",
            "rootfs/bin/sh",
            "rootfs/bin/ls",
            "rootfs/tmp",
            "rootfs/lib64/ld.so",
        ] {
            assert!(
                names.iter().any(|n| n.trim_end_matches('/') == want),
                "{want}"
            );
        }
    }
}
