//! Running a Python script on the pinned Claude Agent SDK against `cordon`: the virtual
//! environment tests/sdk/setup.sh prepares, and one script run with the scripted model's
//! environment, its output kept in files so a hung session still shows what happened.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use crate::scripted_model::ScriptedModel;
use crate::{bin_dir, cordon_bin, repo_root};

/// The venv's python, after tests/sdk/setup.sh made sure the pinned SDK is installed.
/// Setup failing is a test failure (PyPI is reachable where this runs), except when
/// CORDON_SDK_TEST=skip says to skip, loudly.
pub fn sdk_python() -> Option<PathBuf> {
    if std::env::var("CORDON_SDK_TEST").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: the Agent SDK test (CORDON_SDK_TEST=skip)");
        return None;
    }
    let out = std::process::Command::new(repo_root().join("tests/sdk/setup.sh"))
        .env("CORDON_SDK_VENV", sdk_venv())
        .stderr(Stdio::inherit())
        .output()
        .expect("run tests/sdk/setup.sh");
    assert!(
        out.status.success(),
        "tests/sdk/setup.sh failed (python3 -m venv and pip install claude-agent-sdk are needed; \
         set CORDON_SDK_TEST=skip to skip this test knowingly)"
    );
    let python = String::from_utf8(out.stdout).unwrap().trim().to_string();
    Some(PathBuf::from(python))
}

/// Where the SDK's virtual environment is: `$CORDON_SDK_VENV`, else `target/sdk-venv`.
pub fn sdk_venv() -> PathBuf {
    std::env::var_os("CORDON_SDK_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| bin_dir().parent().unwrap().join("sdk-venv"))
}

/// How a script run ended, and what it printed.
#[derive(Debug)]
pub struct ScriptRun {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ScriptRun {
    /// Panics with the output unless the script exited 0; prints its checks either way.
    pub fn assert_success(&self, script: &str) {
        println!("{script}:\n{}", self.stdout);
        assert!(
            self.status.success(),
            "{script} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
    }
}

/// Runs tests/sdk/`script` with `python` in `workspace` (also `SDK_WORKSPACE`), `cordon`
/// as `CORDON_BIN`, the model's environment and `CORDON_HOME=home`, plus `env`. Panics
/// when it runs past `CORDON_SDK_TIMEOUT` seconds (240 by default), with its output.
pub async fn run_script(
    python: &Path,
    script: &str,
    workspace: &Path,
    model: &ScriptedModel,
    home: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> ScriptRun {
    run_script_with_args(python, script, &[], workspace, model, home, env).await
}

/// [`run_script`] with arguments for the script (a scenario's name, say).
pub async fn run_script_with_args(
    python: &Path,
    script: &str,
    args: &[&str],
    workspace: &Path,
    model: &ScriptedModel,
    home: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> ScriptRun {
    let logs = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(repo_root().join("tests/sdk").join(script))
        .args(args)
        .current_dir(workspace)
        .env("CORDON_BIN", cordon_bin())
        .env("SDK_WORKSPACE", workspace)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("ANTHROPIC_MODEL")
        .env_remove("CLAUDE_AGENT_SDK_SKIP_VERSION_CHECK")
        .env("CORDON_HOME", home)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .kill_on_drop(true);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let mut child = cmd.spawn().unwrap();
    let limit = std::env::var("CORDON_SDK_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(240);
    let status = tokio::time::timeout(Duration::from_secs(limit), child.wait()).await;
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let Ok(status) = status else {
        panic!("the SDK session of {script} hung\nstdout:\n{stdout}\nstderr:\n{stderr}");
    };
    ScriptRun {
        status: status.unwrap(),
        stdout,
        stderr,
    }
}
