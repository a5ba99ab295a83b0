//! The security battery: every denial really attempted from inside the sandbox, through
//! `cordon sandbox` (exactly the confinement the Bash tool gets), with the host checked
//! afterwards. One suite, instantiated per backend.
//!
//! Every attempt is harmless if the sandbox fails: it targets files, links and listeners
//! this test created (unique names, removed afterwards), never the host's real settings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cordon_tests::limits::{LimitSettings, Session};
use cordon_tests::{Backend, Run, Workspace, host_processes_matching, sandbox, sandbox_sh};

const EPERM: i32 = libc::EPERM;
const ENOSYS: i32 = libc::ENOSYS;
/// Exit status of a process killed by SIGSYS, as `cordon sandbox` reports it.
const KILLED_BY_SIGSYS: i32 = 128 + libc::SIGSYS;

/// A file outside the workspace that the test creates and removes; never a real setting.
struct HostMarker(PathBuf);

impl HostMarker {
    fn new(dir: &str, content: &str) -> HostMarker {
        let name = format!("cordon-escape-test-{}-{}", std::process::id(), unique());
        let path = Path::new(dir).join(name);
        if !content.is_empty() {
            std::fs::write(&path, content).unwrap();
        }
        HostMarker(path)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for HostMarker {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    (u64::from(nanos) << 16) | N.fetch_add(1, Ordering::Relaxed)
}

fn probe(backend: Backend, ws: &Workspace, case: &str, arg: Option<&str>) -> Run {
    let probe = ws.with_probe();
    let mut argv = vec![probe.to_str().unwrap(), case];
    if let Some(arg) = arg {
        argv.push(arg);
    }
    sandbox(backend, ws.path(), &argv)
}

/// Asserts the probe's `case` was denied with `errno`.
fn assert_denied_with(backend: Backend, case: &str, arg: Option<&str>, errno: i32) {
    let ws = Workspace::new();
    let run = probe(backend, &ws, case, arg);
    assert_eq!(run.probe_result(case), Ok(Some(errno)), "{case}: {run:?}");
}

/// Asserts the probe's `case` was denied (any errno).
fn assert_denied(backend: Backend, ws: &Workspace, case: &str, arg: Option<&str>) -> Run {
    let run = probe(backend, ws, case, arg);
    let result = run.probe_result(case);
    assert!(
        matches!(result, Ok(Some(_))),
        "{case} was not denied: {run:?}"
    );
    run
}

pub fn no_new_privs_seccomp_and_no_capabilities(backend: Backend) {
    let ws = Workspace::new();
    let run = probe(backend, &ws, "status", None);
    assert_eq!(run.code, 0, "{run:?}");
    let field = |name: &str| {
        run.stdout
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l[name.len()..].trim().to_string())
            .unwrap_or_else(|| panic!("{name} missing: {run:?}"))
    };
    assert_eq!(field("NoNewPrivs:"), "1");
    assert_eq!(field("Seccomp:"), "2");
    assert_eq!(field("CapEff:"), "0000000000000000");
    assert_eq!(field("CapPrm:"), "0000000000000000");
    assert_eq!(field("CapAmb:"), "0000000000000000");
    let uid: Vec<u32> = field("Uid:")
        .split_whitespace()
        .map(|u| u.parse().unwrap())
        .collect();
    assert!(
        uid.iter().all(|&u| u != 0),
        "runs with uid 0 inside: {uid:?}"
    );
}

pub fn sandboxed_process_is_not_host_root(backend: Backend) {
    // Seen from the host, the sandbox's processes must not be uid 0 even though the test
    // (and Cordon) run as root: a process inside writes its host-visible uid into a file
    // in the workspace, whose on-disk owner tells.
    let ws = Workspace::new();
    let run = sandbox_sh(
        backend,
        ws.path(),
        "sleep 0.3 & cat /proc/$!/status >/dev/null; touch made-inside",
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(ws.join("made-inside").exists());
    // A long-running sandboxed process whose command line carries a marker, found on the
    // host through /proc and checked while it runs. The marker is assembled inside the
    // sandbox, so the host-side `cordon` process (whose argv holds only its pieces) never
    // matches. No `exec -a`: busybox picks its applet by argv[0].
    let tag = unique();
    let marker = format!("cordon-uid-probe-{tag}");
    let script = format!("m=cordon-uid-probe; exec sh -c \": $m-{tag}; sleep 30; true\"");
    let ws2 = Workspace::new();
    let mut child = std::process::Command::new(cordon_tests::cordon_bin())
        .args(["sandbox", "--backend", backend.name(), "--workspace"])
        .arg(ws2.path())
        .args(["--", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut checked = Vec::new();
    while start.elapsed() < Duration::from_secs(30) && checked.is_empty() {
        for (pid, cmd) in host_processes_matching(&marker) {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue;
            };
            let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
            let uids: Vec<u32> = uid_line[4..]
                .split_whitespace()
                .map(|u| u.parse().unwrap())
                .collect();
            checked.push((pid, cmd, uids));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Interrupt `cordon sandbox` as a user would (it cancels and tears the sandbox down),
    // then make sure it is gone.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(!checked.is_empty(), "sandboxed process never appeared");
    for (_, cmd, uids) in checked {
        assert!(
            uids.iter().all(|&u| u != 0),
            "{cmd} runs as host root: {uids:?}"
        );
    }
}

pub fn write_outside_the_workspace_fails_and_changes_nothing(backend: Backend) {
    let ws = Workspace::new();
    for dir in ["/etc", "/usr/local", "/var/tmp"] {
        let target = HostMarker::new(dir, "");
        assert_denied(backend, &ws, "write", Some(target.path()));
        assert!(
            !target.0.exists(),
            "{} was created on the host",
            target.path()
        );
    }
}

pub fn host_home_and_root_are_invisible(backend: Backend) {
    let ws = Workspace::new();
    let secret = HostMarker::new("/root", "secret");
    assert_denied(backend, &ws, "read", Some(secret.path()));
    assert_denied(backend, &ws, "readdir", Some("/root"));
    if let Ok(home) = std::env::var("HOME")
        && home != "/root"
        && Path::new(&home).is_dir()
        && !ws.path().starts_with(&home)
    {
        assert_denied(backend, &ws, "readdir", Some(&home));
    }
}

pub fn other_workspaces_are_invisible(backend: Backend) {
    let ws = Workspace::new();
    let other = Workspace::new();
    std::fs::write(other.join("secret"), "other tenant").unwrap();
    assert_denied(
        backend,
        &ws,
        "read",
        Some(other.join("secret").to_str().unwrap()),
    );
}

pub fn protected_paths_are_read_only_even_when_missing(backend: Backend) {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(ws.join(".bashrc"), "# user's rc\n").unwrap();
    let attempts = [
        ".git/hooks/pre-commit",
        ".git/config",
        ".claude/settings.json",
        ".cordon/x",
        ".mcp.json",
        ".envrc",
        ".bashrc",
        ".zshrc",
        ".profile",
    ];
    let script: String = attempts
        .iter()
        .map(|p| {
            format!(
                "(mkdir -p \"$(dirname {p})\"; echo pwned >> {p}) 2>/dev/null && echo WROTE {p};"
            )
        })
        .collect();
    let run = sandbox_sh(
        backend,
        ws.path(),
        &format!("{script} touch ordinary-file; true"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.stdout.contains("WROTE"),
        "a protected path was writable: {}",
        run.stdout
    );
    assert!(
        ws.join("ordinary-file").exists(),
        "the workspace itself must stay writable"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".bashrc")).unwrap(),
        "# user's rc\n"
    );
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    // Whatever placeholders the backend used, none may be left behind or hold content.
    for missing in [
        ".claude",
        ".cordon",
        ".mcp.json",
        ".envrc",
        ".zshrc",
        ".profile",
    ] {
        assert!(
            !ws.join(missing).exists(),
            "{missing} left behind in the workspace"
        );
    }
}

/// Without a repository at start, `git init` must work inside; what it (or a hand-made
/// `.git`) holds is vetted at teardown, before any host git can be told the session ended.
pub fn git_dir_planted_when_missing_is_vetted_at_teardown(backend: Backend) {
    let ws = Workspace::new();
    let run = sandbox_sh(
        backend,
        ws.path(),
        "mkdir -p .git/hooks && printf '#!/bin/sh\\necho owned\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && echo PLANTED; true",
    );
    assert!(run.stdout.contains("PLANTED"), "{run:?}");
    assert!(
        !ws.join(".git/hooks/post-checkout").exists(),
        "the planted hook is still in place"
    );
}

pub fn namespace_and_mount_calls_are_denied(backend: Backend) {
    assert_denied_with(backend, "unshare-user", None, EPERM);
    assert_denied_with(backend, "unshare-net", None, EPERM);
    assert_denied_with(backend, "clone-newns", None, EPERM);
    assert_denied_with(backend, "clone3", None, ENOSYS);
    let ws = Workspace::new();
    std::fs::create_dir(ws.join("mnt")).unwrap();
    let run = probe(
        backend,
        &ws,
        "mount",
        Some(ws.join("mnt").to_str().unwrap()),
    );
    assert_eq!(run.probe_result("mount"), Ok(Some(EPERM)), "{run:?}");
    let run = probe(backend, &ws, "chroot", Some(ws.path().to_str().unwrap()));
    assert_eq!(run.probe_result("chroot"), Ok(Some(EPERM)), "{run:?}");
}

pub fn unshare_command_fails(backend: Backend) {
    let ws = Workspace::new();
    let run = sandbox_sh(backend, ws.path(), "unshare -Ur id && echo ESCAPED; true");
    assert!(!run.stdout.contains("ESCAPED"), "{run:?}");
    // The attempt really ran (util-linux on the host, the busybox applet in the image).
    assert!(!run.stderr.contains("not found"), "{run:?}");
}

pub fn ptrace_and_cross_process_memory_are_denied(backend: Backend) {
    assert_denied_with(backend, "ptrace-sibling", None, EPERM);
    assert_denied_with(backend, "ptrace-traceme", None, EPERM);
    assert_denied_with(backend, "process-vm-readv", None, EPERM);
}

pub fn kernel_attack_surface_is_denied(backend: Backend) {
    for case in [
        "io_uring",
        "keyctl",
        "add_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "init_module",
        "kexec_load",
        "open_by_handle_at",
        "personality",
    ] {
        assert_denied_with(backend, case, None, EPERM);
    }
}

pub fn terminal_injection_is_denied_including_the_high_bit_trick(backend: Backend) {
    assert_denied_with(backend, "tiocsti", None, EPERM);
    assert_denied_with(backend, "tiocsti-highbit", None, EPERM);
    assert_denied_with(backend, "tioclinux", None, EPERM);
}

pub fn sockets_other_than_unix_are_denied(backend: Backend) {
    for case in [
        "socket-inet",
        "socket-inet6",
        "socket-netlink",
        "socket-packet",
    ] {
        assert_denied_with(backend, case, None, EPERM);
    }
    let ws = Workspace::new();
    let run = probe(backend, &ws, "socket-unix", None);
    assert_eq!(run.probe_result("socket-unix"), Ok(None), "{run:?}");
}

pub fn loopback_listener_outside_is_unreachable(backend: Backend) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let ws = Workspace::new();
    assert_denied(backend, &ws, "connect", Some(&addr));
    // A real client too: busybox's nc (the host's static busybox is visible in the local
    // sandbox, and is the minimal image's shell). `/dev/tcp` would be a bash-only feature
    // that neither dash nor ash has, i.e. no attempt at all.
    let run = sandbox_sh(
        backend,
        ws.path(),
        &format!(
            "echo hi | busybox nc 127.0.0.1 {} && echo CONNECTED; true",
            addr.rsplit(':').next().unwrap()
        ),
    );
    assert!(!run.stdout.contains("CONNECTED"), "{run:?}");
    assert!(!run.stderr.contains("not found"), "nc really ran: {run:?}");
    assert!(
        listener.accept().is_err(),
        "the listener outside saw a connection"
    );
}

pub fn foreign_architectures_kill_the_process(backend: Backend) {
    let ws = Workspace::new();
    let run = probe(backend, &ws, "x32", None);
    assert_eq!(
        run.code, KILLED_BY_SIGSYS,
        "x32 syscall was not killed: {run:?}"
    );
    let run = probe(backend, &ws, "int80", None);
    assert_eq!(
        run.code, KILLED_BY_SIGSYS,
        "int 0x80 was not killed: {run:?}"
    );
}

pub fn symlink_out_of_the_workspace_cannot_be_written_through(backend: Backend) {
    let ws = Workspace::new();
    let outside = tempfile::Builder::new()
        .prefix("cordon-outside-")
        .tempdir_in(cordon_tests::bin_dir())
        .unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("link")).unwrap();
    std::os::unix::fs::symlink("/etc", ws.join("etc-link")).unwrap();
    let marker = format!("cordon-escape-test-{}", unique());
    let run = sandbox_sh(
        backend,
        ws.path(),
        &format!(
            "echo x > link/{marker} 2>/dev/null && echo WROTE1; echo x > etc-link/{marker} 2>/dev/null && echo WROTE2; true"
        ),
    );
    assert!(!run.stdout.contains("WROTE"), "{run:?}");
    assert!(!outside.path().join(&marker).exists());
    assert!(!Path::new("/etc").join(&marker).exists());
}

pub fn hardlink_to_a_file_outside_cannot_be_made(backend: Backend) {
    let ws = Workspace::new();
    let run = probe(
        backend,
        &ws,
        "hardlink",
        Some(&format!("/etc/hostname {}", ws.join("h").display())),
    );
    assert!(
        matches!(run.probe_result("hardlink"), Ok(Some(_))),
        "{run:?}"
    );
    assert!(!ws.join("h").exists());
}

pub fn setuid_root_binary_gains_nothing(backend: Backend) {
    let ws = Workspace::new();
    // A setuid-root copy placed by the host (the strongest version of the attack): the
    // static escape probe, which runs in every image and, unlike a setuid bash or busybox
    // (both drop a setuid uid for `sh` by themselves), keeps whatever the kernel gives it.
    // It reports its real, effective, saved and fs uids.
    let copy = ws.join("rootprobe");
    std::fs::rename(ws.with_probe(), &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let run = sandbox(backend, ws.path(), &[copy.to_str().unwrap(), "status"]);
    let uids: Vec<&str> = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .unwrap_or_else(|| panic!("no Uid line: {run:?}"))
        .split_whitespace()
        .collect();
    assert_eq!(uids.len(), 4, "{run:?}");
    assert!(
        uids.iter().all(|id| *id != "0"),
        "setuid gave root: {run:?}"
    );
    // And one made inside the sandbox (named `sh`: busybox picks its applet by name).
    let run = sandbox_sh(
        backend,
        ws.path(),
        "cp /bin/sh ./sh && chmod u+s ./sh; ./sh -c 'id -u; id -ru'",
    );
    let ids: Vec<&str> = run.stdout.split_whitespace().collect();
    assert_eq!(ids.len(), 2, "the copy ran: {run:?}");
    assert!(ids.iter().all(|id| *id != "0"), "{run:?}");
}

/// Mode and owning uid of a workspace entry, as the host sees it (not following links).
fn host_mode_owner(path: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).unwrap();
    (meta.mode() & 0o7777, meta.uid())
}

/// Whatever a session made, on the host afterwards: no setuid or setgid bit, and owned by
/// the workspace's owner (local: the idmapped workspace) or, on Docker, a non-root
/// session uid. Every way in is attempted, and each is refused inside (seccomp), not only
/// swept at the end: mid-session, the host sees no privileged file either.
pub fn privilege_bits_never_reach_the_host(backend: Backend) {
    use std::os::unix::fs::MetadataExt;
    let ws = Workspace::new();
    // A setuid copy the user has in the workspace, for `cp -p`.
    std::fs::copy("/bin/sh", ws.join("src-suid")).unwrap();
    std::fs::set_permissions(ws.join("src-suid"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    let script = "\
        cp /bin/sh a; chmod 4755 a || echo REFUSED-a; \
        cp /bin/sh b; chmod 6755 b || echo REFUSED-b; \
        cp /bin/sh c; chmod g+s c || echo REFUSED-c; \
        cp /bin/sh d; chmod u+s d || echo REFUSED-d; \
        install -m 4755 /bin/sh e || echo REFUSED-e; \
        mkdir -m 2755 f || echo REFUSED-f; \
        mkdir g; chmod g+s g || echo REFUSED-g; \
        cp -p src-suid h || echo REFUSED-h; \
        ls -ln";
    let run = sandbox_sh(backend, ws.path(), script);
    for name in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        assert!(
            run.stdout.contains(&format!("REFUSED-{name}")),
            "{name} was not refused inside: {run:?}"
        );
    }
    for (case, errno) in [
        ("open-creat-setuid", EPERM),
        ("openat2-creat-setuid", ENOSYS),
        ("mknod-setuid", EPERM),
    ] {
        let target = ws.join(case);
        let run = probe(backend, &ws, case, Some(target.to_str().unwrap()));
        assert_eq!(run.probe_result(case), Ok(Some(errno)), "{case}: {run:?}");
    }
    let owner = std::fs::metadata(ws.path()).unwrap().uid();
    for entry in std::fs::read_dir(ws.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "src-suid" || name == "escape-probe" {
            continue;
        }
        let (mode, uid) = host_mode_owner(&entry.path());
        assert_eq!(mode & 0o6000, 0, "{name} has mode {mode:o} on the host");
        assert!(
            uid == owner || (backend == Backend::Docker && uid != 0),
            "{name} is owned by {uid} on the host (workspace owner {owner})"
        );
    }
}

/// The teardown backstop: a setuid file that appears in the workspace while the session
/// runs (here made by the host, standing in for any path the filter cannot see) has lost
/// its bit once the session ended, and the user's own setuid files made long before are
/// no business of this test (see hostside::privbits's unit tests).
pub fn a_setuid_file_made_during_a_session_is_stripped_at_teardown(backend: Backend) {
    let ws = Workspace::new();
    let go = ws.join("go");
    let mut child = std::process::Command::new(cordon_tests::cordon_bin())
        .args(["sandbox", "--backend", backend.name(), "--workspace"])
        .arg(ws.path())
        .args([
            "--",
            "sh",
            "-c",
            "touch started; while [ ! -e go ]; do sleep 0.05; done",
        ])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !ws.join("started").exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let planted = ws.join("planted");
    std::fs::copy("/bin/sh", &planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o6755)).unwrap();
    std::fs::write(&go, "").unwrap();
    assert!(child.wait().unwrap().success());
    let (mode, _) = host_mode_owner(&planted);
    assert_eq!(mode, 0o755, "the sweep left {mode:o}");
}

pub fn processes_do_not_outlive_their_command(backend: Backend) {
    let ws = Workspace::new();
    let marker = format!("{}", 700000 + unique() % 100000);
    let run = sandbox_sh(
        backend,
        ws.path(),
        &format!(
            "setsid sh -c 'sleep {marker} & sleep {marker}' & (sleep {marker} &) ; echo started"
        ),
    );
    assert!(run.stdout.contains("started"), "{run:?}");
    let start = Instant::now();
    loop {
        let left = host_processes_matching(&format!("sleep {marker}"));
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "processes outlived the sandbox: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn exit_status_and_output_pass_through(backend: Backend) {
    let ws = Workspace::new();
    let run = sandbox_sh(backend, ws.path(), "echo out; echo err >&2; exit 7");
    assert_eq!(run.code, 7, "{run:?}");
    assert_eq!(run.stdout, "out\n");
    assert!(run.stderr.contains("err"), "{run:?}");
    let run = sandbox_sh(backend, ws.path(), "kill -TERM $$");
    assert_eq!(run.code, 128 + libc::SIGTERM, "{run:?}");
    // The workspace is the working directory and is writable; files land on the host.
    let run = sandbox_sh(backend, ws.path(), "pwd; echo hello > made.txt");
    assert_eq!(run.stdout.trim(), ws.path().to_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "hello\n"
    );
}

/// Small limits for the resource cases: fast to reach, harmless to the host.
fn small_limits() -> LimitSettings {
    LimitSettings::new(serde_json::json!({"memory": "64m", "pids": 64, "cpus": 1}))
}

pub fn allocation_past_the_memory_limit_fails(backend: Backend) {
    let ws = Workspace::new();
    let probe = ws.with_probe();
    let limits = small_limits();
    let probe = probe.to_str().unwrap();
    // Well inside the limit: allowed, so the limit is not "nothing works".
    let run = limits.run(backend, ws.path(), &[probe, "alloc", "8"]);
    assert_eq!(run.probe_result("alloc"), Ok(None), "{run:?}");
    // Four times the limit: the kernel kills the probe before it can report.
    let run = limits.run(backend, ws.path(), &[probe, "alloc", "256"]);
    assert!(
        !run.stdout.contains("ALLOCATED"),
        "allocated past the limit: {run:?}"
    );
    assert_eq!(run.code, 128 + libc::SIGKILL, "{run:?}");
}

pub fn process_count_is_capped(backend: Backend) {
    let ws = Workspace::new();
    let probe = ws.with_probe();
    let run = small_limits().run(
        backend,
        ws.path(),
        &[probe.to_str().unwrap(), "fork-count", "200"],
    );
    let forked: usize = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("FORKED "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {run:?}"));
    assert!(
        forked < 64,
        "{forked} processes started under a limit of 64: {run:?}"
    );
    assert_eq!(
        run.probe_result("fork-count"),
        Ok(Some(libc::EAGAIN)),
        "{run:?}"
    );
}

pub fn a_fork_bomb_leaves_the_host_responsive(backend: Backend) {
    let ws = Workspace::new();
    let marker = format!("bomb{}", unique());
    // The bomb forks until the pids limit stops it; the script forks it once, up front
    // (a shell whose own fork fails exits), then goes on with builtins only: says it
    // started and waits for the test's go-ahead.
    let script = format!(
        "{marker}() {{ {marker} | {marker} & }}; ({marker}) & : > started-{marker}; \
         while [ ! -e stop-{marker} ]; do :; done; : > survived-{marker}"
    );
    let limits = small_limits();
    let mut child = limits.spawn(backend, ws.path(), &["sh", "-c", &script]);
    let started = ws.join(&format!("started-{marker}"));
    while !started.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!("the sandbox ended before the bomb went off: {status:?} {out:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The host still starts processes and this test still runs, bomb and all.
    let host = std::process::Command::new("sh")
        .args(["-c", "echo host-ok"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&host.stdout), "host-ok\n");
    std::fs::write(ws.join(&format!("stop-{marker}")), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(ws.join(&format!("survived-{marker}")).exists());
    let left = host_processes_matching(&marker);
    assert!(
        left.is_empty(),
        "fork bomb processes outlived the sandbox: {left:?}"
    );
}

/// The agent runs its commands as its own uid; its /proc entries are still out of their
/// reach (it is undumpable): no command opens its memory, its fds or its environment,
/// while each command's own entries stay open to it.
pub fn the_agents_memory_and_fds_are_out_of_its_commands_reach(backend: Backend) {
    let ws = Workspace::new();
    let mut session = Session::start(backend, ws.path());
    // Every process of ours in the sandbox (the agent; the local backend's init too), by
    // its name; then what a command can open of each, and of itself as the control.
    let script = r#"
try() { if ( exec 3<"$1" ) 2>/dev/null; then echo open; else echo refused; fi; }
ours=""
for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = sandbox-agent ] && ours="$ours ${p#/proc/}"
done
echo "ours:$ours"
for a in $ours; do
  echo "pid $a mem=$( (exec 3<>/proc/$a/mem) 2>/dev/null && echo open || echo refused) fd=$(ls /proc/$a/fd >/dev/null 2>&1 && echo open || echo refused) environ=$(try /proc/$a/environ) root=$(ls /proc/$a/root/ >/dev/null 2>&1 && echo open || echo refused)"
done
echo "self fd=$(ls /proc/$$/fd >/dev/null 2>&1 && echo open || echo refused) environ=$(try /proc/$$/environ)"
"#;
    let (out, status) = session.sh(script);
    assert_eq!(status.code, Some(0), "{out}");
    let ours: Vec<&str> = out
        .lines()
        .find_map(|l| l.strip_prefix("ours:"))
        .unwrap_or_else(|| panic!("{out}"))
        .split_whitespace()
        .collect();
    assert!(
        !ours.is_empty(),
        "the agent was not found by its name: {out}"
    );
    for pid in &ours {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("pid {pid} ")))
            .unwrap_or_else(|| panic!("{pid}: {out}"));
        for what in ["mem", "fd", "environ", "root"] {
            assert!(
                line.contains(&format!("{what}=refused")),
                "{what} of {pid} opened by a command: {out}"
            );
        }
    }
    assert!(
        out.contains("self fd=open environ=open"),
        "the control: a command reads its own entries: {out}"
    );
}

pub fn a_pid_hopper_is_gone_before_the_next_call(backend: Backend) {
    let ws = Workspace::new();
    let tag = format!("hop{}", unique());
    // Each copy starts the next in the background and exits: a process that is never
    // the same pid twice, which a kill by /proc scan cannot catch.
    std::fs::write(ws.join(&format!("{tag}.sh")), "sh \"$0\" &\n").unwrap();
    let mut session = Session::start(backend, ws.path());
    // The hopper leaves the call's process group, drops its environment (and any marker
    // in it) and starts while another call runs, so nothing but its cgroup ties it to
    // its call; the other call ends only after the hopper's call ended.
    let (out, status) = session.sh_beside(
        &format!("while [ ! -e {tag}.done ]; do sleep 0.05; done; sleep 0.5"),
        &format!("env -i setsid sh ./{tag}.sh & : > {tag}.done; echo started"),
    );
    assert!(
        out.contains("started") && status.code == Some(0),
        "{out} {status:?}"
    );
    // Between the calls, seen from the host: nothing of the hopper runs.
    for _ in 0..20 {
        let left = host_processes_matching(&tag);
        assert!(left.is_empty(), "the hopper survived its call: {left:?}");
    }
    let (out, status) = session.sh("echo second");
    assert!(
        out.contains("second") && status.code == Some(0),
        "{out} {status:?}"
    );
    // The hopper's call slot was killed whole; the next commands that land in it run
    // (regression: children born in a killed cgroup by clone3 were SIGKILLed at birth).
    for round in 0..3 {
        let (a, b) = session.sh_both("sleep 0.2; echo a", "sleep 0.2; echo b");
        for (out, status, want) in [(a.0, a.1, "a"), (b.0, b.1, "b")] {
            assert!(
                out.contains(want) && status.code == Some(0),
                "round {round}: {out:?} {status:?}"
            );
        }
    }
    assert!(host_processes_matching(&tag).is_empty());
}

/// Each call's processes die with the call, not when the sandbox next has nothing
/// running: a daemon a finished call left (double-forked, in a session of its own, no
/// marker tying it to its call) is gone while another, longer call still runs.
pub fn a_finished_calls_daemon_is_gone_while_another_call_runs(backend: Backend) {
    let ws = Workspace::new();
    let tag = format!("dmn{}", unique());
    let mut session = Session::start(backend, ws.path());
    let long = session.start_call(&format!(
        "while [ ! -e {tag}.stop ]; do sleep 0.05; done; echo released"
    ));
    let (out, status) = session.sh(&format!(
        "(setsid sh -c 'while :; do sleep 1; done' {tag}-daemon &); echo started"
    ));
    assert!(
        out.contains("started") && status.code == Some(0),
        "{out} {status:?}"
    );
    // Seen from the host, while the long call still runs.
    let left = host_processes_matching(&format!("{tag}-daemon"));
    std::fs::write(ws.join(&format!("{tag}.stop")), "").unwrap();
    let (out, _) = session.finish(long);
    assert!(left.is_empty(), "the daemon outlived its call: {left:?}");
    assert!(out.contains("released"), "{out}");
}

/// Both backends: the agent measures the workspace after each command (on Docker from
/// inside the container, where the workspace is the same tree at the same path).
pub fn workspace_disk_budget_is_enforced_with_a_clear_error(backend: Backend) {
    let ws = Workspace::new();
    std::fs::write(ws.join("before.bin"), vec![1u8; 8 << 20]).unwrap();
    let limits = sandbox_agent::cgroup::SessionLimits {
        disk_bytes: Some(32 << 20),
        ..Default::default()
    };
    let mut session = Session::start_with(backend, ws.path(), limits);
    let (out, _) = session.sh("head -c 16m /dev/zero > small.bin; echo wrote");
    assert!(
        !out.contains("budget"),
        "under the budget, and what was there before does not count: {out}"
    );
    let (out, _) = session.sh("head -c 32m /dev/zero > big.bin; echo wrote");
    assert!(
        out.contains("wrote") && out.contains("workspace disk budget exceeded"),
        "{out}"
    );
    let refused = session.try_sh("echo next").unwrap_err();
    assert_eq!(
        refused.code,
        sandbox_agent::ErrorCode::TooLarge,
        "{refused:?}"
    );
    assert!(refused.message.contains("remove files"), "{refused:?}");
    // The user (or the model, with a tool other than Bash) frees space: commands run again.
    std::fs::remove_file(ws.join("big.bin")).unwrap();
    let (out, status) = session.sh("echo back");
    assert_eq!((out.as_str(), status.code), ("back\n", Some(0)));
}

/// Instantiates every case once per backend: one suite, two backends.
macro_rules! battery {
    ([$($case:ident),* $(,)?]) => {
        battery!(@backend local, cordon_tests::Backend::Local, [$($case),*]);
        battery!(@backend docker, cordon_tests::Backend::Docker, [$($case),*]);
    };
    (@backend $module:ident, $backend:expr, [$($case:ident),*]) => {
        mod $module {
            $(
                #[test]
                fn $case() {
                    if cordon_tests::backend_ready($backend) {
                        super::$case($backend);
                    }
                }
            )*
        }
    };
}

battery!([
    no_new_privs_seccomp_and_no_capabilities,
    sandboxed_process_is_not_host_root,
    write_outside_the_workspace_fails_and_changes_nothing,
    host_home_and_root_are_invisible,
    other_workspaces_are_invisible,
    protected_paths_are_read_only_even_when_missing,
    git_dir_planted_when_missing_is_vetted_at_teardown,
    namespace_and_mount_calls_are_denied,
    unshare_command_fails,
    ptrace_and_cross_process_memory_are_denied,
    kernel_attack_surface_is_denied,
    terminal_injection_is_denied_including_the_high_bit_trick,
    sockets_other_than_unix_are_denied,
    loopback_listener_outside_is_unreachable,
    foreign_architectures_kill_the_process,
    symlink_out_of_the_workspace_cannot_be_written_through,
    hardlink_to_a_file_outside_cannot_be_made,
    setuid_root_binary_gains_nothing,
    privilege_bits_never_reach_the_host,
    a_setuid_file_made_during_a_session_is_stripped_at_teardown,
    processes_do_not_outlive_their_command,
    exit_status_and_output_pass_through,
    allocation_past_the_memory_limit_fails,
    process_count_is_capped,
    a_fork_bomb_leaves_the_host_responsive,
    a_pid_hopper_is_gone_before_the_next_call,
    the_agents_memory_and_fds_are_out_of_its_commands_reach,
    workspace_disk_budget_is_enforced_with_a_clear_error,
    a_finished_calls_daemon_is_gone_while_another_call_runs,
]);
