//! The Docker backend against the real engine. Needs a reachable Docker daemon; builds the
//! static agent (images/build-agent.sh) and the `cordon-minimal` image when missing.
//! Skips loudly, passing, only when Docker itself is unreachable (and never under CI, unless
//! `.ci/run` could not start the engine).
// Test support: a failed setup step should panic with its message, which is the report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use cordon::sandbox::docker::{self, DockerBackend, DockerConfig, ImageSet, adopt, images};
use cordon::sandbox::{Backend, Sandbox, SandboxSpec};
use sandbox_agent::client::AgentClient;
use sandbox_agent::proto::ExecRequest;

/// Builds the agent and the minimal image once per test binary; `Err` = skip reason.
fn ready() -> Result<(), String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            std::thread::spawn(|| {
                let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
                rt.block_on(async {
                    let report = docker::probe().await;
                    if !report.reachable {
                        let why = format!("docker unreachable: {:?}", report.error);
                        // Under CI these tests may not skip (tests/src/lib.rs docker_ready
                        // holds the same rule for the end-to-end tests), unless .ci/run
                        // could not start the engine and said so.
                        assert!(
                            !in_ci() || std::env::var_os("CORDON_DOCKER_UNAVAILABLE").is_some(),
                            "{why}: Docker tests may not skip in CI (CI is set); start the engine"
                        );
                        return Err(why);
                    }
                    if images::agent_binary().is_err() {
                        let script =
                            Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/build-agent.sh");
                        let status = std::process::Command::new("bash")
                            .arg(script)
                            .status()
                            .map_err(|e| e.to_string())?;
                        assert!(status.success(), "images/build-agent.sh failed");
                    }
                    let built =
                        docker::build_images(ImageSet::Minimal, |line| eprintln!("{line}")).await;
                    built.unwrap_or_else(|e| panic!("building cordon-minimal: {e}"));
                    Ok(())
                })
            })
            .join()
            .unwrap_or_else(|_| Err("image build panicked".into()))
        })
        .clone()
}

/// Whether the tests run in CI: `CI` set to anything but empty, `0` or `false`.
fn in_ci() -> bool {
    std::env::var_os("CI")
        .is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// These tests share one engine, and every backend start reconciles across all of its
/// containers: run them one at a time so none sees another's session half made.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

macro_rules! require_docker {
    () => {
        let _serial = SERIAL.lock().await;
        if let Err(why) = ready() {
            eprintln!("\n!!!!! SKIPPING docker backend test: {why} !!!!!\n");
            return;
        }
    };
}

struct Fixture {
    backend: DockerBackend,
    run_root: tempfile::TempDir,
}

async fn fixture(pool_size: usize) -> Fixture {
    let run_root = tempfile::tempdir().unwrap();
    let config = DockerConfig {
        pool_size,
        run_root: run_root.path().to_path_buf(),
        ..DockerConfig::default()
    };
    let backend = DockerBackend::new(config).await.unwrap();
    Fixture { backend, run_root }
}

fn session_id(tag: &str) -> String {
    format!("t-{tag}-{}", uuid::Uuid::new_v4().simple())
}

async fn container_labels(
    f: &Fixture,
    session: &str,
) -> Option<std::collections::HashMap<String, String>> {
    let name = docker::container::container_name(session);
    let info = f
        .backend
        .docker()
        .inspect_container(&name, None)
        .await
        .ok()?;
    info.config.and_then(|c| c.labels)
}

/// Runs `cmd` through the agent; `None` while exec is not implemented yet.
async fn sh(client: &mut AgentClient, cmd: &str) -> Option<(String, i32)> {
    let req = ExecRequest {
        exec_id: uuid::Uuid::new_v4().to_string(),
        command: cmd.to_string(),
        timeout_ms: 30_000,
        ..ExecRequest::default()
    };
    match client.exec_collect(req).await {
        Ok((out, status)) => {
            let code = status.code.unwrap_or(-1000 - status.signal.unwrap_or(0));
            Some((String::from_utf8_lossy(&out).into_owned(), code))
        }
        Err(e) if e.to_string().contains("not implemented") => {
            eprintln!("exec not implemented yet in this agent: skipping exec checks");
            None
        }
        Err(e) => panic!("exec {cmd:?}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_starts_labelled_and_destroy_removes_everything() {
    require_docker!();
    let f = fixture(0).await;
    let ws = tempfile::tempdir().unwrap();
    let sid = session_id("start");
    let mut spec = SandboxSpec::new(&sid, ws.path());
    spec.tenant = Some("acme".into());
    let sandbox = f.backend.start(&spec).await.unwrap();
    assert!(!sandbox.client.info().agent_version.is_empty());
    assert!(sandbox.handle.is_alive());

    let labels = container_labels(&f, &sid).await.expect("container exists");
    assert_eq!(labels["cordon.session"], sid);
    assert_eq!(labels["cordon.tenant"], "acme");
    assert!(labels.contains_key("cordon.created-at"));
    assert_eq!(labels["cordon.agent-version"], sandbox_agent::AGENT_VERSION);
    let uid: u32 = labels["cordon.uid"].parse().unwrap();
    assert!(uid >= docker::access::UID_BASE);

    let name = docker::container::container_name(&sid);
    let info = f
        .backend
        .docker()
        .inspect_container(&name, None)
        .await
        .unwrap();
    let host = info.host_config.clone().unwrap();
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.readonly_rootfs, Some(true));
    assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
    // No userns remap: the container's uid is the host's (the ACL grant relies on it).
    assert!(host.userns_mode.as_deref().unwrap_or("").is_empty());
    assert_eq!(
        info.config.clone().unwrap().user,
        Some(format!("{uid}:{uid}"))
    );

    // Probe the container's init (docker-init) from the host: the engine applied the
    // generated seccomp profile, no-new-privileges, no capabilities, the session uid.
    let pid = info.state.and_then(|s| s.pid).unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
            .unwrap()
    };
    assert_eq!(field("Seccomp:"), ["2"], "seccomp filter mode");
    assert_eq!(field("NoNewPrivs:"), ["1"]);
    assert_eq!(field("CapEff:"), ["0000000000000000"]);
    assert_eq!(field("CapBnd:"), ["0000000000000000"]);
    assert_eq!(field("Uid:")[0], uid.to_string());

    let mut client = sandbox.client.clone();
    if let Some((out, code)) = sh(&mut client, "id -u").await {
        assert_eq!(code, 0);
        assert_eq!(out.trim(), uid.to_string(), "runs as the session uid");
    }

    let run_dir = f.run_root.path().join(&name);
    assert!(run_dir.join("sock/agent.sock").exists());
    sandbox.destroy().await.unwrap();
    assert!(
        container_labels(&f, &sid).await.is_none(),
        "container removed"
    );
    assert!(!run_dir.exists(), "socket dir removed");
}

/// The labelled containers whose run directory lies under `run_root`.
async fn containers_under(f: &Fixture, run_root: &Path) -> Vec<adopt::Orphan> {
    adopt::find(f.backend.docker())
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.run_dir.as_ref().is_some_and(|d| d.starts_with(run_root)))
        .collect()
}

