//! The README's main job: `cordon demo` runs a real sandboxed session, offline, that fixes
//! the demo project and shows the sandbox refusing to reach outside.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cordon_tests::{Workspace, cordon_bin};

/// Runs `cordon demo ARGS` offline with a throwaway data directory and temp dir; returns
/// its stderr after checking it succeeded and its tests passed.
fn demo(args: &[&std::ffi::OsStr]) -> String {
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(cordon_bin())
        .arg("demo")
        .args(args)
        .env("CORDON_HOME", home.path())
        .env("TMPDIR", tmp.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("all tests passed"), "{stderr}");
    stderr
}

#[test]
fn the_offline_demo_fixes_the_project_and_the_sandbox_holds() {
    let ws = Workspace::new();
    let stderr = demo(&["--workspace".as_ref(), ws.path().as_os_str()]);
    let code = std::fs::read_to_string(ws.join("greet.py")).unwrap();
    assert!(code.contains("\"Hello, \" + name + \"!\""), "{code}");
    assert!(
        stderr.contains("Read-only file system"),
        "writing /etc must fail: {stderr}"
    );
    assert!(
        stderr.contains("/etc/shadow: Permission denied"),
        "{stderr}"
    );
    assert!(!std::path::Path::new("/etc/cordon-demo").exists());
}

/// The README's command as written: no `--workspace`, so the demo makes its own project
/// directory (never inside Cordon's data directory, which Cordon refuses as a workspace).
#[test]
fn the_demo_runs_without_a_workspace_argument() {
    demo(&[]);
}
