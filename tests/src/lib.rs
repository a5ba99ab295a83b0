//! Shared fixtures for the end-to-end tests: where the built binaries are, throwaway
//! workspaces, and running a command through `cordon sandbox`.
// Test support: a failed setup step should panic with its message, which is the report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The scripted Messages API server lives in the orchestrator (the offline demo uses it);
/// tests reach it under its old name.
pub use cordon::scripted as scripted_model;

pub mod agent;
pub mod differential;
pub mod host_tools_image;
pub mod limits;
pub mod net;
pub mod pty;
pub mod sdk;
pub mod tls;
pub mod tool_servers;
pub mod webdriver;
pub mod wheel;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The directory holding the workspace's built binaries (`target/debug`), found from the
/// running test executable (`target/debug/deps/NAME-HASH`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir");
    let dir = if deps.ends_with("deps") {
        deps.parent().expect("target dir")
    } else {
        deps
    };
    dir.to_path_buf()
}

/// A built binary of this workspace; panics with the command to run when it is missing.
pub fn built_binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (scripts/test does)",
        path.display()
    );
    path
}

pub fn cordon_bin() -> PathBuf {
    built_binary("cordon")
}

/// `cordon ARGS...` with all its state in `home`: `CORDON_HOME`, and the user's and the
/// managed settings as `home/user.json` and `home/managed.json` (absent until a test
/// writes them); stdin closed.
pub fn cordon_at_home(home: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(cordon_bin());
    cmd.args(args)
        .env("CORDON_HOME", home)
        .env("CORDON_USER_SETTINGS", home.join("user.json"))
        .env("CORDON_MANAGED_SETTINGS", home.join("managed.json"))
        .stdin(std::process::Stdio::null());
    cmd
}

pub fn probe_bin() -> PathBuf {
    built_binary("escape-probe")
}

/// The target directory (`target/`), above `bin_dir()`.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| bin_dir().parent().expect("target dir").to_path_buf())
}

/// Where `images/build-agent.sh` puts the static builds (agent and escape probe).
pub(crate) fn static_dir() -> PathBuf {
    target_dir().join("x86_64-unknown-linux-gnu/release")
}

/// The statically linked escape probe, if `images/build-agent.sh` built it: it runs in any
/// image (the busybox-only `cordon-minimal` has no dynamic loader) and on the host alike.
pub fn static_probe_bin() -> Option<PathBuf> {
    Some(static_dir().join("escape-probe")).filter(|p| p.is_file())
}

/// The python of tests/mcp/setup.sh's environment (the pinned mcp-server-time from
/// PyPI and the `mcp` SDK), set up once per test binary.
pub fn mcp_python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let script = repo_root().join("tests/mcp/setup.sh");
            let out = Command::new(&script).output().unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        })
        .clone()
}

/// The repository root (the workspace's `Cargo.toml` is there).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// Makes the Docker backend usable for tests, once per test binary and one test binary at
/// a time (a file lock: several test binaries may start together): the static agent and
/// probe (`images/build-agent.sh`) when missing, then `cordon images build minimal` (a
/// no-op when the image is current). `Err` only when the Docker engine is unreachable, the
/// one reason a Docker test may skip; any other failure panics. In CI (the environment
/// variable `CI` set, as CI services set it) an unreachable engine panics too, so CI
/// cannot pass without running the Docker tests, unless `.ci/run` tried to start the engine
/// and could not (it then sets `CORDON_DOCKER_UNAVAILABLE` to why, and prints the daemon's
/// log). Every Docker test asks here, directly or through [`backend_ready`].
pub fn docker_ready() -> Result<(), String> {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let ready = READY.get_or_init(prepare_docker).clone();
    if let Err(why) = &ready {
        assert!(
            !in_ci() || docker_known_unavailable(),
            "{why}: Docker tests may not skip in CI (CI is set); start the Docker engine"
        );
    }
    ready
}

/// Whether `.ci/run` tried to start the Docker engine and could not
/// (`CORDON_DOCKER_UNAVAILABLE` set): the one case where Docker tests skip under CI.
pub fn docker_known_unavailable() -> bool {
    std::env::var_os("CORDON_DOCKER_UNAVAILABLE").is_some_and(|v| !v.is_empty())
}

