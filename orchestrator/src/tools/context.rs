//! [`ToolContext`]: what every tool call of one session shares: the sandbox agent client,
//! the read-state (which files the model has Read, and what they held then), the
//! workspace path, and the interrupt signal that cancels a running command.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use sandbox_agent::client::AgentClient;
use tokio::sync::watch;

use super::background::BackgroundShells;
use crate::sandbox::Supervisor;

/// What a file held when the model last saw it (read it, or wrote it through a tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// Content digest, hex.
    pub sha256: String,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
}

/// Why a change to a file is refused before it reaches the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StampRefusal {
    /// The model never read the file in this session.
    NotRead,
    /// The file's content differs from what the model read.
    Changed,
}

/// The files the model has seen in this session. Edit and Write consult it so that the
/// model never changes a file it has not looked at, or one changed behind its back.
#[derive(Debug, Default)]
pub struct ReadState {
    // A std Mutex: held only for a map operation, never across an await.
    files: Mutex<HashMap<PathBuf, FileStamp>>,
}

impl ReadState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records what `path` holds now (after a Read, Write or Edit).
    pub fn record(&self, path: &Path, stamp: FileStamp) {
        self.lock().insert(path.to_path_buf(), stamp);
    }

    pub fn get(&self, path: &Path) -> Option<FileStamp> {
        self.lock().get(path).cloned()
    }

    pub fn forget(&self, path: &Path) {
        self.lock().remove(path);
    }

    /// Edit's precondition: the file was read; returns the stamp to send as the expected
    /// digest (the agent compares it against the file under its own lock).
    pub fn for_edit(&self, path: &Path) -> Result<FileStamp, StampRefusal> {
        self.get(path).ok_or(StampRefusal::NotRead)
    }

    /// Write's precondition given the digest of the file on disk (`None`: no file there).
    /// New files are fine; replacing an existing one needs a prior Read of that content.
    pub fn for_write(&self, path: &Path, current_sha256: Option<&str>) -> Result<(), StampRefusal> {
        let Some(current) = current_sha256 else {
            return Ok(());
        };
        match self.get(path) {
            None => Err(StampRefusal::NotRead),
            Some(stamp) if !stamp.sha256.eq_ignore_ascii_case(current) => {
                Err(StampRefusal::Changed)
            }
            Some(_) => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, FileStamp>> {
        // A panic while holding the lock cannot leave the map half-updated (single
        // insert/remove), so a poisoned lock is still sound to use.
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The sending half of a session's interrupt signal, held by whoever can interrupt (the
/// client connection, Ctrl-C handler). Each `interrupt()` cancels the commands running
/// at that moment; calls started later run normally.
#[derive(Debug, Clone)]
pub struct Interrupter {
    tx: Arc<watch::Sender<u64>>,
}

impl Interrupter {
    pub fn interrupt(&self) {
        self.tx
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }
}

/// Where a session's agent client comes from.
#[derive(Clone)]
enum AgentSource {
    /// One sandbox for the context's whole life (tests, one-shot tools).
    Fixed(Box<AgentClient>),
    /// A sandbox replaced when it dies.
    Supervised(Arc<Supervisor>),
}

/// Everything a tool call of one session needs.
#[derive(Clone)]
pub struct ToolContext {
    source: AgentSource,
    /// Variables every command of the session gets (the settings' `env`).
    env: Arc<HashMap<String, String>>,
    read_state: Arc<ReadState>,
    workspace: PathBuf,
    interrupts: watch::Receiver<u64>,
    /// The `tool_use` id of the call this context was handed to (set per call).
    tool_use_id: Option<Arc<str>>,
    /// The session's background shells (a sub-agent's are the session's too).
    background: Arc<BackgroundShells>,
}

impl ToolContext {
    /// A context for a session whose sandbox answers on `client`, and the handle that
    /// interrupts its running commands.
    pub fn new(client: AgentClient, workspace: impl Into<PathBuf>) -> (Self, Interrupter) {
        Self::with_source(AgentSource::Fixed(Box::new(client)), workspace.into())
    }

    /// A context whose sandbox `supervisor` keeps alive: a call after the sandbox died
    /// runs in a fresh one.
    pub fn supervised(
        supervisor: Arc<Supervisor>,
        workspace: impl Into<PathBuf>,
    ) -> (Self, Interrupter) {
        Self::with_source(AgentSource::Supervised(supervisor), workspace.into())
    }

    fn with_source(source: AgentSource, workspace: PathBuf) -> (Self, Interrupter) {
        let (tx, rx) = watch::channel(0u64);
        let ctx = Self {
            source,
            env: Arc::default(),
            read_state: Arc::new(ReadState::new()),
            workspace,
            interrupts: rx,
            tool_use_id: None,
            background: Arc::default(),
        };
        (ctx, Interrupter { tx: Arc::new(tx) })
    }

    /// The same session with another read-state (e.g. one restored from a transcript, or
    /// a fresh one for a subagent).
    pub fn with_read_state(mut self, read_state: Arc<ReadState>) -> Self {
        self.read_state = read_state;
        self
    }

    /// The same session whose commands (Bash, hooks in the sandbox) get `env` on top of
    /// the sandbox's base environment: the settings' `env`, as Claude Code applies it.
    pub fn with_env(mut self, env: HashMap<String, String>) -> Self {
        self.env = Arc::new(env);
        self
    }

    /// The same session whose interrupt signal is `interrupts` (a sub-agent's own, which
    /// the session's interrupts reach too).
    pub fn with_interrupts(mut self, interrupts: watch::Receiver<u64>) -> Self {
        self.interrupts = interrupts;
        self
    }

    /// The same session, handed to the call with this `tool_use` id.
    pub fn for_call(&self, tool_use_id: &str) -> Self {
        let mut ctx = self.clone();
        ctx.tool_use_id = Some(tool_use_id.into());
        ctx
    }

    /// The `tool_use` id of the running call (the Agent tool marks its sidechain with it).
    pub fn tool_use_id(&self) -> Option<&str> {
        self.tool_use_id.as_deref()
    }

    /// Variables every command of the session gets.
    pub fn env(&self) -> &HashMap<String, String> {
        &self.env
    }

    /// A client for one call (tonic clients are cheap clones over one connection).
    pub fn client(&self) -> AgentClient {
        match &self.source {
            AgentSource::Fixed(client) => (**client).clone(),
            AgentSource::Supervised(sup) => sup.client(),
        }
    }

    /// Before a call that needs the sandbox: replaces a sandbox that died since the last
    /// call. `Ok(Some(notice))` when it did; `Err` (for the model) when none could start.
    pub async fn ensure_sandbox(&self) -> Result<Option<String>, String> {
        match &self.source {
            AgentSource::Fixed(_) => Ok(None),
            AgentSource::Supervised(sup) => sup.ensure_alive().await.map_err(|e| {
                format!(
                    "the sandbox had stopped and a fresh one could not be started: {e}; \
                     a later call will try again"
                )
            }),
        }
    }

    /// After a call that failed: whether the sandbox itself is gone (the failure was its
    /// death, not the call's own). The next call then gets a fresh sandbox.
    pub async fn sandbox_died(&self) -> bool {
        match &self.source {
            AgentSource::Fixed(_) => false,
            AgentSource::Supervised(sup) => sup.check_after_failure().await,
        }
    }

    /// The session's background shells (Bash `run_in_background`).
    pub fn background(&self) -> &Arc<BackgroundShells> {
        &self.background
    }

    pub fn read_state(&self) -> &Arc<ReadState> {
        &self.read_state
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// A receiver that sees interrupts sent from now on (earlier ones are marked seen).
    pub fn interrupt_signal(&self) -> watch::Receiver<u64> {
        let mut rx = self.interrupts.clone();
        rx.borrow_and_update();
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(sha: &str) -> FileStamp {
        FileStamp {
            sha256: sha.into(),
            mtime_ns: 1,
        }
    }

    #[test]
    fn edit_needs_a_prior_read() {
        let state = ReadState::new();
        let p = Path::new("/w/a.rs");
        assert_eq!(state.for_edit(p), Err(StampRefusal::NotRead));
        state.record(p, stamp("aa"));
        assert_eq!(state.for_edit(p), Ok(stamp("aa")));
        state.forget(p);
        assert_eq!(state.for_edit(p), Err(StampRefusal::NotRead));
    }

    #[test]
    fn write_creates_freely_but_replaces_only_what_was_read_unchanged() {
        let state = ReadState::new();
        let p = Path::new("/w/a.rs");
        assert_eq!(state.for_write(p, None), Ok(()));
        assert_eq!(state.for_write(p, Some("aa")), Err(StampRefusal::NotRead));
        state.record(p, stamp("aa"));
        assert_eq!(state.for_write(p, Some("AA")), Ok(()));
        assert_eq!(state.for_write(p, Some("bb")), Err(StampRefusal::Changed));
    }

    #[test]
    fn stamps_are_per_path() {
        let state = ReadState::new();
        state.record(Path::new("/w/a"), stamp("aa"));
        assert_eq!(
            state.for_edit(Path::new("/w/b")),
            Err(StampRefusal::NotRead)
        );
    }
}
