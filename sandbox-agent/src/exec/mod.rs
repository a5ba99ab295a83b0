//! Running commands: a fresh, confined process per call in its own session, output
//! streamed and capped, a timeout, and the whole process tree killed on timeout, cancel,
//! shutdown or when the controller goes away.
//!
//! # Layout
//!
//! - [`spawn`]: program, environment, working directory, pre-exec confinement.
//! - [`output`]: the output cap and the full-output file.
//! - [`kill`]: the registry of running commands, tree killing, orphan reaping.
//! - `driver` (here): one task per command that streams output and decides its end.
//!
//! Where the backend delegated per-command cgroups ([`crate::cgroup::slots`]), each
//! command runs in its own and is killed through it (nothing can outrun that); else the
//! tree is killed by /proc scans in rounds ([`kill`]).
//!
//! Decisions: a timeout above the maximum is refused (InvalidRequest), not clamped; when
//! the command's leader exits, whatever it left behind (background jobs, daemons) is
//! killed, so no process outlives its call; the session directory follows the shell's
//! final directory only when the command changed directory.

pub mod clone_into;
pub mod disk;
pub mod kill;
pub mod output;
pub mod spawn;

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::Stream;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::{Mutex, mpsc};

use crate::cgroup::slots::{ExecSlots, Lease, SLOT_COUNT};
use crate::config::AgentConfig;
use crate::confine::{ChildFilter, ChildLimits, sys};
use crate::error::{AgentError, ErrorCode};
use crate::limits;
use crate::proto::*;
use disk::DiskBudget;
use output::OutputCap;
use spawn::{Program, SpawnSpec};

pub type EventStream =
    Pin<Box<dyn Stream<Item = Result<ExecEvent, tonic::Status>> + Send + 'static>>;

/// After the leader exits, how long to wait for its pipes to close.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Starts, tracks and kills the commands of one agent.
#[derive(Debug)]
pub struct Executor {
    config: AgentConfig,
    shell: PathBuf,
    /// Distinguishes executors in one process (one per agent; several in tests).
    id: u64,
    /// Installed in every child before exec (see [`crate::confine::child_filter`]).
    child_filter: Arc<ChildFilter>,
    /// Per-command cgroups, where the backend delegated them.
    slots: Option<Arc<ExecSlots>>,
    /// The workspace disk budget, when one is set.
    disk: Option<Arc<DiskBudget>>,
}

impl Executor {
    /// Makes the agent a child subreaper (orphans of commands reparent to it, so they can
    /// be found and killed) and starts the orphan reaper.
    pub fn new(config: &AgentConfig) -> Self {
        if let Err(e) = sys::set_child_subreaper() {
            tracing::warn!("cannot become a child subreaper: {e}; orphans escape to init");
        }
        kill::start_reaper();
        static IDS: AtomicU64 = AtomicU64::new(0);
        Self {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            config: config.clone(),
            shell: spawn::find_shell(),
            child_filter: Arc::default(),
            slots: None,
            disk: config
                .disk_budget_bytes
                .map(|b| Arc::new(DiskBudget::new(&config.workspace, b))),
        }
    }

    /// Runs every command in its own cgroup from `slots` (see [`crate::cgroup::slots`]).
    pub fn with_slots(mut self, slots: Option<Arc<ExecSlots>>) -> Self {
        self.slots = slots;
        self
    }

    /// A free per-command cgroup, if this executor has them.
    fn lease(&self) -> Result<Option<Arc<Lease>>, AgentError> {
        let Some(slots) = &self.slots else {
            return Ok(None);
        };
        match slots.acquire() {
            Some(lease) => Ok(Some(Arc::new(lease))),
            None => Err(AgentError::new(
                ErrorCode::TooLarge,
                format!("more than {SLOT_COUNT} commands at once; wait for one to end"),
            )),
        }
    }

    /// Every child this executor starts installs `filter` just before exec.
    pub fn with_child_filter(mut self, filter: ChildFilter) -> Self {
        self.child_filter = Arc::new(filter);
        self
    }

    pub async fn start(
        &self,
        req: ExecRequest,
        cwd: Arc<Mutex<PathBuf>>,
    ) -> Result<EventStream, AgentError> {
        validate(&req)?;
        let stdin = Stdin::Bytes(req.stdin.clone());
        self.start_with(req, stdin, cwd).await
    }

