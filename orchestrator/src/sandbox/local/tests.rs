//! Tests of the local backend against the real agent binary.
//!
//! They need the `sandbox-agent` binary built first (`cargo build -p sandbox-agent`): it is
//! found next to the test executable's parent dir (target/debug/), or through
//! `CORDON_AGENT_BIN`. They need user namespaces (and, as root, idmapped mounts on /tmp).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sandbox_agent::proto::ExecRequest;

use super::*;

fn agent_bin() -> PathBuf {
    paths::find_agent_binary().expect("build the agent first: cargo build -p sandbox-agent")
}

struct Fixture {
    home: tempfile::TempDir,
    workspace: tempfile::TempDir,
    backend: LocalBackend,
}

fn fixture() -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("hello.txt"), "hi\n").unwrap();
    let backend = LocalBackend::new(home.path().to_path_buf(), agent_bin()).unwrap();
    Fixture {
        home,
        workspace,
        backend,
    }
}

fn spec(f: &Fixture) -> SandboxSpec {
    SandboxSpec::new(
        uuid::Uuid::new_v4().simple().to_string(),
        f.workspace.path(),
    )
}

fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Every descendant of `pid`, with its start time (to survive pid reuse).
fn descendants(pid: u32) -> Vec<(i32, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![pid.to_string()];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace() {
                let n: i32 = c.parse().unwrap();
                if let Some(start) = state::start_time(n) {
                    out.push((n, start));
                }
                todo.push(c.to_string());
            }
        }
    }
    out
}

fn gone(procs: &[(i32, u64)]) -> bool {
    procs
        .iter()
        .all(|(pid, start)| state::start_time(*pid) != Some(*start))
}