/// A second, real `cordon` process with its own session container: `cordon sandbox
/// --backend docker -- sleep 60` on `home` as `$CORDON_HOME`. Returns the child once its
/// container exists.
// The child is handed to the caller, which kills and waits for it.
#[allow(clippy::zombie_processes)]
async fn second_process(f: &Fixture, home: &Path, ws: &Path) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_HOME", home)
        .args(["sandbox", "--backend", "docker", "--workspace"])
        .arg(ws)
        .args(["--", "sleep", "60"])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let run_root = home.join("docker/run");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(o) = containers_under(f, &run_root).await.into_iter().next() {
            return (child, o.container_id);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the second process never started its container");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_spares_a_live_process_and_removes_what_a_killed_one_left() {
    require_docker!();
    let f = fixture(0).await;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (mut child, id) = second_process(&f, home.path(), ws.path()).await;
    let run_root = home.path().join("docker/run");
    let labels = f
        .backend
        .docker()
        .inspect_container(&id, None)
        .await
        .unwrap()
        .config
        .and_then(|c| c.labels)
        .unwrap();
    assert_eq!(labels["cordon.owner-pid"], child.id().to_string());
    assert!(labels["cordon.owner-start"].parse::<u64>().is_ok());

    // A backend starting on the same home while the other process lives (a second
    // `cordon run`): its reconcile must leave the live container alone.
    let config = DockerConfig {
        pool_size: 0,
        run_root: run_root.clone(),
        ..DockerConfig::default()
    };
    let other = DockerBackend::new(config).await.unwrap();
    let (running, _, _) = docker::container::state(other.docker(), &id).await.unwrap();
    assert!(running, "a live process's container was removed");
    assert!(
        child.try_wait().unwrap().is_none(),
        "its command still runs"
    );

    // Now the owner dies without cleaning up (kill -9): the next reconcile removes what
    // it left, with its run directory.
    child.kill().unwrap();
    child.wait().unwrap();
    let removed = adopt::reconcile(f.backend.docker(), &run_root, &HashSet::new())
        .await
        .unwrap();
    assert!(removed.iter().any(|o| o.container_id == id), "{removed:?}");
    assert!(containers_under(&f, &run_root).await.is_empty());
    let dirs: Vec<_> = std::fs::read_dir(&run_root).unwrap().flatten().collect();
    assert!(dirs.is_empty(), "orphan's run dir removed: {dirs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_backends_on_one_home_keep_each_others_sessions_and_uids_apart() {
    require_docker!();
    let f = fixture(0).await;
    let wa = tempfile::tempdir().unwrap();
    let wb = tempfile::tempdir().unwrap();
    let a = f
        .backend
        .start(&SandboxSpec::new(session_id("owner-a"), wa.path()))
        .await
        .unwrap();
    // Another backend instance on the same run root stands for a second process (its
    // reconcile runs now, while a's session is live).
    let config = DockerConfig {
        pool_size: 0,
        run_root: f.run_root.path().to_path_buf(),
        ..DockerConfig::default()
    };
    let other = DockerBackend::new(config).await.unwrap();
    let b = other
        .start(&SandboxSpec::new(session_id("owner-b"), wb.path()))
        .await
        .unwrap();
    assert!(
        a.handle.is_alive(),
        "a survived the other backend's reconcile"
    );
    let mut client_a = a.client.clone();
    let mut client_b = b.client.clone();
    let (ua, code_a) = sh(&mut client_a, "id -u").await.unwrap();
    let (ub, code_b) = sh(&mut client_b, "id -u").await.unwrap();
    assert_eq!((code_a, code_b), (0, 0));
    assert_ne!(ua.trim(), ub.trim(), "two allocators handed out one uid");
    a.destroy().await.unwrap();
    b.destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_container_is_reported_and_a_restart_gets_the_same_workspace() {
    require_docker!();
    let f = fixture(0).await;
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("kept.txt"), "still here\n").unwrap();
    let sid = session_id("dies");
    let spec = SandboxSpec::new(&sid, ws.path());
    let mut sandbox = f.backend.start(&spec).await.unwrap();
    let name = docker::container::container_name(&sid);
    f.backend
        .docker()
        .kill_container(
            &name,
            None::<bollard::query_parameters::KillContainerOptions>,
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sandbox.handle.is_alive() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!sandbox.handle.is_alive(), "the handle notices the death");
    assert!(
        sandbox.client.read("/x", 0, 0).await.is_err(),
        "calls fail, not hang"
    );
    sandbox.destroy().await.unwrap();
    // The integrator's restart path: start again with the same spec.
    let again = f.backend.start(&spec).await.unwrap();
    let mut client = again.client.clone();
    let path = ws.path().canonicalize().unwrap().join("kept.txt");
    match client.read(path.to_str().unwrap(), 0, 0).await {
        Ok(r) => assert!(r.content.contains("still here")),
        Err(e) => assert!(e.to_string().contains("not implemented"), "{e}"),
    }
    again.destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_claim_returns_a_ready_agent_on_the_workspace_and_refills() {
    require_docker!();
    let f = fixture(1).await;
    let pool = f.backend.pool().unwrap();
    assert_eq!(pool.wait_ready(1, Duration::from_secs(30)).await, 1);
    // One workspace on the image's read-only root, one under the container's /tmp tmpfs.
    for parent in ["/var/tmp", "/tmp"] {
        let ws = tempfile::tempdir_in(parent).unwrap();
        std::fs::write(ws.path().join("hello.txt"), "from the host\n").unwrap();
        assert_eq!(pool.wait_ready(1, Duration::from_secs(30)).await, 1);
        let sid = session_id("pool");
        let sandbox = f
            .backend
            .start(&SandboxSpec::new(&sid, ws.path()))
            .await
            .unwrap();
        assert!(sandbox.handle.is_alive());
        let mut client = sandbox.client.clone();
        let path = ws.path().canonicalize().unwrap().join("hello.txt");
        assert!(
            seen_in_a_pool_container(&f, &path).await,
            "the workspace is mounted at its own path inside the claimed container"
        );
        match client.read(path.to_str().unwrap(), 0, 0).await {
            Ok(r) => assert!(r.content.contains("from the host"), "same absolute path"),
            Err(e) => assert!(e.to_string().contains("not implemented"), "{e}"),
        }
        if let Some((out, code)) = sh(&mut client, "cat hello.txt && echo w > made.txt").await {
            assert_eq!(code, 0, "{out}");
            assert!(ws.path().join("made.txt").exists(), "writes reach the host");
        }
        sandbox.destroy().await.unwrap();
    }
    assert_eq!(
        pool.wait_ready(1, Duration::from_secs(30)).await,
        1,
        "refilled"
    );
    pool.shutdown().await;
    let left = adopt::find(f.backend.docker()).await.unwrap();
    let ours: Vec<_> = left
        .iter()
        .filter(|o| {
            o.run_dir
                .as_ref()
                .is_some_and(|d| d.starts_with(f.run_root.path()))
        })
        .collect();
    assert!(
        ours.is_empty(),
        "pool shutdown leaves no container: {ours:?}"
    );
}

/// Probes from the host through /proc/<pid>/root, which resolves paths through the
/// container's own mounts: independent of what the agent implements.
async fn seen_in_a_pool_container(f: &Fixture, path: &Path) -> bool {
    let filters =
        std::collections::HashMap::from([("label".to_string(), vec!["cordon.pool".to_string()])]);
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .filters(&filters)
        .build();
    let list = f
        .backend
        .docker()
        .list_containers(Some(options))
        .await
        .unwrap();
    for c in list {
        let info = f
            .backend
            .docker()
            .inspect_container(c.id.as_deref().unwrap(), None)
            .await;
        let Some(pid) = info.ok().and_then(|i| i.state).and_then(|s| s.pid) else {
            continue;
        };
        let inside = format!("/proc/{pid}/root{}", path.display());
        if std::fs::read_to_string(inside).is_ok_and(|t| t.contains("from the host")) {
            return true;
        }
    }
    false
}

async fn two_sessions(f: &Fixture) -> (Sandbox, tempfile::TempDir, Sandbox, tempfile::TempDir) {
    let wa = tempfile::tempdir().unwrap();
    let wb = tempfile::tempdir().unwrap();
    std::fs::write(wa.path().join("secret-a"), "a only\n").unwrap();
    let a = f
        .backend
        .start(&SandboxSpec::new(session_id("a"), wa.path()))
        .await
        .unwrap();
    let b = f
        .backend
        .start(&SandboxSpec::new(session_id("b"), wb.path()))
        .await
        .unwrap();
    (a, wa, b, wb)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_cannot_see_each_others_workspace() {
    require_docker!();
    let f = fixture(0).await;
    let (a, wa, b, _wb) = two_sessions(&f).await;
    let secret = wa.path().canonicalize().unwrap().join("secret-a");
    let mut client_b = b.client.clone();
    if let Ok(r) = client_b.read(secret.to_str().unwrap(), 0, 0).await {
        panic!("session b read a's file: {}", r.content);
    }
    if let Some((out, _)) = sh(&mut client_b, &format!("cat {} 2>&1", secret.display())).await {
        assert!(!out.contains("a only"), "{out}");
    }
    a.destroy().await.unwrap();
    b.destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_limits_hold_inside_the_container() {
    require_docker!();
    let config_tmpfs = DockerConfig::default().tmpfs_bytes;
    let f = fixture(0).await;
    let ws = tempfile::tempdir().unwrap();
    let sandbox = f
        .backend
        .start(&SandboxSpec::new(session_id("limits"), ws.path()))
        .await
        .unwrap();
    let mut client = sandbox.client.clone();
    // Filling /tmp stops at the tmpfs cap.
    let Some((out, _)) = sh(
        &mut client,
        "dd if=/dev/zero of=/tmp/fill bs=1M count=1024 2>&1; du -k /tmp/fill | cut -f1",
    )
    .await
    else {
        sandbox.destroy().await.unwrap();
        return;
    };
    let kib: u64 = out
        .lines()
        .last()
        .unwrap_or("0")
        .trim()
        .parse()
        .unwrap_or(u64::MAX);
    assert!(kib * 1024 <= config_tmpfs, "tmpfs cap: {out}");
    // A memory bomb is OOM-killed inside the container; the agent keeps answering.
    let (_, code) = sh(&mut client, "head -c 2000m /dev/zero | tail > /dev/null")
        .await
        .unwrap();
    assert_ne!(code, 0, "the memory bomb must not succeed");
    // A fork bomb hits the pids limit; the agent still answers.
    let _ = sh(
        &mut client,
        "for i in $(seq 1 2000); do sleep 5 & done; wait",
    )
    .await;
    let (out, code) = sh(&mut client, "echo alive").await.unwrap();
    assert_eq!((out.trim(), code), ("alive", 0));
    sandbox.destroy().await.unwrap();
}

/// The dev image: debootstrap + import take minutes, so this runs by hand:
/// `cargo test -p orchestrator --test docker_backend dev_image -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: debootstraps a Debian root filesystem"]
async fn dev_image_builds_and_serves_a_session() {
    require_docker!();
    docker::build_images(ImageSet::Dev, |line| eprintln!("{line}"))
        .await
        .unwrap();
    let f = fixture(0).await;
    let ws = tempfile::tempdir().unwrap();
    let mut spec = SandboxSpec::new(session_id("dev"), ws.path());
    spec.image = Some(images::DEV.into());
    let sandbox = f.backend.start(&spec).await.unwrap();
    let mut client = sandbox.client.clone();
    if let Some((out, code)) = sh(
        &mut client,
        "git --version && python3 -c 'print(6*7)' && rg --version | head -1",
    )
    .await
    {
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("42"), "{out}");
    }
    sandbox.destroy().await.unwrap();
}

/// Protected paths, denied writes and denied reads hold in the kernel, for a cold start and
/// for a warm-pool claim (where the mounts are injected), and leave nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_and_denied_paths_hold_cold_and_from_the_pool() {
    require_docker!();
    let f = fixture(1).await;
    let pool = f.backend.pool().unwrap();
    for claimed in [true, false] {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(root.join(".env"), "KEY=secret\n").unwrap();
        std::fs::create_dir_all(root.join("private")).unwrap();
        std::fs::write(root.join("private/key"), "secret\n").unwrap();
        std::fs::create_dir_all(root.join("config")).unwrap();
        std::fs::write(root.join("config/app.toml"), "a = 1\n").unwrap();
        let mut spec = SandboxSpec::new(session_id("masks"), &root);
        spec.denied_read = vec![root.join(".env"), root.join("private")];
        spec.denied_write = vec![root.join("config")];
        if claimed {
            assert_eq!(pool.wait_ready(1, Duration::from_secs(30)).await, 1);
        }
        let sandbox = if claimed {
            f.backend.start(&spec).await.unwrap()
        } else {
            f.backend.start_cold(&spec).await.unwrap()
        };
        let labels = container_labels(&f, &spec.session_id).await;
        // A claimed pool container keeps its pool name; a cold one is named after the session.
        assert_eq!(labels.is_none(), claimed, "claimed={claimed}");
        let mut client = sandbox.client.clone();
        let script = "for p in .git/hooks/pre-commit .git/config .git/commondir \
                      .git/config.worktree .claude/settings.json .mcp.json \
                      .bashrc config/app.toml config/new; do \
                        (mkdir -p \"$(dirname $p)\"; echo pwned >> $p) 2>/dev/null && echo WROTE $p; \
                      done; \
                      (mv .git .git.old) 2>/dev/null && echo MOVED; \
                      cat .env 2>/dev/null && echo READ-ENV; \
                      cat private/key 2>/dev/null && echo READ-KEY; \
                      ls private 2>/dev/null && echo LISTED; \
                      cat config/app.toml; echo ok > ordinary; echo done";
        let (out, code) = sh(&mut client, script).await.unwrap();
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("a = 1"),
            "denied-write paths stay readable: {out}"
        );
        assert!(out.trim_end().ends_with("done"), "{out}");
        for bad in ["WROTE", "MOVED", "READ-ENV", "READ-KEY", "LISTED", "secret"] {
            assert!(!out.contains(bad), "claimed={claimed}: {bad}: {out}");
        }
        assert!(
            root.join("ordinary").exists(),
            "the workspace stays writable"
        );
        sandbox.destroy().await.unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        for left in [
            ".claude",
            ".mcp.json",
            ".bashrc",
            ".envrc",
            "config/new",
            ".git/commondir",
            ".git/config.worktree",
        ] {
            assert!(
                !root.join(left).exists(),
                "{left} left behind (claimed={claimed})"
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join(".env")).unwrap(),
            "KEY=secret\n"
        );
    }
    pool.shutdown().await;
}

/// Without a repository at start the container may make one (`git init` works); what it
/// planted there is vetted when the session is destroyed, before any host git sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_dir_made_in_the_container_is_vetted_at_destroy() {
    require_docker!();
    let f = fixture(0).await;
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    let spec = SandboxSpec::new(session_id("gitinit"), &root);
    let sandbox = f.backend.start_cold(&spec).await.unwrap();
    let mut client = sandbox.client.clone();
    let script = "mkdir -p .git/hooks .git/objects .git/refs && \
                  echo 'ref: refs/heads/main' > .git/HEAD && \
                  printf '[core]\\n\\tbare = false\\n\\tfsmonitor = touch /tmp/x\\n' > .git/config && \
                  printf '#!/bin/sh\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && \
                  echo MADE";
    let (out, code) = sh(&mut client, script).await.unwrap();
    assert_eq!((code, out.trim()), (0, "MADE"), "{out}");
    sandbox.destroy().await.unwrap();
    let config = std::fs::read_to_string(root.join(".git/config")).unwrap();
    assert!(
        !config.contains("fsmonitor") && config.contains("bare"),
        "{config}"
    );
    assert!(
        !root.join(".git/hooks/pre-commit").exists(),
        "hook left in place"
    );
}

