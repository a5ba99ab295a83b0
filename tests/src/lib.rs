//! Shared fixtures for the end-to-end tests: where the built binaries are, throwaway
//! workspaces, and running a command through `cordon sandbox`.
// Test support: a failed setup step should panic with its message, which is the report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The scripted Messages API server lives in the orchestrator (the offline demo uses it);
/// tests reach it under its old name.
pub use cordon::scripted as scripted_model;

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

pub fn probe_bin() -> PathBuf {
    built_binary("escape-probe")
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

    /// Copies the escape probe into the workspace so it can run inside any image.
    pub fn with_probe(&self) -> PathBuf {
        let dst = self.join("escape-probe");
        std::fs::copy(probe_bin(), &dst).expect("copy probe");
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

/// Processes on the host whose command line contains `marker`.
pub fn host_processes_matching(marker: &str) -> Vec<(u32, String)> {
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
        if cmdline.contains(marker) {
            found.push((pid, cmdline));
        }
    }
    found
}
