//! A session's sandbox over its whole life: when the agent or its container dies (killed,
//! out of memory, the Docker daemon restarted), the call that was running fails with a
//! result saying so, and the next call runs in a fresh sandbox on the same workspace.
//!
//! Death is noticed two ways: the backend's handle reports it (the launcher exited, the
//! container stopped), or a call failed and a one-second probe of the agent gets no answer
//! (a wedged agent, or a Docker daemon that is still restarting and has not yet said the
//! container stopped). A restart first tears the old sandbox down, then starts a new one,
//! retrying with backoff for [`RESTART_BUDGET`]: long enough for a daemon restart.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use sandbox_agent::client::AgentClient;

use super::{Backend, Sandbox, SandboxError, SandboxSpec};

/// How long a restart keeps trying before the call gets an error (a later call tries again).
pub const RESTART_BUDGET: Duration = Duration::from_secs(60);
/// How long a probe of a suspect agent may take before the sandbox counts as gone.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long tearing a dead sandbox down may take before the restart goes on without it.
const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// One session's sandbox, restarted on demand.
pub struct Supervisor {
    backend: Arc<dyn Backend>,
    spec: SandboxSpec,
    /// The live sandbox; `None` only after [`Supervisor::destroy`] or a failed restart.
    current: tokio::sync::Mutex<Option<Sandbox>>,
    /// The current agent's client, readable without the async lock.
    client: RwLock<AgentClient>,
    /// A call failed and the probe got no answer: restart before the next call.
    suspect: AtomicBool,
    /// Set by [`Supervisor::destroy`]: nothing starts a sandbox for this session again.
    closed: AtomicBool,
    restarts: AtomicU32,
    /// The first sandbox came from a warm pool.
    started_warm: bool,
}

impl Supervisor {
    /// Starts the first sandbox for `spec` on `backend`.
    pub async fn start(
        backend: Arc<dyn Backend>,
        spec: SandboxSpec,
    ) -> Result<Arc<Self>, SandboxError> {
        let sandbox = backend.start(&spec).await?;
        Ok(Arc::new(Self {
            started_warm: sandbox.warm,
            client: RwLock::new(sandbox.client.clone()),
            current: tokio::sync::Mutex::new(Some(sandbox)),
            backend,
            spec,
            suspect: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            restarts: AtomicU32::new(0),
        }))
    }

    /// The current agent's client (a cheap clone over one connection).
    pub fn client(&self) -> AgentClient {
        self.client
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the first sandbox was taken from a warm pool.
    pub fn started_warm(&self) -> bool {
        self.started_warm
    }

    /// How many times the sandbox was replaced.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::SeqCst)
    }

    pub fn spec(&self) -> &SandboxSpec {
        &self.spec
    }

    /// The backend the sandbox runs on.
    pub fn kind(&self) -> super::BackendKind {
        self.backend.kind()
    }

    /// Before a call: makes sure a live sandbox answers, starting a fresh one when the last
    /// died. Returns a notice for the model when it did.
    pub async fn ensure_alive(&self) -> Result<Option<String>, SandboxError> {
        let mut current = self.current.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return Err(SandboxError::Closed);
        }
        let alive = current.as_ref().is_some_and(|s| s.handle.is_alive());
        if alive && !self.suspect.load(Ordering::SeqCst) {
            return Ok(None);
        }
        if let Some(dead) = current.take() {
            // Best effort: a daemon that is down cannot remove the container now; the
            // backend clears a leftover of this session when it starts the next one.
            let _ = tokio::time::timeout(TEARDOWN_TIMEOUT, dead.handle.destroy()).await;
        }
        let started = Instant::now();
        let mut pause = Duration::from_millis(100);
        let fresh = loop {
            match self.backend.start(&self.spec).await {
                Ok(s) => break s,
                Err(e) if started.elapsed() + pause > RESTART_BUDGET => return Err(e),
                Err(e) => {
                    tracing::warn!(session = %self.spec.session_id, error = %e,
                        "restarting the sandbox failed; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        };
        *self.client.write().unwrap_or_else(PoisonError::into_inner) = fresh.client.clone();
        *current = Some(fresh);
        self.suspect.store(false, Ordering::SeqCst);
        let n = self.restarts.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::info!(session = %self.spec.session_id, restarts = n, "sandbox restarted");
        Ok(Some(
            "The previous sandbox had stopped; this call ran in a fresh sandbox on the same \
             workspace (files are kept; processes, the shell's directory and /tmp are not)."
                .into(),
        ))
    }

    /// After a call failed: whether the sandbox is gone (its handle says so, or the agent
    /// does not answer a probe). If so, the next [`Supervisor::ensure_alive`] replaces it.
    pub async fn check_after_failure(&self) -> bool {
        let alive = {
            let current = self.current.lock().await;
            current.as_ref().is_some_and(|s| s.handle.is_alive())
        };
        let answers = alive
            && matches!(
                tokio::time::timeout(PROBE_TIMEOUT, self.client().cancel("cordon-probe")).await,
                Ok(Ok(_))
            );
        if !answers {
            self.suspect.store(true, Ordering::SeqCst);
        }
        !answers
    }

    /// Runs `work` (blocking host-side work on the workspace: a snapshot, a rewind) while no
    /// sandbox process runs: the sandbox is frozen for its duration, and no call can
    /// restart the sandbox meanwhile (the same lock). A dead sandbox has no process left,
    /// so `work` then runs as is.
    pub async fn frozen<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, SandboxError> {
        let current = self.current.lock().await;
        let live = current.as_ref().filter(|s| s.handle.is_alive());
        if let Some(sandbox) = live {
            sandbox.handle.freeze().await?;
        }
        let out = tokio::task::spawn_blocking(work).await;
        if let Some(sandbox) = live
            && let Err(e) = sandbox.handle.thaw().await
        {
            tracing::warn!(session = %self.spec.session_id, error = %e, "thawing the sandbox failed");
            self.suspect.store(true, Ordering::SeqCst);
        }
        out.map_err(|e| SandboxError::Setup {
            step: "host-side work on the frozen workspace",
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// Ends the session's sandbox.
    pub async fn destroy(&self) -> Result<(), SandboxError> {
        let mut current = self.current.lock().await;
        self.closed.store(true, Ordering::SeqCst);
        match current.take() {
            Some(sandbox) => sandbox.destroy().await,
            None => Ok(()),
        }
    }
}
