//! `cordon sandbox` on the local backend without the agent (the one-shot path, see
//! `sandbox_agent::launch::oneshot`): output streams, exit statuses pass through, the
//! confinement holds (workspace-only writes, seccomp, no terminal), nothing the command
//! leaves behind survives, and a session with egress still goes through the agent.
//! The security battery (`security.rs`) runs on this path too: it uses `cordon sandbox`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cordon_tests::pty::Pty;
use cordon_tests::{
    Backend, Workspace, cordon_bin, host_processes_matching, sandbox, sandbox_sh, sandbox_with,
};

const LOCAL: Backend = Backend::Local;
/// Succeeds inside the sandbox only where the agent serves (its socket is bound).
const AGENT_PROBE: &str = "test -S /run/cordon/agent.sock && echo AGENT; true";

fn unique() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    u64::from(nanos) ^ (u64::from(std::process::id()) << 32)
}

#[test]
fn the_one_shot_path_runs_without_the_agent_and_via_agent_still_has_it() {
    let ws = Workspace::new();
    let run = sandbox_sh(LOCAL, ws.path(), AGENT_PROBE);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{run:?}");
    let run = sandbox_with(
        LOCAL,
        ws.path(),
        &["--via-agent"],
        &["sh", "-c", AGENT_PROBE],
    );
    assert_eq!((run.code, run.stdout.as_str()), (0, "AGENT\n"), "{run:?}");
}

#[test]
fn with_an_allowed_domain_the_agent_runs_the_command() {
    // The egress bridge lives in the agent: a session granted a domain must not take the
    // one-shot path. No traffic is made.
    let ws = Workspace::new();
    let run = sandbox_with(
        LOCAL,
        ws.path(),
        &["--allow-domain", "example.invalid"],
        &["sh", "-c", AGENT_PROBE],
    );
    assert_eq!((run.code, run.stdout.as_str()), (0, "AGENT\n"), "{run:?}");
}

#[test]
fn output_and_exit_statuses_pass_through_as_through_the_agent() {
    let ws = Workspace::new();
    for flags in [&[][..], &["--via-agent"][..]] {
        let run = sandbox_with(LOCAL, ws.path(), flags, &["true"]);
        assert_eq!(run.code, 0, "{flags:?} {run:?}");
        let script = "echo out; echo err >&2; exit 3";
        let run = sandbox_with(LOCAL, ws.path(), flags, &["sh", "-c", script]);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (3, "out\n"),
            "{flags:?} {run:?}"
        );
        assert!(run.stderr.contains("err"), "{flags:?} {run:?}");
        // An exit code of 125 is the command's, not a launcher failure.
        let run = sandbox_with(LOCAL, ws.path(), flags, &["sh", "-c", "exit 125"]);
        assert_eq!(run.code, 125, "{flags:?} {run:?}");
        assert!(!run.stderr.contains("cordon:"), "{flags:?} {run:?}");
        for (sig, name) in [(libc::SIGTERM, "TERM"), (libc::SIGKILL, "KILL")] {
            let script = format!("kill -{name} $$");
            let run = sandbox_with(LOCAL, ws.path(), flags, &["sh", "-c", &script]);
            assert_eq!(run.code, 128 + sig, "{flags:?} {run:?}");
        }
    }
    // A program that does not exist is Cordon's failure, said on stderr.
    let run = sandbox(LOCAL, ws.path(), &["no-such-program-here"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("no-such-program-here"), "{run:?}");
}

#[test]
fn output_streams_while_the_command_runs() {
    let ws = Workspace::new();
    let mut child = Command::new(cordon_bin())
        .args(["sandbox", "--workspace"])
        .arg(ws.path())
        .args([
            "--",
            "sh",
            "-c",
            "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The first line arrives while the command still waits for `go`.
    assert_eq!(lines.next().unwrap().unwrap(), "first");
    std::fs::write(ws.join("go"), "").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "second");
    assert!(child.wait().unwrap().success());
}

#[test]
fn the_command_cannot_write_outside_the_workspace() {
    let ws = Workspace::new();
    // Beside the workspace, on the same host filesystem: visible, never writable.
    let outside = ws
        .path()
        .parent()
        .unwrap()
        .join(format!("oneshot-outside-{}", unique()));
    let script = format!(
        "echo inside > made.txt; echo x > {o} && echo ESCAPED; touch /etc/oneshot-x && echo ESCAPED; true",
        o = outside.display()
    );
    let run = sandbox_sh(LOCAL, ws.path(), &script);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("ESCAPED"), "{run:?}");
    assert!(!outside.exists());
    assert!(!std::path::Path::new("/etc/oneshot-x").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "inside\n"
    );
}

#[test]
fn seccomp_still_refuses_namespaces_on_the_one_shot_path() {
    let ws = Workspace::new();
    let probe = ws.with_probe();
    let run = sandbox(LOCAL, ws.path(), &[probe.to_str().unwrap(), "unshare-user"]);
    assert_eq!(
        run.probe_result("unshare-user"),
        Ok(Some(libc::EPERM)),
        "{run:?}"
    );
    let run = sandbox_sh(LOCAL, ws.path(), "unshare -Ur id && echo ESCAPED; true");
    assert!(!run.stdout.contains("ESCAPED"), "{run:?}");
    assert!(!run.stderr.contains("not found"), "{run:?}");
}