/// Restarts the Docker daemon as an operator would: SIGTERM, wait for it to exit, start the
/// same binary with the same arguments and environment, wait until it answers.
fn restart_dockerd() {
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "dockerd")
        })
        .expect("no dockerd process to restart");
    let split = |bytes: Vec<u8>| -> Vec<String> {
        bytes
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    };
    let argv = split(std::fs::read(format!("/proc/{pid}/cmdline")).unwrap());
    let env: Vec<(String, String)> = split(std::fs::read(format!("/proc/{pid}/environ")).unwrap())
        .into_iter()
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.into(), v.into())))
        .collect();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(std::time::Instant::now() < deadline, "dockerd did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::File::create(std::env::temp_dir().join("cordon-test-dockerd.log")).unwrap();
    use std::os::unix::process::CommandExt;
    // Never waited for: the daemon runs on after this test binary (init reaps it then).
    #[allow(clippy::zombie_processes)]
    let _daemon = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        // Its own process group: it outlives this test binary, as the original did.
        .process_group(0)
        .spawn()
        .expect("start dockerd again");
    loop {
        let up = std::process::Command::new("docker")
            .args(["version", "--format", "{{.Server.Version}}"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if up {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "dockerd did not come back"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The daemon restarts under a live session and a filled warm pool. Docker stops every
/// container; the session's next call gets a fresh container on the same workspace, the
/// dead one is removed, and the pool refills and hands out only live containers. Restarts
/// the machine's Docker daemon, so it runs only when CORDON_TEST_DOCKERD_RESTART is set
/// (`.ci/run` sets it; on a workstation it would stop everyone's containers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_and_the_pool_recover_from_a_docker_daemon_restart() {
    require_docker!();
    if std::env::var_os("CORDON_TEST_DOCKERD_RESTART").is_none() {
        eprintln!(
            "\n!!!!! SKIPPING the Docker daemon restart test: set \
             CORDON_TEST_DOCKERD_RESTART=1 to let it restart the daemon !!!!!\n"
        );
        return;
    }
    let run_root = tempfile::tempdir().unwrap();
    let backend = std::sync::Arc::new(
        DockerBackend::new(DockerConfig {
            pool_size: 1,
            run_root: run_root.path().to_path_buf(),
            ..DockerConfig::default()
        })
        .await
        .unwrap(),
    );
    let pool = backend.pool().unwrap();
    assert_eq!(pool.wait_ready(1, Duration::from_secs(60)).await, 1);
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    let sid = session_id("dockerd");
    let sup = cordon::sandbox::Supervisor::start(backend.clone(), SandboxSpec::new(&sid, &root))
        .await
        .unwrap();
    let (out, code) = sh(&mut sup.client(), "echo before > kept.txt && echo ok")
        .await
        .unwrap();
    assert_eq!((out.trim(), code), ("ok", 0));
    assert_eq!(pool.wait_ready(1, Duration::from_secs(60)).await, 1);

    tokio::task::spawn_blocking(restart_dockerd).await.unwrap();

    // The session's next call: it fails (its container was stopped), the sandbox counts as
    // gone, and the one after runs in a fresh container on the same workspace.
    let kept = root.join("kept.txt").display().to_string();
    assert!(sup.client().read(&kept, 0, 0).await.is_err());
    assert!(
        sup.check_after_failure().await,
        "the dead sandbox is noticed"
    );
    let notice = sup.ensure_alive().await.unwrap();
    assert!(notice.is_some_and(|n| n.contains("fresh sandbox")));
    assert_eq!(sup.restarts(), 1);
    let read = sup.client().read(&kept, 0, 0).await.unwrap();
    assert!(read.content.contains("before"), "{read:?}");
    let (_, code) = sh(&mut sup.client(), "echo after >> kept.txt")
        .await
        .unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read_to_string(root.join("kept.txt")).unwrap(),
        "before\nafter\n"
    );
    let of_session = |sid: String| async move {
        let out = std::process::Command::new("docker")
            .args(["ps", "-aq", "--filter"])
            .arg(format!("label={}={sid}", docker::labels::SESSION))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    assert_eq!(
        of_session(sid.clone()).await,
        1,
        "only the fresh container is left"
    );

    // The pool: its idle container died with the daemon; it refills, and a claim hands out
    // a live container.
    assert_eq!(pool.wait_ready(1, Duration::from_secs(60)).await, 1);
    let other = session_id("after-restart");
    let sandbox = backend
        .start(&SandboxSpec::new(&other, &root))
        .await
        .unwrap();
    let (out, code) = sh(&mut sandbox.client.clone(), "cat kept.txt")
        .await
        .unwrap();
    assert_eq!((out.as_str(), code), ("before\nafter\n", 0));
    sandbox.destroy().await.unwrap();
    sup.destroy().await.unwrap();
    assert_eq!(of_session(sid).await, 0);
    assert_eq!(of_session(other).await, 0);
    pool.shutdown().await;
    let left: Vec<_> = adopt::find(backend.docker())
        .await
        .unwrap()
        .into_iter()
        .filter(|o| {
            o.run_dir
                .as_ref()
                .is_some_and(|d| d.starts_with(run_root.path()))
        })
        .collect();
    assert!(left.is_empty(), "containers left behind: {left:?}");
}

/// A uid no host user has: the workspace owner in the access tests.
const OWNER: u32 = 4242;

fn chown_tree(ws: &Path, uid: u32) {
    let ok = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(ws)
        .status()
        .unwrap();
    assert!(ok.success());
}

/// The whole tree's ACLs and modes as getfacl prints them (numeric, no symlinks followed).
fn getfacl(ws: &Path) -> String {
    let out = std::process::Command::new("getfacl")
        .args(["-R", "-P", "-p", "-n"])
        .arg(ws)
        .output()
        .expect("getfacl (Debian package acl)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An image the engine has whose containers cannot start (no agent, no init target).
async fn broken_image(f: &Fixture) -> &'static str {
    let name = "cordon-test-broken";
    if f.backend.docker().inspect_image(name).await.is_err() {
        let ok = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("tar -c -T /dev/null | docker import - {name} >/dev/null"),
            ])
            .status()
            .unwrap();
        assert!(ok.success(), "docker import of an empty image");
    }
    name
}

/// A backend that takes the ACL fallback (idmapping off), without a pool.
async fn acl_fixture() -> Fixture {
    let run_root = tempfile::tempdir().unwrap();
    let config = DockerConfig {
        pool_size: 0,
        run_root: run_root.path().to_path_buf(),
        idmap: false,
        ..DockerConfig::default()
    };
    Fixture {
        backend: DockerBackend::new(config).await.unwrap(),
        run_root,
    }
}

/// A workspace with the user's own ACLs, a default one included, owned by [`OWNER`].
fn workspace_with_own_acls() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("shared/sub")).unwrap();
    std::fs::write(ws.path().join("shared/sub/f"), "x\n").unwrap();
    std::fs::write(ws.path().join("plain.txt"), "y\n").unwrap();
    chown_tree(ws.path(), OWNER);
    for (spec, rel) in [
        ("d:u:1234:rx,u:1234:rx", "shared"),
        ("u:4321:r", "plain.txt"),
    ] {
        let ok = std::process::Command::new("setfacl")
            .args(["-m", spec])
            .arg(ws.path().join(rel))
            .status()
            .unwrap();
        assert!(ok.success());
    }
    ws
}

/// The injected workspace (cold start as root): idmapped so the sandbox's files land as
/// the workspace owner's, mounted nosuid and nodev, and nothing (no ACL) left on the tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_workspace_is_injected_idmapped_nosuid_and_leaves_no_acl() {
    require_docker!();
    let f = fixture(0).await;
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("existing.txt"), "old\n").unwrap();
    chown_tree(ws.path(), OWNER);
    let before = getfacl(ws.path());
    let spec = SandboxSpec::new(session_id("idmap"), ws.path());
    let sandbox = f.backend.start(&spec).await.unwrap();
    let mut client = sandbox.client.clone();
    let wsp = ws.path().canonicalize().unwrap();
    let (out, code) = sh(
        &mut client,
        &format!(
            "cd {} && stat -c %u existing.txt && echo new >> existing.txt && mkdir -p d && \
             echo made > d/made.txt && grep ' {} ' /proc/self/mountinfo",
            wsp.display(),
            wsp.display()
        ),
    )
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}");
    let uid = container_labels(&f, &spec.session_id).await.unwrap()["cordon.uid"].clone();
    assert_eq!(
        out.lines().next(),
        Some(uid.as_str()),
        "the owner's files are the sandbox uid's inside: {out}"
    );
    let mount = out.lines().find(|l| l.contains(" - ")).unwrap_or_default();
    let opts = mount.split_whitespace().nth(5).unwrap_or_default();
    assert!(opts.contains("nosuid") && opts.contains("nodev"), "{mount}");
    assert!(opts.contains("idmapped"), "{mount}");
    sandbox.destroy().await.unwrap();
    for rel in ["existing.txt", "d", "d/made.txt"] {
        let meta = std::fs::symlink_metadata(ws.path().join(rel)).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!((meta.uid(), meta.gid()), (OWNER, OWNER), "{rel}");
    }
    let after = getfacl(ws.path());
    assert!(!after.contains("user:3"), "no sandbox ACL entry: {after}");
    assert!(
        before.lines().all(|l| after.contains(l)),
        "{before}\n---\n{after}"
    );
}

