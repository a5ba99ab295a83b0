//! One server session and its lifecycle.
//!
//! States are explicit and never stick: `starting` (the sandbox is coming up), `idle`
//! (ready, nothing queued), `running` (a turn is under way or queued), `paused` (past its
//! idle time: sandbox gone, workspace and transcript kept; the next call resumes it),
//! `ended` (deleted or past its TTL; final) and `failed` (a start failed: the reason is
//! kept, and the next call tries again, or the session can be deleted). Every change is
//! written to the store and sent as a `lifecycle` event.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::interactive::always::SessionRules;
use crate::permissions::{Engine, PermissionMode};
use crate::sandbox::{BackendKind, Supervisor};
use crate::tools::{Interrupter, ToolContext};

use super::errors::ApiError;
use super::events::EventLog;
use super::prompter::Pending;
use super::store::SessionRow;

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Starting,
    Running,
    Idle,
    Paused,
    Ended,
    Failed,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Running => "running",
            State::Idle => "idle",
            State::Paused => "paused",
            State::Ended => "ended",
            State::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        serde_json::from_value(Value::String(s.to_string())).ok()
    }
}

/// `POST /v1/sessions`: every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// A path under the tenant's part of the workspace root; absent: a new empty one.
    pub workspace: Option<String>,
    pub backend: Option<BackendKind>,
    pub image: Option<String>,
    pub model: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    /// Settings in Claude Code's shape, below the tenant's managed settings.
    pub settings: Option<Value>,
    pub labels: Option<BTreeMap<String, String>>,
    pub ttl_seconds: Option<u64>,
    pub idle_seconds: Option<u64>,
}

/// What the store keeps of a session's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredConfig {
    pub request: SessionConfig,
    /// Seconds since the epoch at creation (the TTL counts from here, across restarts).
    pub created_unix: u64,
    pub backend: BackendKind,
    /// The session this one was forked from (its first start copies that conversation).
    #[serde(default)]
    pub fork_of: Option<String>,
    /// The id of the key that created the session (its audit records name it).
    #[serde(default)]
    pub created_by: Option<String>,
}

/// A running sandbox and the task that runs the session's turns.
pub struct Runtime {
    pub inbox: mpsc::UnboundedSender<String>,
    pub task: tokio::task::JoinHandle<()>,
    pub ctx: ToolContext,
    pub interrupter: Interrupter,
    pub engine: Arc<Engine>,
    pub sandbox: Arc<Supervisor>,
}

struct Status {
    state: State,
    reason: Option<String>,
    /// The transcript exists: a start resumes it.
    started: bool,
    last_active: Instant,
    updated_at: String,
}

/// One session of one tenant.
pub struct Session {
    pub id: String,
    pub tenant: String,
    pub workspace: PathBuf,
    pub config: StoredConfig,
    pub created_at: String,
    pub events: Arc<EventLog>,
    pub pending: Arc<Pending>,
    pub rules: Arc<SessionRules>,
    status: Mutex<Status>,
    /// Exec and file calls under way: a session is not idle while one runs.
    busy: AtomicUsize,
    /// Held while the sandbox starts or stops, so a start, a pause and an end never race.
    pub(super) runtime: tokio::sync::Mutex<Option<Runtime>>,
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Session {
    pub fn new(
        row: &SessionRow,
        config: StoredConfig,
        events: Arc<EventLog>,
        state: State,
    ) -> Session {
        Session {
            id: row.id.clone(),
            tenant: row.tenant.clone(),
            workspace: row.workspace.clone(),
            config,
            created_at: row.created_at.clone(),
            events,
            pending: Arc::new(Pending::default()),
            rules: SessionRules::new(),
            status: Mutex::new(Status {
                state,
                reason: row.reason.clone(),
                started: row.started,
                last_active: Instant::now(),
                updated_at: row.updated_at.clone(),
            }),
            busy: AtomicUsize::new(0),
            runtime: tokio::sync::Mutex::new(None),
        }
    }

    /// Marks the session busy until the guard drops (an exec call).
    pub fn busy(self: &Arc<Self>) -> BusyGuard {
        self.busy.fetch_add(1, Ordering::SeqCst);
        BusyGuard(self.clone())
    }

    fn status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn state(&self) -> (State, Option<String>) {
        let s = self.status();
        (s.state, s.reason.clone())
    }

    pub fn started(&self) -> bool {
        self.status().started
    }

    pub fn mark_started(&self) {
        self.status().started = true;
    }

    pub fn touch(&self) {
        self.status().last_active = Instant::now();
    }

    /// The labels, for filtering.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.config.request.labels.clone().unwrap_or_default()
    }

