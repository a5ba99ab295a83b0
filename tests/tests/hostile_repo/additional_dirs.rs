//! Additional directories (`permissions.additionalDirectories`) get the workspace's
//! host-integrity protections, on both backends, through `cordon sandbox` (whose
//! `--settings` is a trusted source): protected paths and hard-linked names stay
//! read-only, a setuid bit that appears in one during the session is stripped at
//! teardown, the placeholders go; a directory a workspace could not be is refused, naming
//! the setting and the path. (Which sources may set them: `trust.rs`.)

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use cordon_tests::{Backend, Workspace, cordon_bin, docker_ready, sandbox_with};
use serde_json::json;

/// `--settings` giving `dirs` as additional directories.
fn settings(dirs: &[&Path]) -> String {
    json!({"permissions": {"additionalDirectories": dirs}}).to_string()
}

fn docker_or_skip() -> bool {
    match docker_ready() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// The teardown backstop: a setuid file that appears in the additional directory while
/// the session runs (made by the host, standing in for any path the filter cannot see)
/// has lost its bits once the session ended.
fn a_setuid_file_in_an_additional_directory_is_stripped(backend: Backend) {
    let ws = Workspace::new();
    let extra = Workspace::new();
    let (started, go) = (extra.join("started"), extra.join("go"));
    let script = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
        started.display(),
        go.display()
    );
    let mut child = std::process::Command::new(cordon_bin())
        .args(["sandbox", "--backend", backend.name(), "--workspace"])
        .arg(ws.path())
        .args(["--settings", &settings(&[extra.path()])])
        .args(["--", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !started.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "never started");
        assert!(child.try_wait().unwrap().is_none(), "the sandbox ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let planted = extra.join("planted");
    std::fs::copy("/bin/sh", &planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o6755)).unwrap();
    std::fs::write(&go, "").unwrap();
    assert!(child.wait().unwrap().success());
    let mode = std::fs::metadata(&planted).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755, "the sweep left {mode:o}");
}

#[test]
fn a_setuid_file_in_an_additional_directory_is_stripped_local() {
    a_setuid_file_in_an_additional_directory_is_stripped(Backend::Local);
}

#[test]
fn a_setuid_file_in_an_additional_directory_is_stripped_docker() {
    if docker_or_skip() {
        a_setuid_file_in_an_additional_directory_is_stripped(Backend::Docker);
    }
}

/// Inside the additional directory: a protected path (`.bashrc`) cannot be made, a name
/// hard-linked to a file outside cannot be written through, a plain file can; a git hook
/// planted in a new `.git` is moved out of `hooks/` at teardown (the git vetting), and the
/// placeholders are gone.
fn an_additional_directory_keeps_the_workspace_protections(backend: Backend) {
    let ws = Workspace::new();
    let extra = Workspace::new();
    let outside = Workspace::new();
    std::fs::write(outside.join("victim"), "original\n").unwrap();
    std::fs::hard_link(outside.join("victim"), extra.join("linked")).unwrap();
    let d = extra.path().display();
    let script = format!(
        "echo planted > {d}/.bashrc || echo REFUSED-bashrc; \
         mkdir -p {d}/.git/hooks && echo '#!/bin/sh' > {d}/.git/hooks/pre-commit; \
         echo changed >> {d}/linked || echo REFUSED-linked; \
         echo plain > {d}/plain.txt && echo WROTE-plain"
    );
    let run = sandbox_with(
        backend,
        ws.path(),
        &["--settings", &settings(&[extra.path()])],
        &["sh", "-c", &script],
    );
    for marker in ["REFUSED-bashrc", "REFUSED-linked", "WROTE-plain"] {
        assert!(run.stdout.contains(marker), "{marker}: {run:?}");
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("victim")).unwrap(),
        "original\n"
    );
    let mut names: Vec<String> = std::fs::read_dir(extra.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".git", "linked", "plain.txt"], "{run:?}");
    assert!(
        !extra.join(".git/hooks/pre-commit").exists(),
        "the planted hook stayed: {run:?}"
    );
}

#[test]
fn an_additional_directory_keeps_the_workspace_protections_local() {
    an_additional_directory_keeps_the_workspace_protections(Backend::Local);
}

#[test]
fn an_additional_directory_keeps_the_workspace_protections_docker() {
    if docker_or_skip() {
        an_additional_directory_keeps_the_workspace_protections(Backend::Docker);
    }
}