#[test]
fn the_policy_parses_and_guards_hooks() {
    let list = protected_paths().unwrap();
    let has = |p: &str| list.iter().any(|e| e.path == Path::new(p));
    for p in [
        ".claude",
        ".cordon",
        ".mcp.json",
        ".envrc",
        ".bashrc",
        ".zshenv",
        ".vscode",
        ".idea",
        ".direnv",
    ] {
        assert!(has(p), "{p} missing from policies/protected-paths.json");
    }
    // Git control files are the git policy's, in every git dir; never a `.git` placeholder
    // (a sandboxed `git init` must work).
    assert!(!list.iter().any(|e| e.path.starts_with(".git")));
    assert!(sandbox_agent::launch::gitguard::policy().is_ok());
    assert!(
        parse_protected(
            r#"{"version":1,"why":"x","paths":[{"path":"../x","kind":"file","why":"y"}]}"#
        )
        .is_err()
    );
    assert!(
        parse_protected(r#"{"version":1,"why":"x","paths":[{"path":"a","kind":"file","why":""}]}"#)
            .is_err()
    );
}

#[tokio::test]
async fn a_sandbox_handshakes_runs_confined_and_leaves_nothing_behind() {
    let f = fixture();
    let before = listing(f.workspace.path());
    let spec = spec(&f);
    let sandbox = f.backend.start(&spec).await.unwrap();
    let Sandbox {
        mut client, handle, ..
    } = sandbox;
    assert!(handle.is_alive());
    let state_dir = f.home.path().join("run").join(&spec.session_id);
    assert!(state_dir.join("sock").join(SOCKET_NAME).exists());
    // Placeholders stand in for missing protected paths while the session runs.
    assert!(f.workspace.path().join(".claude").is_dir());
    assert!(f.workspace.path().join(".bashrc").is_file());
    // No `.git` placeholder: a sandboxed `git init` must work (vetted at teardown).
    assert!(!f.workspace.path().join(".git").exists());

    let (out, status) = client
        .exec_collect(ExecRequest {
            exec_id: "t1".into(),
            argv: vec![
                "sh".into(),
                "-c".into(),
                "id -u; hostname; echo $$; cat hello.txt; echo new > made.txt; \
                 (echo x > .bashrc) 2>/dev/null || echo rc-ro; \
                 (mkdir .claude/hooks) 2>/dev/null || echo claude-ro; \
                 ls /root /home 2>/dev/null || echo no-home"
                    .into(),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&out);
    assert_eq!(status.code, Some(0), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "1000", "{out}");
    assert_eq!(lines[1], "cordon", "{out}");
    let pid_inside: u32 = lines[2].parse().unwrap();
    assert!(pid_inside < 100, "own pid namespace: {out}");
    assert_eq!(lines[3], "hi");
    for want in ["rc-ro", "claude-ro", "no-home"] {
        assert!(lines.contains(&want), "{want}: {out}");
    }
    // Written through the workspace mount, owned on disk by the workspace's owner.
    let made = std::fs::metadata(f.workspace.path().join("made.txt")).unwrap();
    let owner = std::fs::metadata(f.workspace.path()).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&made),
        std::os::unix::fs::MetadataExt::uid(&owner)
    );

    let launcher = f.backend_pid_of(&*handle);
    let procs = descendants(launcher);
    assert!(procs.len() >= 2, "init and agent run: {procs:?}");
    let _ = client.shutdown().await;
    handle.destroy().await.unwrap();
    assert!(
        state::start_time(launcher as i32).is_none(),
        "launcher reaped"
    );
    assert!(gone(&procs), "sandbox processes remain");
    assert!(!state_dir.exists(), "state dir (socket) removed");
    let mut after = listing(f.workspace.path());
    assert!(after.remove("made.txt"));
    assert_eq!(after, before, "placeholders removed");
}

#[tokio::test]
async fn dropping_the_handle_kills_everything() {
    let f = fixture();
    let before = listing(f.workspace.path());
    let spec = spec(&f);
    let Sandbox { client, handle, .. } = f.backend.start(&spec).await.unwrap();
    let launcher = f.backend_pid_of(&*handle);
    let procs = descendants(launcher);
    drop(handle);
    assert!(gone(&procs), "sandbox processes remain after drop");
    assert!(!f.home.path().join("run").join(&spec.session_id).exists());
    assert_eq!(listing(f.workspace.path()), before);
    drop(client);
}

#[tokio::test]
async fn a_second_peer_cannot_take_the_socket() {
    let f = fixture();
    let spec = spec(&f);
    let sandbox = f.backend.start(&spec).await.unwrap();
    let socket = f
        .home
        .path()
        .join("run")
        .join(&spec.session_id)
        .join("sock")
        .join(SOCKET_NAME);
    let second = AgentClient::connect_unix(&socket).await;
    assert!(second.is_err(), "a second controller was admitted");
    sandbox.destroy().await.unwrap();
}

#[tokio::test]
async fn stale_sessions_are_swept_at_the_next_start() {
    let f = fixture();
    let stale = f.home.path().join("run").join("deadbeef");
    std::fs::create_dir_all(stale.join("sock")).unwrap();
    std::fs::write(stale.join("launcher.pid"), "1 1\n").unwrap();
    // The sweep acts only beneath the workspace the dead session's launch config records.
    let ws = f.workspace.path().canonicalize().unwrap();
    let config = f.backend.launch_config(&spec(&f), &ws, &[], &stale);
    std::fs::write(
        stale.join(state::LAUNCH_CONFIG),
        serde_json::to_vec(&config).unwrap(),
    )
    .unwrap();
    let placeholder = ws.join(".envrc");
    std::fs::write(&placeholder, "").unwrap();
    std::fs::write(
        stale.join("placeholders.json"),
        serde_json::to_vec(&vec![launch::protected::PlaceholderRecord {
            path: placeholder.clone(),
            kind: launch::EntryKind::File,
            id: None,
            content: None,
        }])
        .unwrap(),
    )
    .unwrap();
    let sandbox = f.backend.start(&spec(&f)).await.unwrap();
    assert!(!stale.exists());
    sandbox.destroy().await.unwrap();
    assert!(!placeholder.exists());
}

impl Fixture {
    fn backend_pid_of(&self, handle: &dyn SandboxHandle) -> u32 {
        // The only LocalHandle in a test: find it by its state dir's pid file.
        let _ = handle;
        let run = self.home.path().join("run");
        let dir = std::fs::read_dir(run)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let text = std::fs::read_to_string(dir.join("launcher.pid")).unwrap();
        text.split_whitespace().next().unwrap().parse().unwrap()
    }
}

/// The supervisor on the local backend: a killed agent is noticed after the failed call,
/// replaced before the next one on the same workspace, and after `destroy` nothing starts
/// a sandbox again (a late hook or call gets an error, not a fresh sandbox to leak).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_supervisor_replaces_a_killed_agent_and_stays_down_after_destroy() {
    let f = fixture();
    let backend = std::sync::Arc::new(f.backend.clone());
    let sup = crate::sandbox::Supervisor::start(backend, spec(&f))
        .await
        .unwrap();
    assert_eq!(
        sup.ensure_alive().await.unwrap(),
        None,
        "a live sandbox is kept"
    );
    let hello = f.workspace.path().canonicalize().unwrap().join("hello.txt");
    let hello = hello.display().to_string();
    let req = ExecRequest {
        exec_id: "kill-agent".into(),
        command: "kill -9 $PPID; sleep 30".into(),
        timeout_ms: 30_000,
        ..Default::default()
    };
    assert!(sup.client().exec_collect(req).await.is_err());
    assert!(sup.check_after_failure().await, "the dead agent is noticed");
    let notice = sup.ensure_alive().await.unwrap();
    assert!(notice.is_some_and(|n| n.contains("fresh sandbox")));
    assert_eq!(sup.restarts(), 1);
    let read = sup.client().read(&hello, 0, 0).await.unwrap();
    assert!(read.content.contains("hi"));
    assert!(
        !sup.check_after_failure().await,
        "a live agent answers the probe"
    );
    sup.destroy().await.unwrap();
    assert!(matches!(
        sup.ensure_alive().await,
        Err(SandboxError::Closed)
    ));
    assert_eq!(sup.restarts(), 1);
}

