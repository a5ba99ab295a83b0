//! Running the pinned Python claude-agent-sdk (tests/sdk/setup.sh installs it into a
//! virtual environment) against `cordon`: finding the venv's python and running one of
//! the tests/sdk scripts with the scripted model's endpoint, output kept in files so a
//! hung session still shows what happened.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The venv's python, after tests/sdk/setup.sh made sure the pinned SDK is installed.
/// Setup failing is a test failure (PyPI is reachable where this runs), except when
/// CORDON_SDK_TEST=skip says to skip, loudly.
pub fn python() -> Option<PathBuf> {
    if std::env::var("CORDON_SDK_TEST").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: the Agent SDK test (CORDON_SDK_TEST=skip)");
        return None;
    }
    let venv = std::env::var_os("CORDON_SDK_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::bin_dir().parent().unwrap().join("sdk-venv"));
    let out = std::process::Command::new(crate::repo_root().join("tests/sdk/setup.sh"))
        .env("CORDON_SDK_VENV", &venv)
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

/// One run of an SDK script: how it ended and what it printed.
pub struct ScriptRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl ScriptRun {
    /// Panics with both outputs unless the script exited 0.
    pub fn assert_success(&self, what: &str) {
        assert!(
            self.success,
            "{what} failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
    }
}

/// Runs `tests/sdk/{script}` with `args` in `workspace`, against the model at `base_url`,
/// with `CORDON_HOME` at `home`, CORDON_BIN and SDK_WORKSPACE set, plus `env`. Panics
/// when it hangs past CORDON_SDK_TIMEOUT seconds (240).
pub async fn run_script(
    python: &Path,
    script: &str,
    args: &[&str],
    workspace: &Path,
    base_url: &str,
    home: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> ScriptRun {
    let logs = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
    let mut command = tokio::process::Command::new(python);
    command
        .arg(crate::repo_root().join("tests/sdk").join(script))
        .args(args)
        .current_dir(workspace)
        .env("CORDON_BIN", crate::cordon_bin())
        .env("SDK_WORKSPACE", workspace)
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("ANTHROPIC_MODEL")
        .env("CORDON_HOME", home)
        // Cordon is not Claude Code and reports no claude_code_version.
        .env("CLAUDE_AGENT_SDK_SKIP_VERSION_CHECK", "1");
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let timeout = std::env::var("CORDON_SDK_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(240);
    let status = tokio::time::timeout(Duration::from_secs(timeout), child.wait()).await;
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let Ok(status) = status else {
        panic!("the SDK session hung\nstdout:\n{stdout}\nstderr:\n{stderr}");
    };
    ScriptRun {
        success: status.unwrap().success(),
        stdout,
        stderr,
    }
}
