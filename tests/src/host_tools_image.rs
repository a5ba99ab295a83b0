//! A small Docker image of this host's own python3 (with Debian's pip) and git, for tests
//! that run real tools on the Docker backend without `cordon-dev` (a debootstrapped
//! Debian: minutes to build, too long for CI).
//!
//! `FROM scratch` with the host's busybox (the shell and its applets), `/usr/bin/python3`,
//! its standard library (without its tests, IDLE, tkinter and the static `config-*`
//! directory), Debian's pip from `/usr/lib/python3/dist-packages/pip`, `/usr/bin/git`
//! with the two helpers a clone over HTTPS runs (`git` and `git-remote-https` in
//! `/usr/lib/git-core`), and the shared libraries the host's loader resolves for each of
//! those ELF files (`ld.so --list`), at their own paths. Nothing else of `/usr/lib`.
//!
//! Built by `cordon images build NAME --dockerfile` (a project image: the static agent
//! goes on top), whose labels carry the SHA-256 of the context, the recipe and the agent:
//! a second run with the same host files and agent finds the image current (every entry
//! of the context gets one fixed time, so the hash is of the
//! contents). The image is kept for the next run (its name is the tests' own).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cordon::sandbox::docker::elf_deps;

/// The image's name (tests only).
pub const IMAGE: &str = "cordon-test-host-tools";

/// The host's Debian python and the directories it needs.
const PYTHON: &str = "/usr/bin/python3.11";
const STDLIB: &str = "/usr/lib/python3.11";
const PIP: &str = "/usr/lib/python3/dist-packages/pip";
/// Parts of the standard library pip and git never load (the largest is `config-*`, the
/// static library for embedding).
const STDLIB_SKIPPED: &[&str] = &[
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "lib2to3",
    "pydoc_data",
    "ensurepip",
    "config-3.11-x86_64-linux-gnu",
    "site-packages",
    "dist-packages",
];
const GIT: &str = "/usr/bin/git";
/// What `git clone https://...` runs beside `git` itself (`git-remote-https` is a link).
const GIT_CORE: &[&str] = &["/usr/lib/git-core/git", "/usr/lib/git-core/git-remote-http"];
const GIT_TEMPLATES: &str = "/usr/share/git-core/templates";
const BUSYBOX: &str = "/usr/bin/busybox";

const DOCKERFILE: &str = "FROM scratch\nCOPY root/ /\nENV PATH=/usr/bin:/bin\n";

/// What [`ensure`] did.
#[derive(Debug, Clone)]
pub struct Built {
    pub image: String,
    /// False when the image with the same content existed already.
    pub rebuilt: bool,
    /// Assembling the context, hashing it and (when `rebuilt`) building.
    pub took: Duration,
    /// The image's size, as the engine reports it.
    pub bytes: u64,
}

/// Builds [`IMAGE`] unless it is current; one test binary at a time (a file lock).
/// Call [`crate::docker_ready`] first (it builds the static agent and `cordon-minimal`).
pub fn ensure() -> Built {
    let lock_path = crate::target_dir().join("host-tools-image.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .expect("open host-tools-image.lock");
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("lock host-tools-image.lock");
    let started = Instant::now();
    let ctx = tempfile::Builder::new()
        .prefix("host-tools-ctx-")
        .tempdir_in(crate::target_dir())
        .unwrap();
    assemble(&ctx.path().join("root"));
    std::fs::write(ctx.path().join("Dockerfile"), DOCKERFILE).unwrap();
    let before = image_id();
    // The static agent [`crate::docker_ready`] made, named outright: the one `cordon`
    // would find from its own source path may be another checkout's.
    let out = Command::new(crate::cordon_bin())
        .args(["images", "build", IMAGE, "--dockerfile"])
        .arg(ctx.path().join("Dockerfile"))
        .arg("--context")
        .arg(ctx.path())
        .env(
            "CORDON_AGENT_BIN",
            crate::static_dir().join("sandbox-agent"),
        )
        .output()
        .expect("run cordon images build");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "building {IMAGE}: {log}");
    let rebuilt = !log.contains(&format!("{IMAGE}: up to date"));
    let took = started.elapsed();
    // The replaced image (host tools or agent changed) is of no further use.
    if let Some(old) = before.filter(|old| rebuilt && Some(old) != image_id().as_ref()) {
        let _ = Command::new("docker").args(["rmi", &old]).output();
    }
    let bytes = inspect(IMAGE, "{{.Size}}")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Built {
        image: IMAGE.into(),
        rebuilt,
        took,
        bytes,
    }
}

fn image_id() -> Option<String> {
    inspect(IMAGE, "{{.Id}}")
}

