//! `cordon-server`: the image that runs `cordon serve` in a container (`deploy/`), built
//! from this very `cordon` binary, the agent, the host's `setfacl` and `git`, their shared
//! libraries and the host's CA bundle, `FROM scratch` (recipe: `deploy/server.Dockerfile`, compiled in).

use std::path::Path;

use bollard::Docker;

use super::images::{Built, RuntimeFiles, add_dir, add_file, build, is_current, wanted_labels};
use crate::sandbox::SandboxError;

pub const SERVER: &str = "cordon-server";
const SERVER_DOCKERFILE: &str = include_str!("../../../../deploy/server.Dockerfile");
/// Where the host keeps its CA bundle (Debian's ca-certificates).
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The uid the server runs as in the image (and owns its data directory).
const SERVER_UID: u64 = 10001;
/// The host's `setfacl` (Debian's acl), copied in with its libraries: in a container the
/// kernel refuses the user namespace an idmapped workspace needs, so the docker backend
/// grants the sandbox uid its workspace by ACL.
const SETFACL: &[&str] = &["/usr/bin/setfacl", "/bin/setfacl"];
/// The host's `git`, copied in with its libraries: each session's checkpoint store is a
/// git repository the server keeps (its builtins need no helper from `git-core`).
const GIT: &[&str] = &["/usr/bin/git", "/bin/git"];

/// The first of `paths` that exists, read, its libraries merged into `libs`; empty (after
/// `missing` went to `progress`) when the host has none.
fn host_tool(
    paths: &[&str],
    libs: &mut RuntimeFiles,
    progress: &mut impl FnMut(String),
    missing: &str,
) -> Result<Vec<u8>, SandboxError> {
    match paths.iter().map(Path::new).find(|p| p.is_file()) {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|source| SandboxError::Setup {
                step: "read a host tool for the server image",
                source,
            })?;
            libs.merge(RuntimeFiles::of(path, &bytes)?);
            Ok(bytes)
        }
        None => {
            progress(format!("{SERVER}: {missing}"));
            Ok(Vec::new())
        }
    }
}

pub(super) async fn build_server(
    docker: &Docker,
    agent_path: &Path,
    agent: &[u8],
    progress: &mut impl FnMut(String),
) -> Result<Built, SandboxError> {
    let setup = |step| move |source| SandboxError::Setup { step, source };
    let exe = std::env::current_exe().map_err(setup("find the cordon binary"))?;
    let cordon = std::fs::read(&exe).map_err(setup("read the cordon binary"))?;
    let ca = std::fs::read(CA_BUNDLE).map_err(setup(
        "read the CA bundle (apt-get install ca-certificates)",
    ))?;
    let mut libs = RuntimeFiles::of(&exe, &cordon)?;
    libs.merge(RuntimeFiles::of(agent_path, agent)?);
    let setfacl = host_tool(
        SETFACL,
        &mut libs,
        progress,
        "no setfacl on this host (apt-get install acl): docker sessions of the \
         containerized server will fail to start",
    )?;
    let git = host_tool(
        GIT,
        &mut libs,
        progress,
        "no git on this host (apt-get install git): sessions of the containerized \
         server will fail to start (no checkpoint store)",
    )?;
    let want = wanted_labels(
        agent,
        &[
            SERVER_DOCKERFILE.as_bytes(),
            &cordon,
            &ca,
            &setfacl,
            &git,
            libs.digest.as_bytes(),
        ],
    );
    if is_current(docker, SERVER, &want).await {
        progress(format!("{SERVER}: up to date"));
        return Ok(Built {
            image: SERVER.into(),
            rebuilt: false,
        });
    }
    progress(format!(
        "{SERVER}: building from {} ({} runtime files)",
        exe.display(),
        libs.files.len()
    ));
    let context = server_context(&cordon, agent, &setfacl, &git, &ca, &libs)
        .map_err(setup("assemble build context"))?;
    build(docker, Some(SERVER), context, &want, progress).await?;
    Ok(Built {
        image: SERVER.into(),
        rebuilt: true,
    })
}

/// The build context; `setfacl` and `git` empty when the host has none.
fn server_context(
    cordon: &[u8],
    agent: &[u8],
    setfacl: &[u8],
    git: &[u8],
    ca: &[u8],
    libs: &RuntimeFiles,
) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    add_file(&mut tar, "Dockerfile", SERVER_DOCKERFILE.as_bytes(), 0o644)?;
    add_file(&mut tar, "rootfs/usr/local/bin/cordon", cordon, 0o755)?;
    add_file(&mut tar, "rootfs/usr/local/bin/sandbox-agent", agent, 0o755)?;
    if !setfacl.is_empty() {
        add_file(&mut tar, "rootfs/usr/local/bin/setfacl", setfacl, 0o755)?;
    }
    if !git.is_empty() {
        add_file(&mut tar, "rootfs/usr/local/bin/git", git, 0o755)?;
    }
    libs.add_to(&mut tar, "rootfs")?;
    add_file(
        &mut tar,
        "rootfs/etc/ssl/certs/ca-certificates.crt",
        ca,
        0o644,
    )?;
    let passwd = "root:x:0:0:root:/:/nonexistent\n\
                  cordon:x:10001:10001:cordon:/var/lib/cordon:/nonexistent\n\
                  nobody:x:65534:65534:nobody:/:/nonexistent\n";
    add_file(&mut tar, "rootfs/etc/passwd", passwd.as_bytes(), 0o644)?;
    let group = "root:x:0:\ncordon:x:10001:\nnogroup:x:65534:\n";
    add_file(&mut tar, "rootfs/etc/group", group.as_bytes(), 0o644)?;
    add_dir(&mut tar, "rootfs/tmp", 0o1777)?;
    // The data directory belongs to the server's uid, private (a volume mounted over it
    // must be owned the same way).
    let mut h = tar::Header::new_gnu();
    h.set_size(0);
    h.set_mode(0o700);
    h.set_uid(SERVER_UID);
    h.set_gid(SERVER_UID);
    h.set_entry_type(tar::EntryType::Directory);
    tar.append_data(&mut h, "rootfs/var/lib/cordon", std::io::empty())?;
    tar.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_holds_both_binaries_and_the_data_dir() {
        let ctx =
            server_context(b"C", b"A", b"S", b"G", b"CA", &RuntimeFiles::default()).expect("ctx");
        let mut archive = tar::Archive::new(&ctx[..]);
        let entries: Vec<(String, u64)> = archive
            .entries()
            .expect("entries")
            .map(|e| {
                let e = e.expect("entry");
                let uid = e.header().uid().expect("uid");
                (e.path().expect("path").display().to_string(), uid)
            })
            .collect();
        for want in [
            "Dockerfile",
            "rootfs/usr/local/bin/cordon",
            "rootfs/usr/local/bin/sandbox-agent",
            "rootfs/usr/local/bin/setfacl",
            "rootfs/usr/local/bin/git",
            "rootfs/etc/ssl/certs/ca-certificates.crt",
        ] {
            assert!(entries.iter().any(|(n, _)| n == want), "{want}");
        }
        assert!(entries.contains(&("rootfs/var/lib/cordon".into(), SERVER_UID)));
    }

    #[test]
    fn the_recipe_runs_as_the_server_uid_from_scratch() {
        assert!(SERVER_DOCKERFILE.contains("FROM scratch"));
        assert!(SERVER_DOCKERFILE.contains("USER 10001:10001"));
    }
}