/// The ACL fallback (idmapping off): a creation that fails after the grant puts back
/// exactly the ACLs the tree had, a default ACL of the user's own included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acl_fallback_restores_the_exact_acls_when_creation_fails() {
    require_docker!();
    let f = acl_fixture().await;
    let image = broken_image(&f).await;
    let ws = workspace_with_own_acls();
    let before = getfacl(ws.path());
    let mut spec = SandboxSpec::new(session_id("aclfail"), ws.path());
    spec.image = Some(image.into());
    let err = f
        .backend
        .start(&spec)
        .await
        .err()
        .expect("the broken image fails");
    assert!(err.to_string().contains("container"), "{err}");
    assert_eq!(
        getfacl(ws.path()),
        before,
        "ACLs changed by a failed creation"
    );
    assert!(
        std::fs::read_dir(f.run_root.path())
            .unwrap()
            .next()
            .is_none()
    );
}

/// The ACL fallback over a whole session: the sandbox reaches the tree by ACL while it
/// runs; afterwards the tree has exactly its prior ACLs and what the sandbox made is the
/// owner's, without ACLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acl_fallback_leaves_the_prior_acls_and_gives_made_files_to_the_owner() {
    require_docker!();
    let f = acl_fixture().await;
    let ws = workspace_with_own_acls();
    let before = getfacl(ws.path());
    let spec = SandboxSpec::new(session_id("aclrun"), ws.path());
    let sandbox = f.backend.start(&spec).await.unwrap();
    let mut client = sandbox.client.clone();
    let wsp = ws.path().canonicalize().unwrap();
    let (out, code) = sh(
        &mut client,
        &format!(
            "cd {} && echo more >> plain.txt && echo new > shared/new.txt && mkdir made",
            wsp.display()
        ),
    )
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}");
    assert_ne!(getfacl(ws.path()), before, "the grant is in effect");
    sandbox.destroy().await.unwrap();
    use std::os::unix::fs::MetadataExt;
    for rel in ["shared/new.txt", "made"] {
        let meta = std::fs::symlink_metadata(ws.path().join(rel)).unwrap();
        assert_eq!(meta.uid(), OWNER, "{rel}");
        std::fs::remove_dir_all(ws.path().join(rel))
            .or_else(|_| std::fs::remove_file(ws.path().join(rel)))
            .unwrap();
    }
    assert_eq!(getfacl(ws.path()), before);
}