/// Whether the tests run in CI: `CI` is set to anything but empty, `0` or `false`.
pub fn in_ci() -> bool {
    std::env::var_os("CI")
        .is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

fn prepare_docker() -> Result<(), String> {
    let reachable = std::thread::spawn(|| {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(cordon::sandbox::docker::probe())
    })
    .join()
    .expect("docker probe");
    if !reachable.reachable {
        return Err(format!("docker engine unreachable: {:?}", reachable.error));
    }
    let lock_path = target_dir().join("docker-images.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .expect("open docker-images.lock");
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("lock docker-images.lock");
    let have_static = static_dir().join("sandbox-agent").is_file() && static_probe_bin().is_some();
    if !have_static {
        eprintln!("building the static agent and probe (images/build-agent.sh)");
        let status = Command::new("bash")
            .arg(repo_root().join("images/build-agent.sh"))
            .status()
            .expect("run images/build-agent.sh");
        assert!(status.success(), "images/build-agent.sh failed: {status}");
    }
    let out = Command::new(cordon_bin())
        .args(["images", "build", "minimal"])
        .output()
        .expect("run cordon images build");
    assert!(
        out.status.success(),
        "cordon images build minimal failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Whether tests of `backend` can run here; for Docker, says LOUDLY why not when the
/// engine is unreachable (the test then returns, passing; in CI it fails instead, see
/// [`docker_ready`]).
pub fn backend_ready(backend: Backend) -> bool {
    match backend {
        Backend::Local => true,
        Backend::Docker => match docker_ready() {
            Ok(()) => true,
            Err(why) => {
                eprintln!("\n!!!!! SKIPPING docker test: {why} !!!!!\n");
                false
            }
        },
    }
}

/// A throwaway workspace under the target directory (not /tmp: the sandbox has its own
/// private /tmp, and the workspace must be visible at the same absolute path). Removed on
/// drop.
pub struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Workspace {
        let root = bin_dir().join("test-workspaces");
        std::fs::create_dir_all(&root).expect("create test-workspaces");
        let dir = tempfile::Builder::new()
            .prefix("ws-")
            .tempdir_in(root)
            .expect("tempdir");
        Workspace { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Copies the escape probe into the workspace so it can run inside any image: the
    /// static build when there is one (needed in `cordon-minimal`), else the dynamic one.
    pub fn with_probe(&self) -> PathBuf {
        let dst = self.join("escape-probe");
        let src = static_probe_bin().unwrap_or_else(probe_bin);
        std::fs::copy(src, &dst).expect("copy probe");
        dst
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// Which backend a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Local,
    Docker,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Docker => "docker",
        }
    }
}

/// What a command run through `cordon sandbox` did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The probe's verdict for `case`: Some(errno) when denied, None when allowed.
    pub fn probe_result(&self, case: &str) -> Result<Option<i32>, String> {
        let prefix = format!("RESULT {case} ");
        let line = self
            .stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .ok_or_else(|| format!("no result for {case}: {self:?}"))?;
        let rest = &line[prefix.len()..];
        if rest == "allowed" {
            return Ok(None);
        }
        let errno = rest
            .trim_start_matches("denied ")
            .parse()
            .map_err(|e| format!("{e}: {line}"))?;
        Ok(Some(errno))
    }
}

/// Runs `argv` through `cordon sandbox` on `ws` with `backend`.
pub fn sandbox(backend: Backend, ws: &Path, argv: &[&str]) -> Run {
    sandbox_with(backend, ws, &[], argv)
}

/// Runs the shell script `script` (`sh -c`) through `cordon sandbox` on `ws`.
pub fn sandbox_sh(backend: Backend, ws: &Path, script: &str) -> Run {
    sandbox(backend, ws, &["sh", "-c", script])
}

/// Like [`sandbox`], with extra `cordon sandbox` flags.
pub fn sandbox_with(backend: Backend, ws: &Path, flags: &[&str], argv: &[&str]) -> Run {
    let out = Command::new(cordon_bin())
        .arg("sandbox")
        .arg("--backend")
        .arg(backend.name())
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .output()
        .expect("run cordon sandbox");
    Run::from(out)
}

/// Processes on the host whose command line contains `marker`, but for the launcher's
/// own child that drops a finished sandbox's mount namespace: it shares the launcher's
/// memory, so its command line reads as the launcher's (`cordon sandbox ... marker`) for
/// as long as that unmount takes, after the launcher has ended; it holds no process of
/// the sandbox (there are none left by then) and names itself so. The name alone is not
/// trusted (a sandboxed process may take it): its executable must be one of the built
/// launchers too, as seen from the host.
pub fn host_processes_matching(marker: &str) -> Vec<(u32, String)> {
    let release = sandbox_agent::launch::RELEASE_NAME.to_bytes();
    let launchers = [cordon_bin(), built_binary("sandbox-agent")];
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let comm = std::fs::read(entry.path().join("comm")).unwrap_or_default();
        let is_release = comm.trim_ascii_end() == release
            && std::fs::read_link(entry.path().join("exe"))
                .is_ok_and(|exe| launchers.contains(&exe));
        if cmdline.contains(marker) && !is_release {
            found.push((pid, cmdline));
        }
    }
    found
}