    /// Sets the state (and its reason) and tells the subscribers; returns the row the
    /// store must now hold. No change, no event.
    pub fn set_state(&self, state: State, reason: Option<String>) -> Option<SessionRow> {
        {
            let mut s = self.status();
            if s.state == state && s.reason == reason {
                return None;
            }
            s.state = state;
            s.reason = reason.clone();
            s.last_active = Instant::now();
            s.updated_at = crate::session::record::now_rfc3339();
        }
        let mut data = json!({"state": state.as_str()});
        if let Some(reason) = &reason {
            data["reason"] = json!(reason);
        }
        self.events.emit("lifecycle", data);
        Some(self.row())
    }

    /// Queues a user message; the session shows `running` until the queue is empty.
    pub fn enqueue(
        &self,
        runtime: &Runtime,
        content: String,
    ) -> Result<Option<SessionRow>, ApiError> {
        {
            let s = self.status();
            if runtime.inbox.send(content).is_err() {
                return Err(ApiError::conflict("the session stopped; try again"));
            }
            if s.state == State::Running {
                return Ok(None);
            }
        }
        Ok(self.set_state(State::Running, None))
    }

    /// Called by the runner after a turn: `idle` when nothing more is queued.
    pub fn turn_done(&self, queue_empty: impl FnOnce() -> bool) -> Option<SessionRow> {
        let idle = {
            let s = self.status();
            s.state == State::Running && queue_empty()
        };
        if idle {
            self.set_state(State::Idle, None)
        } else {
            None
        }
    }

    /// Past its idle time while idle: time to pause.
    pub fn idle_expired(&self, now: Instant) -> bool {
        let s = self.status();
        let idle = self.config.request.idle_seconds.map(Duration::from_secs);
        s.state == State::Idle
            && self.busy.load(Ordering::SeqCst) == 0
            && idle.is_some_and(|idle| now.duration_since(s.last_active) >= idle)
    }

    /// Past its TTL (and not ended yet).
    pub fn ttl_expired(&self, now_unix: u64) -> bool {
        let ended = self.status().state == State::Ended;
        !ended
            && self
                .config
                .request
                .ttl_seconds
                .is_some_and(|ttl| now_unix >= self.config.created_unix.saturating_add(ttl))
    }

    /// The session as the store keeps it.
    pub fn row(&self) -> SessionRow {
        let s = self.status();
        SessionRow {
            id: self.id.clone(),
            tenant: self.tenant.clone(),
            state: s.state.as_str().to_string(),
            reason: s.reason.clone(),
            workspace: self.workspace.clone(),
            config: serde_json::to_value(&self.config).unwrap_or(Value::Null),
            labels: json!(self.labels()),
            started: s.started,
            created_at: self.created_at.clone(),
            updated_at: s.updated_at.clone(),
        }
    }

    /// The session as the API shows it.
    pub fn view(&self) -> Value {
        let s = self.status();
        let r = &self.config.request;
        json!({
            "id": self.id,
            "state": s.state.as_str(),
            "reason": s.reason,
            "workspace": self.workspace,
            "backend": self.config.backend,
            "image": r.image,
            "model": r.model,
            "permission_mode": r.permission_mode,
            "labels": self.labels(),
            "ttl_seconds": r.ttl_seconds,
            "idle_seconds": r.idle_seconds,
            "created_at": self.created_at,
            "updated_at": s.updated_at,
            "last_event_id": self.events.last_id(),
            "pending_permissions": self.pending.ids(),
        })
    }
}

/// Keeps a session from pausing while a call uses its sandbox.
pub struct BusyGuard(Arc<Session>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
        self.0.touch();
    }
}