/// Size of `path`, 0 when missing.
fn size_of(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Waits (up to 30 s) until `path` grows past `than`.
async fn grows(path: &Path, than: u64) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if size_of(path) > than {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// While the supervisor runs host-side work "frozen", no sandbox process runs: a command
/// that forks a fresh writer process per iteration (a pid hopper) writes nothing during
/// it, and carries on afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_in_the_sandbox_runs_while_it_is_frozen() {
    let f = fixture();
    let backend = std::sync::Arc::new(f.backend.clone());
    let sup = crate::sandbox::Supervisor::start(backend, spec(&f))
        .await
        .unwrap();
    let ws = f.workspace.path().canonicalize().unwrap();
    let tick = ws.join("tick");
    let req = ExecRequest {
        exec_id: "hopper".into(),
        command: "while :; do (echo x >> tick); done".into(),
        timeout_ms: 60_000,
        ..Default::default()
    };
    let mut client = sup.client();
    let writer = tokio::spawn(async move { client.exec_collect(req).await });
    assert!(grows(&tick, 0).await, "the writer runs");
    let watched = tick.clone();
    let (before, after) = sup
        .frozen(move || {
            let before = size_of(&watched);
            std::thread::sleep(Duration::from_millis(300));
            (before, size_of(&watched))
        })
        .await
        .unwrap();
    assert_eq!(before, after, "a sandbox process wrote while frozen");
    assert!(grows(&tick, after).await, "thawed, the writer carries on");
    assert!(sup.client().cancel("hopper").await.unwrap());
    let _ = writer.await;
    sup.destroy().await.unwrap();
}

/// The session's cgroup dirs on this host (found by the session id).
fn session_cgroups(id: &str) -> Vec<PathBuf> {
    let layout = sandbox_agent::cgroup::Layout::detect().unwrap();
    match sandbox_agent::cgroup::session::Plan::new(&layout, sandbox_agent::cgroup::PARENT_NAME, id)
    {
        Ok(plan) => plan.dirs().into_iter().filter(|d| d.exists()).collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test]
async fn the_session_cgroup_holds_the_sandbox_and_goes_with_it() {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let f = fixture();
    let spec = spec(&f);
    let sandbox = f.backend.start(&spec).await.unwrap();
    let dirs = session_cgroups(&spec.session_id);
    assert!(!dirs.is_empty(), "no session cgroup");
    let mut client = sandbox.client.clone();
    let (out, _) = client
        .exec_collect(ExecRequest {
            exec_id: "cg".into(),
            argv: vec!["cat".into(), "/proc/self/oom_score_adj".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out).trim(), "1000");
    // The init joins every part at birth (clone3 into v2, `tasks` on v1): each one lists
    // the sandbox's processes.
    for dir in &dirs {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
        assert!(!procs.trim().is_empty(), "{} is empty", dir.display());
    }
    // A command runs in its own cgroup below the session's, in every hierarchy the
    // session uses, and nothing in the sandbox may create a namespace.
    let (out, _) = client
        .exec_collect(ExecRequest {
            exec_id: "cg2".into(),
            argv: vec![
                "sh".into(),
                "-c".into(),
                "cat /proc/self/cgroup /proc/sys/user/max_user_namespaces".into(),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    let session_part = format!(
        "/{}/{}",
        sandbox_agent::cgroup::PARENT_NAME,
        spec.session_id
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.last(), Some(&"0"), "{out}");
    for ctl in ["memory", "pids", "cpu"] {
        if dirs
            .iter()
            .any(|d| d.starts_with(format!("/sys/fs/cgroup/{ctl}")))
        {
            assert!(
                lines.iter().any(|l| l
                    .split(':')
                    .nth(1)
                    .is_some_and(|c| c.split(',').any(|c| c == ctl))
                    && l.contains(&session_part)),
                "{ctl} not in the session: {out}"
            );
        }
    }
    // v2: the init is born in the session's cgroup, which is therefore the root of the
    // sandbox's cgroup namespace there; the command sits in a slot below it.
    if let Some(v2) = lines.iter().find(|l| l.starts_with("0::")) {
        assert!(v2.starts_with("0::/exec-"), "{out}");
    }
    sandbox.destroy().await.unwrap();
    assert!(
        session_cgroups(&spec.session_id).is_empty(),
        "{dirs:?} left behind"
    );
}

/// `Cpus_allowed_list` in a /proc status text.
fn cpus_allowed(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

// On `cordon run`'s runtime the session's threads are pinned, and the agent serves on
// their CPU; a command, and the launcher and init it descends from, keep every CPU.
#[test]
fn the_agent_serves_on_the_sessions_cpu_and_commands_keep_every_cpu() {
    // A thread of its own: the runtime pins the thread that builds it.
    std::thread::spawn(|| {
        let every = cpus_allowed(&std::fs::read_to_string("/proc/thread-self/status").unwrap());
        let runtime = crate::runtime::for_one_session().unwrap();
        let Some(cpu) = sandbox_agent::affinity::pinned_cpu() else {
            eprintln!("one CPU only ({every}): nothing is pinned");
            return;
        };
        runtime.block_on(async {
            let f = fixture();
            let Sandbox {
                mut client, handle, ..
            } = f.backend.start(&spec(&f)).await.unwrap();
            let (out, status) = client
                .exec_collect(ExecRequest {
                    exec_id: "cpus".into(),
                    argv: vec!["cat".into(), "/proc/self/status".into()],
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(status.code, Some(0));
            assert_eq!(cpus_allowed(&String::from_utf8_lossy(&out)), every);

            // On the host: the agent's serving (main) thread is on the session's CPU,
            // every other process of the sandbox has them all.
            let launcher = f.backend_pid_of(&*handle);
            let mut serving = 0;
            for (pid, _) in std::iter::once((launcher as i32, 0)).chain(descendants(launcher)) {
                let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                    continue;
                };
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                let mask = cpus_allowed(&status);
                if mask == cpu.to_string() && comm.trim() == "sandbox-agent" {
                    serving += 1;
                } else {
                    assert_eq!(mask, every, "pid {pid} ({}) is pinned", comm.trim());
                }
            }
            assert_eq!(serving, 1, "one agent serves on CPU {cpu}");
            let _ = client.shutdown().await;
            handle.destroy().await.unwrap();
        });
    })
    .join()
    .unwrap();
}
