//! The light way of starting a command: its streams, directory and environment, a failed
//! exec reported, and no handler of the agent's ever running in the child.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::*;

fn env() -> Vec<(String, String)> {
    vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("GREETING".into(), "hi".into()),
    ]
}

fn wait(pid: i32) -> WaitStatus {
    waitpid(Pid::from_raw(pid), None).unwrap()
}

/// stdin in, stdout and stderr out, the directory and environment given, `argv[0]` found
/// in PATH, and the exit status the command's.
#[test]
fn a_light_child_runs_the_command_with_its_streams() {
    let dir = tempfile::tempdir().unwrap();
    let script = "read line; echo \"$line $GREETING $(pwd)\"; echo oops >&2; exit 3";
    let argv = ["sh", "-c", script].map(String::from);
    let what = Prepared::new(&argv, &env(), dir.path(), true).unwrap();
    // SAFETY: the setup does nothing.
    let mut child = unsafe { spawn_light(&what, &|| Ok(())) }.unwrap();
    std::fs::File::from(child.stdin.take().unwrap())
        .write_all(b"hello\n")
        .unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    std::fs::File::from(child.stdout.take().unwrap())
        .read_to_string(&mut out)
        .unwrap();
    std::fs::File::from(child.stderr.take().unwrap())
        .read_to_string(&mut err)
        .unwrap();
    let real = dir.path().canonicalize().unwrap();
    assert_eq!(out, format!("hello hi {}\n", real.display()));
    assert_eq!(err, "oops\n");
    assert_eq!(
        wait(child.pid),
        WaitStatus::Exited(Pid::from_raw(child.pid), 3)
    );
}

/// A program that is not there, and a setup that fails, come back as errors, with
/// nothing left running.
#[test]
fn a_light_child_reports_what_stopped_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Prepared::new(&["no-such-program-here".into()], &env(), dir.path(), false);
    // SAFETY: the setup does nothing.
    let e = unsafe { spawn_light(&missing.unwrap(), &|| Ok(())) }.unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    let what = Prepared::new(&["true".into()], &env(), dir.path(), false).unwrap();
    let refuse = || Err(io::Error::from_raw_os_error(libc::EPERM));
    // SAFETY: the setup makes no system call.
    let e = unsafe { spawn_light(&what, &refuse) }.unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
}

static HANDLED: AtomicBool = AtomicBool::new(false);

extern "C" fn note_usr1(_: libc::c_int) {
    HANDLED.store(true, Ordering::SeqCst);
}

/// A signal that reaches a light child before exec gets the default action, never the
/// agent's handler (which would run on the agent's memory): here the handler would set
/// a flag this process sees, and the default action ends the child.
#[test]
fn a_light_child_never_runs_the_parents_handlers() {
    // SAFETY: a handler that only stores to an atomic, installed for SIGUSR1, which no
    // other test of this binary uses.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = note_usr1 as extern "C" fn(libc::c_int) as usize;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let what = Prepared::new(&["true".into()], &env(), dir.path(), false).unwrap();
    // raise(3) is tgkill on the calling thread: the child itself.
    let raise = || {
        // SAFETY: a signal to the calling thread.
        unsafe { libc::raise(libc::SIGUSR1) };
        Ok(())
    };
    // SAFETY: the setup makes one async-signal-safe system call.
    let child = unsafe { spawn_light(&what, &raise) }.unwrap();
    let status = wait(child.pid);
    assert_eq!(
        status,
        WaitStatus::Signaled(
            Pid::from_raw(child.pid),
            nix::sys::signal::Signal::SIGUSR1,
            false
        )
    );
    assert!(
        !HANDLED.load(Ordering::SeqCst),
        "the agent's handler ran in the child"
    );
    // The handler is still this process's.
    // SAFETY: a signal to this thread, whose handler only stores to an atomic.
    unsafe { libc::raise(libc::SIGUSR1) };
    assert!(HANDLED.load(Ordering::SeqCst));
}