    /// Starts a long-lived command whose stdin is fed from `stdin` while it runs (closed
    /// when the sender side is dropped). Its stdout is streamed whole, never capped.
    pub async fn start_interactive(
        &self,
        mut req: ExecRequest,
        stdin: mpsc::Receiver<Vec<u8>>,
        cwd: Arc<Mutex<PathBuf>>,
    ) -> Result<EventStream, AgentError> {
        if !req.stdin.is_empty() {
            return Err(AgentError::invalid(
                "an interactive exec takes its stdin from the input stream, not the request",
            ));
        }
        if req.timeout_ms > limits::MAX_INTERACTIVE_TIMEOUT_MS {
            return Err(AgentError::invalid(format!(
                "timeout_ms {} is over the interactive maximum of {}",
                req.timeout_ms,
                limits::MAX_INTERACTIVE_TIMEOUT_MS
            )));
        }
        let timeout_ms = match req.timeout_ms {
            0 => limits::MAX_INTERACTIVE_TIMEOUT_MS,
            t => t,
        };
        // Checked against the ordinary limits with an ordinary timeout; the long one is
        // applied below.
        req.timeout_ms = 0;
        validate(&req)?;
        req.timeout_ms = timeout_ms;
        self.start_with(req, Stdin::Stream(stdin), cwd).await
    }

    async fn start_with(
        &self,
        req: ExecRequest,
        stdin: Stdin,
        cwd: Arc<Mutex<PathBuf>>,
    ) -> Result<EventStream, AgentError> {
        if let Some(disk) = &self.disk {
            let disk = disk.clone();
            tokio::task::spawn_blocking(move || disk.check())
                .await
                .map_err(|e| AgentError::internal(format!("disk check failed: {e}")))??;
        }
        // Process-wide, so markers never repeat across executors.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let exec_id = if req.exec_id.is_empty() {
            format!("anonymous-{n}")
        } else {
            req.exec_id.clone()
        };
        let marker = format!("{}-{n}", std::process::id());
        let start_cwd = self.start_cwd(&req, &cwd).await?;
        let state_dir = self.config.tmp_dir.join(".cordon");
        let program = if req.argv.is_empty() {
            let cwd_file = state_dir.join(format!("cwd-{marker}"));
            if let Err(e) = std::fs::create_dir_all(&state_dir) {
                tracing::warn!("cannot create {}: {e}", state_dir.display());
            }
            Program::Shell {
                shell: self.shell.clone(),
                command: req.command.clone(),
                cwd_file,
            }
        } else {
            Program::Argv(req.argv.clone())
        };
        let limits = ChildLimits::prepare(&self.config.rlimits)
            .map_err(|e| AgentError::internal(format!("cannot read rlimits: {e}")))?;
        let spec = SpawnSpec {
            slot: self.lease()?,
            owner: self.id,
            exec_id: exec_id.clone(),
            marker: marker.clone(),
            env: spawn::command_env(&self.config, &self.shell, &req.env, &marker),
            program,
            cwd: start_cwd.clone(),
            stdin: stdin.is_open(),
            limits,
            child_filter: self.child_filter.clone(),
        };
        let started_at = Instant::now();
        let (spec, started) = tokio::task::spawn_blocking(move || {
            let r = spawn::spawn(&spec);
            (spec, r)
        })
        .await
        .map_err(|e| AgentError::internal(format!("spawn task failed: {e}")))?;
        let started = started?;

        let timeout_ms = match req.timeout_ms {
            0 => limits::DEFAULT_EXEC_TIMEOUT_MS,
            t => t,
        };
        let output_limit = match req.output_limit {
            0 => limits::DEFAULT_OUTPUT_LIMIT_CHARS,
            l => l,
        };
        let interactive = matches!(stdin, Stdin::Stream(_));
        let log_path = state_dir.join(format!("exec-{}-{}.log", sanitize(&exec_id), marker));
        let (tx, rx) = mpsc::channel(8);
        let job = Job {
            exec_id,
            marker,
            spec,
            started,
            stdin,
            interactive,
            deadline: started_at + Duration::from_millis(timeout_ms),
            started_at,
            cap: OutputCap::new(output_limit, log_path),
            start_cwd,
            session_cwd: cwd,
            disk: self.disk.clone(),
            // Only where the backend runs the agent in a pid namespace of its own (it then
            // refuses visible peers): there kill(-1) reaches the sandbox alone. A command
            // with its own cgroup is already killed whole through it.
            sweep_namespace: self.config.require_outside_peer && self.slots.is_none(),
            tx,
        };
        tokio::spawn(job.run());
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }

    /// Cancels a running command; false when none has this id.
    pub fn cancel(&self, exec_id: &str) -> bool {
        kill::registry().cancel(exec_id)
    }

    /// Kills every running command's process tree now.
    pub fn kill_all(&self) {
        kill::registry().kill_all(self.id);
    }

    /// The request's directory, else the session's; a session directory that vanished
    /// falls back to the workspace.
    async fn start_cwd(
        &self,
        req: &ExecRequest,
        cwd: &Arc<Mutex<PathBuf>>,
    ) -> Result<PathBuf, AgentError> {
        let mut session = cwd.lock().await;
        if !req.cwd.is_empty() {
            let dir = session.join(&req.cwd);
            if !dir.is_dir() {
                return Err(AgentError::new(
                    ErrorCode::NotFound,
                    format!("working directory {} does not exist", dir.display()),
                )
                .with_path(dir.display().to_string()));
            }
            return Ok(dir);
        }
        if !session.is_dir() {
            *session = self.config.workspace.clone();
        }
        Ok(session.clone())
    }
}