/// A home directory, or a directory reached through a link, is refused before anything
/// starts, and the message names the setting and the path; one inside the workspace is
/// simply covered by it.
#[test]
fn a_refused_additional_directory_names_the_setting_and_the_path() {
    let ws = Workspace::new();
    let home = Workspace::new();
    let real = Workspace::new();
    let link = home.join("link");
    std::os::unix::fs::symlink(real.path(), &link).unwrap();
    let run = |dirs: &[&Path]| {
        let out = std::process::Command::new(cordon_bin())
            .args(["sandbox", "--workspace"])
            .arg(ws.path())
            .args(["--settings", &settings(dirs)])
            .args(["--", "sh", "-c", "echo RAN"])
            .env("HOME", home.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (dir, why) in [
        (home.path(), "home directory"),
        (link.as_path(), "symbolic link"),
    ] {
        let (code, stdout, stderr) = run(&[dir]);
        assert_ne!(code, Some(0), "{stdout}{stderr}");
        assert!(!stdout.contains("RAN"), "{stdout}");
        let named = format!(
            "refusing the permissions.additionalDirectories entry {}",
            dir.display()
        );
        assert!(stderr.contains(&named), "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
    }
    std::fs::create_dir(ws.join("sub")).unwrap();
    let (code, stdout, stderr) = run(&[&ws.join("sub")]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("RAN"), "{stdout}");
}

/// Runs `echo RAN` in a sandbox of `backend` with `dirs` as additional directories:
/// (exit code, stdout, stderr).
fn run_with(backend: Backend, ws: &Path, dirs: &[&Path]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(cordon_bin())
        .args(["sandbox", "--backend", backend.name(), "--workspace"])
        .arg(ws)
        .args(["--settings", &settings(dirs)])
        .args(["--", "sh", "-c", "echo RAN"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `dir` is refused before anything runs, the message naming the setting, the path and
/// one of `whys`.
fn assert_refused(backend: Backend, ws: &Path, dir: &Path, whys: &[&str]) {
    let (code, stdout, stderr) = run_with(backend, ws, &[dir]);
    assert_ne!(code, Some(0), "{}: {stdout}{stderr}", dir.display());
    assert!(!stdout.contains("RAN"), "{stdout}");
    let named = format!(
        "refusing the permissions.additionalDirectories entry {}: ",
        dir.display()
    );
    assert!(stderr.contains(&named), "{stderr}");
    assert!(whys.iter().any(|w| stderr.contains(w)), "{stderr}");
}

/// A trusted repository (here `--settings`) naming a host directory gets nothing: system
/// directories (a user's own cgroup directory and /tmp included), root's home and its
/// dot-directories are refused whoever owns them, so no write lands there as host root.
fn host_directories_are_refused(backend: Backend) {
    let ws = Workspace::new();
    let own_tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(own_tmp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    for dir in [
        Path::new("/etc"),
        Path::new("/boot"),
        Path::new("/srv"),
        Path::new("/var/spool/cron"),
        Path::new("/sys/fs/cgroup"),
        Path::new("/usr/local"),
        Path::new("/tmp"),
        own_tmp.path(),
    ] {
        assert_refused(backend, ws.path(), dir, &["system directory"]);
    }
    assert_refused(backend, ws.path(), Path::new("/root"), &["home directory"]);
}

#[test]
fn host_directories_are_refused_local() {
    host_directories_are_refused(Backend::Local);
}

#[test]
fn host_directories_are_refused_docker() {
    if docker_or_skip() {
        host_directories_are_refused(Backend::Docker);
    }
}

/// A directory of another owner would be written as that owner (the idmap maps a tree's
/// owner to the sandbox user); one group or others may write, or below such an ancestor,
/// could be swapped by someone else. All refused. (Another owner needs host root.)
fn directories_others_own_or_may_change_are_refused(backend: Backend) {
    let ws = Workspace::new();
    let loose = Workspace::new();
    std::fs::create_dir(loose.join("inner")).unwrap();
    std::fs::set_permissions(loose.path(), std::fs::Permissions::from_mode(0o770)).unwrap();
    assert_refused(
        backend,
        ws.path(),
        loose.path(),
        &["group or others may write"],
    );
    assert_refused(backend, ws.path(), &loose.join("inner"), &["its ancestor"]);
    if nix::unistd::geteuid().is_root() {
        let theirs = Workspace::new();
        std::os::unix::fs::chown(theirs.path(), Some(4242), Some(4242)).unwrap();
        assert_refused(
            backend,
            ws.path(),
            theirs.path(),
            &["not by the workspace's owner"],
        );
    }
}

#[test]
fn directories_others_own_or_may_change_are_refused_local() {
    directories_others_own_or_may_change_are_refused(Backend::Local);
}

#[test]
fn directories_others_own_or_may_change_are_refused_docker() {
    if docker_or_skip() {
        directories_others_own_or_may_change_are_refused(Backend::Docker);
    }
}
