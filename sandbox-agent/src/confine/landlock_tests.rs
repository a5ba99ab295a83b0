//! Each test forks, restricts the child with the default policy and checks from inside.
//! Targets are only files and listeners the test itself created.

use std::io::ErrorKind;

use nix::sys::wait::WaitStatus;

use super::*;
use crate::confine::in_child;

struct Fixture {
    _dir: tempfile::TempDir,
    config: AgentConfig,
    outside: PathBuf,
}

fn fixture(network: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let tmp = dir.path().join("tmp");
    let outside = dir.path().join("outside");
    for d in [&ws, &tmp, &outside] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(outside.join("secret"), "x").unwrap();
    let config = AgentConfig {
        socket_path: dir.path().join("s.sock"),
        workspace: ws,
        tmp_dir: tmp,
        extra_writable: vec![],
        extra_readable: Vec::new(),
        command_env: Vec::new(),
        protected_paths: vec![],
        network,
        egress: None,
        best_effort: false,
        rlimits: Default::default(),
        disk_budget_bytes: None,
        exec_cgroup: None,
        require_outside_peer: false,
    };
    Fixture {
        _dir: dir,
        config,
        outside,
    }
}

fn denied<T>(r: std::io::Result<T>) -> bool {
    matches!(r, Err(e) if e.kind() == ErrorKind::PermissionDenied)
}

#[test]
fn the_default_policy_parses() {
    let p = LandlockPolicy::default_policy().unwrap();
    assert!(p.paths.iter().any(|r| r.path == Path::new("/usr")));
    let bad = DEFAULT_POLICY.replacen("\"access\"", "\"acces\"", 1);
    assert!(LandlockPolicy::parse(&bad).is_err());
}

#[test]
fn missing_features_are_named_per_abi() {
    assert!(missing_for_abi(0, false)[0].contains("not available"));
    assert!(missing_for_abi(3, false).iter().any(|m| m.contains("tcp")));
    assert!(!missing_for_abi(3, true).iter().any(|m| m.contains("tcp")));
    assert!(missing_for_abi(6, false).is_empty());
}

#[test]
fn only_the_roots_are_writable_and_outside_files_are_unreadable() {
    if sys::landlock_abi() == 0 {
        eprintln!("skipping: no landlock");
        return;
    }
    let fx = fixture(false);
    let policy = LandlockPolicy::default_policy().unwrap();
    let config = fx.config.clone();
    let outside = fx.outside.clone();
    let status = in_child(move || {
        let outcome = restrict_self(&policy, &config).unwrap();
        if !outcome.fully_enforced {
            return 10;
        }
        if std::fs::write(config.workspace.join("ok.txt"), "ok").is_err() {
            return 11;
        }
        if std::fs::create_dir(config.tmp_dir.join("sub")).is_err() {
            return 12;
        }
        if !denied(std::fs::write(outside.join("new"), "x")) {
            return 13;
        }
        if !denied(std::fs::read(outside.join("secret"))) {
            return 14;
        }
        if Path::new("/root").exists() && !denied(std::fs::read_dir("/root")) {
            return 15;
        }
        if std::fs::read("/etc/hostname").is_err() && Path::new("/etc/hostname").exists() {
            return 16;
        }
        if !denied(std::fs::write("/etc/cordon-landlock-test", "x")) {
            return 17;
        }
        if std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .is_err()
        {
            return 18;
        }
        0
    });
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
    assert!(fx.config.workspace.join("ok.txt").exists());
    assert!(!fx.outside.join("new").exists());
}

#[test]
fn tcp_connect_is_denied_without_network() {
    if sys::landlock_abi() < 4 {
        eprintln!("skipping: landlock abi < 4");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    for (network, want_ok) in [(false, false), (true, true)] {
        let fx = fixture(network);
        let policy = LandlockPolicy::default_policy().unwrap();
        let config = fx.config.clone();
        let status = in_child(move || {
            restrict_self(&policy, &config).unwrap();
            let r = std::net::TcpStream::connect(addr);
            match (want_ok, r) {
                (true, Ok(_)) => 0,
                (false, Err(e)) if e.kind() == ErrorKind::PermissionDenied => 0,
                _ => 1,
            }
        });
        assert!(
            matches!(status, WaitStatus::Exited(_, 0)),
            "network={network}: {status:?}"
        );
    }
}

#[test]
fn signals_to_processes_outside_the_domain_are_refused() {
    if sys::landlock_abi() < 6 {
        eprintln!("skipping: landlock abi < 6");
        return;
    }
    let fx = fixture(false);
    let policy = LandlockPolicy::default_policy().unwrap();
    let config = fx.config.clone();
    let parent = std::process::id() as i32;
    let status = in_child(move || {
        restrict_self(&policy, &config).unwrap();
        // Signal 0 checks permission only: nothing is delivered to the test process.
        // SAFETY: kill with signal 0 has no effect beyond the permission check.
        let rc = unsafe { libc::kill(parent, 0) };
        let err = std::io::Error::last_os_error().raw_os_error();
        if rc == -1 && err == Some(libc::EPERM) {
            0
        } else {
            1
        }
    });
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
}