/// Checks the request against the protocol's limits (public for the fuzz target).
pub fn validate(req: &ExecRequest) -> Result<(), AgentError> {
    let too_large = |what: String| Err(AgentError::new(ErrorCode::TooLarge, what));
    match (req.command.is_empty(), req.argv.is_empty()) {
        (false, false) => {
            return Err(AgentError::invalid("set either command or argv, not both"));
        }
        (true, true) => return Err(AgentError::invalid("set command or argv")),
        _ => {}
    }
    if req.exec_id.len() > limits::MAX_EXEC_ID_BYTES {
        return too_large(format!("exec_id over {} bytes", limits::MAX_EXEC_ID_BYTES));
    }
    let argv_bytes: usize = req.argv.iter().map(String::len).sum();
    if req.command.len() > limits::MAX_COMMAND_BYTES || argv_bytes > limits::MAX_COMMAND_BYTES {
        return too_large(format!("command over {} bytes", limits::MAX_COMMAND_BYTES));
    }
    if req.stdin.len() > limits::MAX_STDIN_BYTES {
        return too_large(format!("stdin over {} bytes", limits::MAX_STDIN_BYTES));
    }
    if req.env.len() > limits::MAX_ENV_ENTRIES {
        return too_large(format!("more than {} env entries", limits::MAX_ENV_ENTRIES));
    }
    if req.cwd.len() > limits::MAX_PATH_BYTES {
        return too_large(format!("cwd over {} bytes", limits::MAX_PATH_BYTES));
    }
    if req.timeout_ms > limits::MAX_EXEC_TIMEOUT_MS {
        return Err(AgentError::invalid(format!(
            "timeout_ms {} is over the maximum of {} (10 minutes)",
            req.timeout_ms,
            limits::MAX_EXEC_TIMEOUT_MS
        )));
    }
    let has_nul = |s: &str| s.contains('\0');
    if has_nul(&req.command) || req.argv.iter().any(|a| has_nul(a)) || has_nul(&req.cwd) {
        return Err(AgentError::invalid(
            "command, argv and cwd cannot contain NUL",
        ));
    }
    if req.argv.first().is_some_and(|a| a.is_empty()) {
        return Err(AgentError::invalid("argv[0] is empty"));
    }
    for (k, v) in &req.env {
        if k.is_empty() || k.contains('=') || has_nul(k) || has_nul(v) {
            return Err(AgentError::invalid(format!(
                "invalid environment variable name or value: {k:?}"
            )));
        }
    }
    Ok(())
}