fn wait_gone(marker: &str) {
    let start = Instant::now();
    loop {
        let left = host_processes_matching(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "processes outlived cordon: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_background_process_does_not_outlive_cordon() {
    let ws = Workspace::new();
    let n = 600_000 + unique() % 100_000;
    let script = format!("setsid sleep {n} & (nohup sleep {n} >/dev/null 2>&1 &); echo started");
    let run = sandbox_sh(LOCAL, ws.path(), &script);
    assert_eq!((run.code, run.stdout.as_str()), (0, "started\n"), "{run:?}");
    // Gone by the time cordon exited (the pid namespace died with its init); polled only
    // because /proc may lag a moment.
    wait_gone(&format!("sleep {n}"));
}

#[test]
fn an_interrupt_kills_the_command_and_everything_it_started() {
    let ws = Workspace::new();
    let n = 500_000 + unique() % 100_000;
    let script = format!("sleep {n} & touch started; sleep {n}");
    let mut child = Command::new(cordon_bin())
        .args(["sandbox", "--workspace"])
        .arg(ws.path())
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !ws.join("started").exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    wait_gone(&format!("sleep {n}"));
}

#[test]
fn on_a_terminal_the_command_still_gets_no_terminal() {
    let ws = Workspace::new();
    let probe = ws.with_probe();
    let script = format!(
        "for fd in 0 1 2; do test -t $fd && echo TTY-$fd; done; \
         test -e /dev/tty && (: </dev/tty) 2>/dev/null && echo CTTY; \
         {} tiocsti; echo done",
        probe.display()
    );
    let mut cmd = Command::new(cordon_bin());
    cmd.args(["sandbox", "--workspace"])
        .arg(ws.path())
        .args(["--", "sh", "-c", &script]);
    let mut pty = Pty::spawn(cmd);
    let screen = pty.wait_for("done");
    assert!(pty.wait_exit().success(), "{screen}");
    assert!(!screen.contains("TTY"), "{screen}");
    // Refused by seccomp (EPERM), not merely by a stdin that is no terminal (ENOTTY).
    assert!(
        screen.contains(&format!("RESULT tiocsti denied {}", libc::EPERM)),
        "{screen}"
    );
}

/// `cordon sandbox` with its state in `home` (a scratch `CORDON_HOME`).
fn sandbox_at(home: &std::path::Path, ws: &std::path::Path, script: &str) -> Command {
    let mut cmd = Command::new(cordon_bin());
    cmd.args(["sandbox", "--workspace"])
        .arg(ws)
        .args(["--", "sh", "-c", script])
        .env("CORDON_HOME", home)
        .env("CORDON_USER_SETTINGS", home.join("user.json"))
        .env("CORDON_MANAGED_SETTINGS", home.join("managed.json"))
        .stdin(Stdio::null());
    cmd
}

/// Names in the workspace other than the test's own.
fn leftovers(ws: &std::path::Path, own: &[&str]) -> Vec<String> {
    std::fs::read_dir(ws)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !own.contains(&n.as_str()))
        .collect()
}

#[test]
fn killed_mid_run_cordon_still_leaves_the_workspace_as_it_found_it() {
    // cordon is the launcher itself on this path: a `kill -9` leaves its guardian, which
    // hands the session to the reaper (the sandbox dies with cordon; placeholders, state
    // and cgroups go).
    let ws = Workspace::new();
    let home = tempfile::tempdir().unwrap();
    let n = 400_000 + unique() % 100_000;
    let script = format!("touch started; sleep {n}");
    let mut child = sandbox_at(home.path(), ws.path(), &script).spawn().unwrap();
    let start = Instant::now();
    while !ws.join("started").exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        ws.join(".bashrc").exists(),
        "a placeholder stands while it runs"
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    wait_gone(&format!("sleep {n}"));
    let run = home.path().join("run");
    let start = Instant::now();
    loop {
        let left = leftovers(ws.path(), &["started"]);
        let state = std::fs::read_dir(&run).map_or(0, Iterator::count);
        if left.is_empty() && state == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "left in the workspace: {left:?}; session states left: {state}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_sandbox_sees_no_command_line_of_cordon() {
    // cordon is the launcher here and its init a copy of it: /proc/1/cmdline (readable by
    // the command) would show cordon's own arguments, an inline --settings among them.
    let ws = Workspace::new();
    let marker = format!("secret-{}", unique());
    let settings = format!(r#"{{"env":{{"MARK":"{marker}"}}}}"#);
    let run = sandbox_with(
        LOCAL,
        ws.path(),
        &["--settings", &settings],
        &["sh", "-c", "cat /proc/1/cmdline; echo; echo done"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("done"), "{run:?}");
    assert!(!run.stdout.contains(&marker), "{run:?}");
}