/// `Supervisor::frozen` on Docker: the container is paused for host-side work, so a
/// command writing in a loop writes nothing meanwhile, and carries on afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_in_the_container_runs_while_it_is_frozen() {
    require_docker!();
    let f = fixture(0).await;
    let ws = tempfile::tempdir().unwrap();
    let tick = ws.path().canonicalize().unwrap().join("tick");
    let backend: std::sync::Arc<dyn Backend> = std::sync::Arc::new(f.backend);
    let spec = SandboxSpec::new(session_id("freeze"), ws.path());
    let sup = cordon::sandbox::Supervisor::start(backend, spec)
        .await
        .unwrap();
    let req = ExecRequest {
        exec_id: "hopper".into(),
        command: format!("while :; do (echo x >> {}); done", tick.display()),
        timeout_ms: 60_000,
        ..ExecRequest::default()
    };
    let mut client = sup.client();
    let writer = tokio::spawn(async move { client.exec_collect(req).await });
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let grows = |than: u64| {
        let tick = tick.clone();
        async move {
            for _ in 0..1500 {
                if size(&tick) > than {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            false
        }
    };
    assert!(grows(0).await, "the writer runs");
    let watched = tick.clone();
    let (before, after) = sup
        .frozen(move || {
            let before = size(&watched);
            std::thread::sleep(Duration::from_millis(300));
            (before, size(&watched))
        })
        .await
        .unwrap();
    assert_eq!(before, after, "a container process wrote while frozen");
    assert!(grows(after).await, "thawed, the writer carries on");
    let _ = sup.client().cancel("hopper").await;
    let _ = writer.await;
    sup.destroy().await.unwrap();
}

// On `cordon run`'s runtime (its one thread pinned) the container's agent serves on the
// session's CPU, and a command in the container keeps every CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_session_pins_the_containers_serving_thread_only() {
    require_docker!();
    let every = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Cpus_allowed_list:")
                .map(|v| v.trim().to_string())
        })
        .unwrap();
    let seen = tokio::task::spawn_blocking(|| {
        let runtime = cordon::runtime::for_one_session().unwrap();
        let cpu = sandbox_agent::affinity::pinned_cpu()?;
        Some(runtime.block_on(async move {
            let f = fixture(0).await;
            let ws = tempfile::tempdir().unwrap();
            let Sandbox {
                mut client, handle, ..
            } = f
                .backend
                .start(&SandboxSpec::new(session_id("pin"), ws.path()))
                .await
                .unwrap();
            let (out, code) = sh(
                &mut client,
                "for p in /proc/[0-9]*; do \
                 echo \"$(cat $p/comm 2>/dev/null):$(grep Cpus_allowed_list $p/status 2>/dev/null | cut -f2)\"; \
                 done",
            )
            .await
            .unwrap();
            let _ = client.shutdown().await;
            handle.destroy().await.unwrap();
            (cpu, out, code)
        }))
    })
    .await
    .unwrap();
    let Some((cpu, out, code)) = seen else {
        eprintln!("one CPU only ({every}): nothing is pinned");
        return;
    };
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines().any(|l| l == format!("sandbox-agent:{cpu}")),
        "the agent serves on CPU {cpu}: {out}"
    );
    // The shell, its loop's children, anything else in the container: every CPU.
    for line in out.lines().filter(|l| !l.starts_with("sandbox-agent:")) {
        let (_, list) = line.split_once(':').unwrap();
        assert!(list.is_empty() || list == every, "{line} in {out}");
    }
}