/// Keeps file names tame: the exec id comes from the controller.
fn sanitize(id: &str) -> String {
    id.chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Where a command's standard input comes from.
enum Stdin {
    /// These bytes, then end of file (none: /dev/null).
    Bytes(Vec<u8>),
    /// Chunks as the controller sends them; end of file when the sender is gone.
    Stream(mpsc::Receiver<Vec<u8>>),
}

impl Stdin {
    fn is_open(&self) -> bool {
        match self {
            Self::Bytes(b) => !b.is_empty(),
            Self::Stream(_) => true,
        }
    }

    /// Feeds the command's stdin until the source ends or the command stops reading.
    async fn feed(self, mut sender: pipe::Sender) {
        use tokio::io::AsyncWriteExt;
        // A command that never reads its stdin is fine: the write fails or is dropped
        // with the task when the pipe closes.
        match self {
            Self::Bytes(data) => {
                let _ = sender.write_all(&data).await;
            }
            Self::Stream(mut rx) => {
                while let Some(chunk) = rx.recv().await {
                    if sender.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
            }
        }
    }
}

/// One running command and everything its driver needs.
struct Job {
    exec_id: String,
    marker: String,
    spec: SpawnSpec,
    started: spawn::Started,
    stdin: Stdin,
    /// A long-lived command talking over its pipes: stdout is passed on whole.
    interactive: bool,
    deadline: Instant,
    started_at: Instant,
    cap: OutputCap,
    start_cwd: PathBuf,
    session_cwd: Arc<Mutex<PathBuf>>,
    disk: Option<Arc<DiskBudget>>,
    /// Kill every leftover process in the agent's own pid namespace once no command runs
    /// (see [`kill::sweep_namespace_if_idle`]).
    sweep_namespace: bool,
    tx: mpsc::Sender<Result<ExecEvent, tonic::Status>>,
}

fn chunk(stream: output_chunk::Stream, data: Vec<u8>) -> ExecEvent {
    ExecEvent {
        event: Some(exec_event::Event::Output(OutputChunk {
            stream: stream as i32,
            data,
        })),
    }
}

fn receiver(fd: Option<impl Into<OwnedFd>>) -> Option<pipe::Receiver> {
    fd.and_then(|f| pipe::Receiver::from_owned_fd(f.into()).ok())
}

/// Reads one chunk; `None` at end of file or error, and never ready once the pipe is
/// gone (`None`), so a `select!` over several pipes waits on the rest. Also the one-shot
/// sandbox's output copy in the orchestrator.
pub async fn read_some(pipe: &mut Option<pipe::Receiver>, buf: &mut [u8]) -> Option<usize> {
    match pipe.as_mut() {
        Some(p) => match p.read(buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        },
        None => std::future::pending().await,
    }
}

impl Job {
    async fn run(mut self) {
        let leader = self.started.leader;
        let mut stdout = receiver(self.started.child.stdout.take());
        let mut stderr = receiver(self.started.child.stderr.take());
        if let Some(stdin) = self.started.child.stdin.take()
            && let Ok(sender) = pipe::Sender::from_owned_fd(stdin)
        {
            let source = std::mem::replace(&mut self.stdin, Stdin::Bytes(Vec::new()));
            tokio::spawn(source.feed(sender));
        }
        // Wait for the leader to exit without reaping it: its pid stays reserved while
        // the rest of its tree is killed.
        let exit_rx = leader_exit(leader);
        tokio::pin!(exit_rx);

        let mut timed_out = false;
        let mut abandoned = false;
        let mut exited = false;
        let mut drain_until = None;
        let mut out_buf = vec![0u8; limits::MAX_CHUNK_BYTES];
        let mut err_buf = vec![0u8; limits::MAX_CHUNK_BYTES];
        let cancel = self.started.cancel.clone();
        loop {
            if exited && stdout.is_none() && stderr.is_none() {
                break;
            }
            let drain_deadline = drain_until.unwrap_or(self.deadline);
            tokio::select! {
                n = read_some(&mut stdout, &mut out_buf) => match n {
                    Some(n) => self.output(output_chunk::Stream::Stdout, &out_buf[..n], abandoned).await,
                    None => stdout = None,
                },
                n = read_some(&mut stderr, &mut err_buf) => match n {
                    Some(n) => self.output(output_chunk::Stream::Stderr, &err_buf[..n], abandoned).await,
                    None => stderr = None,
                },
                _ = &mut exit_rx, if !exited => {
                    exited = true;
                    drain_until = Some(Instant::now() + DRAIN_GRACE);
                    self.kill_tree().await;
                }
                _ = tokio::time::sleep_until(self.deadline.into()), if !timed_out && !exited => {
                    timed_out = true;
                    self.kill_tree().await;
                }
                _ = tokio::time::sleep_until(drain_deadline.into()), if exited => {
                    // Something outside our reach still holds the pipes: stop reading.
                    stdout = None;
                    stderr = None;
                }
                _ = cancel.notified() => self.kill_tree().await,
                _ = self.tx.closed(), if !abandoned => {
                    // The controller went away (RPC cancelled): kill, reap, send nothing.
                    abandoned = true;
                    self.kill_tree().await;
                }
            }
        }
        let status = reap(leader).await;
        kill::registry().remove(&self.exec_id);
        if self.sweep_namespace {
            // One lock and one kill(2): cheap enough to make inline.
            kill::sweep_namespace_if_idle();
        }
        let cancelled = self.started.cancelled.load(Ordering::SeqCst);
        let cwd_after = self.cwd_after(!timed_out && !cancelled && !abandoned).await;
        if abandoned {
            return;
        }
        if let Some(disk) = self.disk.clone()
            && let Ok(Err(e)) = tokio::task::spawn_blocking(move || disk.check()).await
        {
            let note = format!("\ncordon: {}\n", e.message);
            self.output(output_chunk::Stream::Stderr, note.as_bytes(), false)
                .await;
        }
        let summary = std::mem::replace(&mut self.cap, OutputCap::new(0, PathBuf::new())).finish();
        if let Some(marker) = summary.marker {
            let _ = self
                .tx
                .send(Ok(chunk(output_chunk::Stream::Stdout, marker)))
                .await;
        }
        let (code, signal) = match status {
            Some(WaitStatus::Exited(_, c)) => (Some(c), None),
            Some(WaitStatus::Signaled(_, s, _)) => (None, Some(s as i32)),
            _ => (None, None),
        };
        let exit = ExitStatus {
            code,
            signal,
            timed_out,
            cancelled: cancelled && !timed_out,
            truncated: summary.truncated,
            full_output_path: summary
                .full_output_path
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            total_output_bytes: summary.total_bytes,
            cwd_after: cwd_after.display().to_string(),
            duration_ms: u64::try_from(self.started_at.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        let _ = self
            .tx
            .send(Ok(ExecEvent {
                event: Some(exec_event::Event::Exit(exit)),
            }))
            .await;
    }

    async fn output(&mut self, stream: output_chunk::Stream, data: &[u8], abandoned: bool) {
        if self.interactive && stream == output_chunk::Stream::Stdout {
            // The protocol stream of a long-lived command: every byte matters and none is
            // kept on disk. Stderr still goes through the cap (it is only for people).
            if !abandoned {
                let _ = self.tx.send(Ok(chunk(stream, data.to_vec()))).await;
            }
            return;
        }
        let streamed = self.cap.accept(data);
        if !streamed.is_empty() && !abandoned {
            let _ = self.tx.send(Ok(chunk(stream, streamed))).await;
        }
    }

    async fn kill_tree(&self) {
        let leader = self.started.leader;
        // The common case, a command that left nothing behind, is one quick check inline;
        // only a tree that needs killing goes to the blocking pool (it may take several
        // rounds, and a slot's kill waits for it to empty).
        if let Some(slot) = self.spec.slot.clone() {
            if kill::slot_left_empty(leader, &slot) {
                return;
            }
            let _ = tokio::task::spawn_blocking(move || kill::kill_slot(leader, &slot)).await;
            return;
        }
        if kill::nothing_left(leader, &self.marker) {
            return;
        }
        let marker = self.marker.clone();
        let _ = tokio::task::spawn_blocking(move || kill::kill_tree(leader, &marker)).await;
    }

    /// Reads the shell's final directory and carries it to the session when the command
    /// changed directory. Returns the directory the next call starts in.
    async fn cwd_after(&self, completed: bool) -> PathBuf {
        let mut session = self.session_cwd.lock().await;
        if let Program::Shell { cwd_file, .. } = &self.spec.program {
            let recorded = std::fs::read_to_string(cwd_file).ok();
            let _ = std::fs::remove_file(cwd_file);
            if completed && let Some(text) = recorded {
                let dir = PathBuf::from(text.trim_end_matches('\n'));
                if dir.is_absolute() && dir.is_dir() && dir != self.start_cwd {
                    *session = dir;
                }
            }
        }
        session.clone()
    }
}

/// Reaps the leader (already a zombie or about to be) and returns how it ended.
/// Resolves once `leader` has exited, leaving it unreaped (its pid stays reserved while
/// the rest of its tree is killed). A pidfd lets the runtime wait without a thread; where
/// the kernel has none, a blocking waitid on the blocking pool does the same.
async fn leader_exit(leader: i32) {
    if let Ok(fd) = sys::exit_watch(leader) {
        let _ = fd.readable().await;
        return;
    }
    let _ = tokio::task::spawn_blocking(move || {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        while let Err(nix::errno::Errno::EINTR) = waitid(Id::Pid(Pid::from_raw(leader)), flags) {}
    })
    .await;
}

/// Reaps the leader. Called only after it exited, so waitpid returns at once.
async fn reap(leader: i32) -> Option<WaitStatus> {
    loop {
        match waitpid(Pid::from_raw(leader), None) {
            Err(nix::errno::Errno::EINTR) => continue,
            r => return r.ok(),
        }
    }
}

#[cfg(test)]
mod tests;