fn inspect(image: &str, format: &str) -> Option<String> {
    let out = Command::new("docker")
        .args(["image", "inspect", "-f", format, image])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Lays out the image's root filesystem under `root`.
fn assemble(root: &Path) {
    let mut elves = vec![PathBuf::from(PYTHON), PathBuf::from(GIT)];
    elves.extend(GIT_CORE.iter().map(PathBuf::from));
    for f in &elves {
        copy(f, root);
    }
    link(root, "/usr/bin/python3", "python3.11");
    link(
        root,
        "/usr/lib/git-core/git-remote-https",
        "git-remote-http",
    );
    for (dir, skipped) in [
        (STDLIB, STDLIB_SKIPPED),
        (PIP, &[][..]),
        (GIT_TEMPLATES, &[]),
    ] {
        for f in tree(Path::new(dir), skipped) {
            if is_elf(&f) {
                elves.push(f.clone());
            }
            copy(&f, root);
        }
    }
    let mut libs: Vec<PathBuf> = elves.iter().flat_map(|f| shared_libraries(f)).collect();
    libs.sort();
    libs.dedup();
    for lib in &libs {
        copy(lib, root);
    }
    // The shell and the usual commands: the host's static busybox and its applets.
    copy(Path::new(BUSYBOX), root);
    link(root, "/bin/busybox", "/usr/bin/busybox");
    for applet in busybox_applets() {
        if !root.join("usr/bin").join(&applet).exists() {
            link(root, &format!("/bin/{applet}"), "/usr/bin/busybox");
        }
    }
    write(
        root,
        "etc/passwd",
        "root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    );
    write(root, "etc/group", "root:x:0:\nnogroup:x:65534:\n");
    for dir in ["tmp", "run/cordon"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::set_permissions(
        root.join("tmp"),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    same_times(root);
}

/// Gives every entry beneath `root` (links themselves, directories after their contents)
/// one fixed time: the context's archive, and so its hash, depends on the contents only,
/// and the next run finds the image current.
fn same_times(root: &Path) {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    let at = TimeSpec::new(1, 0);
    let mut dirs = vec![root.to_path_buf()];
    let mut i = 0;
    while let Some(d) = dirs.get(i).cloned() {
        i += 1;
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                let flag = UtimensatFlags::NoFollowSymlink;
                utimensat(nix::fcntl::AT_FDCWD, &e.path(), &at, &at, flag).unwrap();
            }
        }
    }
    // Deepest first: setting a directory's time does not change its parent's.
    for d in dirs.iter().rev() {
        let flag = UtimensatFlags::NoFollowSymlink;
        utimensat(nix::fcntl::AT_FDCWD, d, &at, &at, flag).unwrap();
    }
}

/// Every file beneath `dir` but the top-level entries in `skipped`; links to files are
/// taken as the files they name (dangling ones left out).
fn tree(dir: &Path, skipped: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let top = d == dir
                && p.file_name()
                    .is_some_and(|n| skipped.iter().any(|s| n == *s));
            if top {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else if std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
                out.push(p);
            }
        }
    }
    out
}

/// Copies the host's `file` (links followed) to the same path beneath `root`.
fn copy(file: &Path, root: &Path) {
    let dst = root.join(file.strip_prefix("/").unwrap());
    if dst.exists() {
        return;
    }
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::copy(file, &dst).unwrap_or_else(|e| panic!("copying {}: {e}", file.display()));
}

fn link(root: &Path, at: &str, target: &str) {
    let dst = root.join(at.trim_start_matches('/'));
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    if std::fs::symlink_metadata(&dst).is_err() {
        symlink(target, &dst).unwrap();
    }
}

fn write(root: &Path, at: &str, text: &str) {
    let dst = root.join(at);
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::write(dst, text).unwrap();
}

fn is_elf(f: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(f)
        .and_then(|mut h| h.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// The libraries the host's loader resolves for `elf` (an executable or a shared object)
/// and the loader itself; empty for a static executable.
fn shared_libraries(elf: &Path) -> Vec<PathBuf> {
    let bytes = std::fs::read(elf).unwrap();
    if let Some(files) = elf_deps::runtime_files(elf, &bytes)
        .ok()
        .filter(|f| !f.is_empty())
    {
        return files;
    }
    // A shared object has no interpreter of its own: ask python's (the host's loader).
    let python = std::fs::read(PYTHON).unwrap();
    let Some(loader) = elf_deps::interpreter(&python) else {
        return Vec::new();
    };
    let out = Command::new(&loader)
        .arg("--list")
        .arg(elf)
        .env_clear()
        .output()
        .unwrap();
    if !out.status.success() {
        return Vec::new();
    }
    let mut files = elf_deps::parse_list(&String::from_utf8_lossy(&out.stdout));
    files.retain(|f| f != elf);
    files.push(loader);
    files
}

fn busybox_applets() -> Vec<String> {
    let out = Command::new(BUSYBOX).arg("--list").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && !a.contains('/') && *a != "busybox")
        .map(String::from)
        .collect()
}
