//! Helpers for the security battery's resource-limit cases: `cordon sandbox` under a
//! settings file that sets `sandbox.limits` (small limits keep the cases fast and
//! harmless), and a sandbox started through the library for cases that need several
//! calls in one session.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use cordon::sandbox::{BackendKind, Sandbox, SandboxSpec};
use sandbox_agent::AgentError;
use sandbox_agent::cgroup::SessionLimits;
use sandbox_agent::proto::{ExecRequest, ExitStatus};
use serde_json::Value;

use crate::{Backend, Run, cordon_bin};

/// A user settings file holding `{"sandbox": {"limits": limits}}`.
pub struct LimitSettings {
    dir: tempfile::TempDir,
}

impl LimitSettings {
    pub fn new(limits: Value) -> LimitSettings {
        let dir = tempfile::tempdir().expect("temp dir");
        let body = serde_json::json!({"sandbox": {"limits": limits}});
        std::fs::write(dir.path().join("settings.json"), body.to_string()).expect("settings");
        LimitSettings { dir }
    }

    /// `cordon sandbox` reading these settings as the user's (and no managed file).
    pub fn command(&self, backend: Backend, ws: &Path, argv: &[&str]) -> Command {
        let mut cmd = Command::new(cordon_bin());
        cmd.env(
            "CORDON_USER_SETTINGS",
            self.dir.path().join("settings.json"),
        )
        .env(
            "CORDON_MANAGED_SETTINGS",
            self.dir.path().join("no-managed.json"),
        )
        .arg("sandbox")
        .arg("--backend")
        .arg(backend.name())
        .arg("--workspace")
        .arg(ws)
        .arg("--")
        .args(argv)
        .stdin(Stdio::null());
        cmd
    }

    /// Runs `argv` to the end.
    pub fn run(&self, backend: Backend, ws: &Path, argv: &[&str]) -> Run {
        let out = self
            .command(backend, ws, argv)
            .output()
            .expect("run cordon sandbox");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Starts `argv` and returns at once (output piped).
    pub fn spawn(&self, backend: Backend, ws: &Path, argv: &[&str]) -> Child {
        self.command(backend, ws, argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start cordon sandbox")
    }
}

/// One sandbox kept across several commands, as a session's Bash calls are.
pub struct Session {
    rt: tokio::runtime::Runtime,
    sandbox: Option<Sandbox>,
    calls: u32,
}

impl Session {
    pub fn start(backend: Backend, ws: &Path) -> Session {
        Self::start_with(backend, ws, SessionLimits::default())
    }

    /// A session with `limits`.
    pub fn start_with(backend: Backend, ws: &Path, limits: SessionLimits) -> Session {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let kind = match backend {
            Backend::Local => BackendKind::Local,
            Backend::Docker => BackendKind::Docker,
        };
        let id = format!("limits-{}", uuid_like());
        let mut spec = SandboxSpec::new(id, ws);
        spec.limits = Some(limits);
        let sandbox = rt
            .block_on(cordon::sandbox::start(kind, &spec))
            .expect("start the sandbox");
        Session {
            rt,
            sandbox: Some(sandbox),
            calls: 0,
        }
    }

    fn request(&mut self, script: &str) -> ExecRequest {
        self.calls += 1;
        ExecRequest {
            exec_id: format!("call-{}", self.calls),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            timeout_ms: 60_000,
            ..Default::default()
        }
    }

    /// Runs `script` with `sh -c` as one call; its output and exit status.
    pub fn sh(&mut self, script: &str) -> (String, ExitStatus) {
        self.try_sh(script).expect("the call ran")
    }

    /// Like [`Self::sh`], with the agent's refusal as an error.
    pub fn try_sh(&mut self, script: &str) -> Result<(String, ExitStatus), AgentError> {
        let req = self.request(script);
        let mut client = self.sandbox.as_ref().expect("running").client.clone();
        let (out, status) = self.rt.block_on(client.exec_collect(req))?;
        Ok((String::from_utf8_lossy(&out).into_owned(), status))
    }

    /// Starts `script` as one call and returns at once; [`Self::finish`] waits for it.
    pub fn start_call(&mut self, script: &str) -> PendingCall {
        let req = self.request(script);
        let mut client = self.sandbox.as_ref().expect("running").client.clone();
        PendingCall(self.rt.spawn(async move { client.exec_collect(req).await }))
    }

    /// Waits for a call [`Self::start_call`] started; its output and exit status.
    pub fn finish(&self, call: PendingCall) -> (String, ExitStatus) {
        let (out, status) = self
            .rt
            .block_on(call.0)
            .expect("the call's task")
            .expect("the call ran");
        (String::from_utf8_lossy(&out).into_owned(), status)
    }

    /// Runs `script` while another call, `beside`, runs too (as concurrent tool calls
    /// do); returns `script`'s output and status once both ended.
    pub fn sh_beside(&mut self, beside: &str, script: &str) -> (String, ExitStatus) {
        self.sh_both(beside, script).1
    }

    /// Runs two scripts at once, each in its own call; both outputs and exit statuses.
    pub fn sh_both(&mut self, a: &str, b: &str) -> ((String, ExitStatus), (String, ExitStatus)) {
        let (a, b) = (self.request(a), self.request(b));
        let client = self.sandbox.as_ref().expect("running").client.clone();
        let (mut ca, mut cb) = (client.clone(), client);
        let ((oa, sa), (ob, sb)) = self.rt.block_on(async move {
            let (ra, rb) = tokio::join!(ca.exec_collect(a), cb.exec_collect(b));
            (
                ra.expect("the first call ran"),
                rb.expect("the second call ran"),
            )
        });
        let text = |o: Vec<u8>| String::from_utf8_lossy(&o).into_owned();
        ((text(oa), sa), (text(ob), sb))
    }
}

/// A call running in a [`Session`], started by [`Session::start_call`].
pub struct PendingCall(tokio::task::JoinHandle<Result<(Vec<u8>, ExitStatus), AgentError>>);

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            let _ = self.rt.block_on(sandbox.destroy());
        }
    }
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}
