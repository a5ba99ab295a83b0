//! The server's sessions: creating them (quotas, workspace, unguessable id), finding them
//! for their tenant only, starting, pausing and ending their sandboxes, and the reaper that
//! pauses idle sessions and ends those past their TTL. After a restart every stored
//! session is listed again; a sandbox that was running is recreated on the next call.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::Value;

use crate::model::ModelConfig;
use crate::sandbox::BackendKind;

use super::auth::Caller;
use super::errors::ApiError;
use super::events::EventLog;
use super::quota::{Quotas, Rate, RateLimiter, check_sessions};
use super::sessions::{Runtime, Session, SessionConfig, State, StoredConfig, unix_now};
use super::store::{SessionRow, Store};
use super::workspace;

/// Everything the handlers share.
pub struct ServerState {
    pub store: Arc<dyn Store>,
    /// The data directory: the database, transcripts, checkpoints, tenant settings.
    pub data: PathBuf,
    /// Workspaces live beneath `workspace_root/<tenant>/`.
    pub workspace_root: PathBuf,
    pub model: ModelConfig,
    pub default_backend: BackendKind,
    pub limiter: RateLimiter,
    sessions: RwLock<HashMap<String, Arc<Session>>>,
    /// Set when the server shuts down: open event streams end.
    closing: tokio::sync::watch::Sender<bool>,
    /// The audit log and metrics ([`ServerState::with_ops`]; none by default).
    pub ops: super::ops::Ops,
    /// The backend kept for the server's life (Docker and its warm pool), which sessions
    /// it can start as asked use ([`ServerState::with_sandboxes`]; none by default).
    pub sandboxes: Option<Arc<dyn crate::sandbox::Backend>>,
}

/// What a running session lends a request (exec, files).
pub struct Live {
    pub ctx: crate::tools::ToolContext,
    pub engine: Arc<crate::permissions::Engine>,
}

fn store_error(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!("server database: {e}"))
}

impl ServerState {
    pub fn new(
        store: Arc<dyn Store>,
        data: PathBuf,
        workspace_root: PathBuf,
        model: ModelConfig,
        default_backend: BackendKind,
    ) -> Self {
        Self {
            store,
            data,
            workspace_root,
            model,
            default_backend,
            limiter: RateLimiter::default(),
            sessions: RwLock::new(HashMap::new()),
            closing: tokio::sync::watch::channel(false).0,
            ops: super::ops::Ops::default(),
            sandboxes: None,
        }
    }

    /// This state with a backend kept across sessions (see [`crate::sandbox::long_lived`]).
    pub fn with_sandboxes(mut self, sandboxes: Option<Arc<dyn crate::sandbox::Backend>>) -> Self {
        self.sandboxes = sandboxes;
        self
    }

    /// Idle sandboxes waiting in the kept backend's warm pool (0 without one).
    pub fn warm_pool_size(&self) -> usize {
        self.sandboxes
            .as_ref()
            .and_then(|b| b.warm_pool_size())
            .unwrap_or(0)
    }

    /// This state with an audit log and metrics; the metrics also watch every session's
    /// model requests.
    pub fn with_ops(mut self, ops: super::ops::Ops) -> Self {
        if let Some(m) = &ops.metrics {
            self.model.observer = Some(crate::model::Observer(m.clone()));
        }
        self.ops = ops;
        self
    }

    /// How many sessions each tenant has in each state (for the metrics).
    pub fn session_counts(&self) -> std::collections::BTreeMap<(String, String), i64> {
        let mut counts = std::collections::BTreeMap::new();
        for s in self.read().values() {
            let key = (s.tenant.clone(), s.state().0.as_str().to_string());
            *counts.entry(key).or_insert(0) += 1;
        }
        counts
    }

    pub fn store_handle(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn save(&self, row: Option<SessionRow>) {
        if let Some(row) = row
            && let Err(e) = self.store.put_session(&row)
        {
            tracing::error!(session = %row.id, error = %e, "saving the session state failed");
        }
    }

    /// Lists every stored session again after a start. Sessions whose sandbox was up when
    /// the server stopped are `paused`: the next call recreates their sandbox.
    pub fn restore(&self) -> Result<usize, super::store::StoreError> {
        let rows = self.store.sessions()?;
        let mut sessions = self.write();
        for row in &rows {
            let Ok(config) = serde_json::from_value::<StoredConfig>(row.config.clone()) else {
                tracing::warn!(session = %row.id, "stored configuration unreadable; skipped");
                continue;
            };
            let events = Arc::new(EventLog::open(&row.id, self.store.clone())?);
            let state = State::parse(&row.state).unwrap_or(State::Failed);
            let session = Arc::new(Session::new(row, config, events, state));
            if matches!(state, State::Starting | State::Running | State::Idle) {
                self.save(session.set_state(
                    State::Paused,
                    Some("the server restarted; the next call resumes the session".into()),
                ));
            }
            sessions.insert(row.id.clone(), session);
        }
        Ok(rows.len())
    }

    /// The managed settings file of `tenant`, written from the store (the managed layer of
    /// its sessions).
    pub fn tenant_settings_file(&self, tenant: &str) -> Result<PathBuf, String> {
        let row = self
            .store
            .tenant(tenant)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no tenant {tenant:?}"))?;
        let dir = self.data.join("tenants").join(tenant);
        crate::paths::private_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let path = dir.join("managed-settings.json");
        std::fs::write(&path, row.settings.to_string())
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(path)
    }

    pub fn quotas(&self, tenant: &str) -> Result<Quotas, ApiError> {
        let row = self.store.tenant(tenant).map_err(store_error)?;
        Ok(row
            .and_then(|r| serde_json::from_value(r.quotas).ok())
            .unwrap_or_default())
    }

    /// Creates a session for `caller` and starts its sandbox in the background.
    pub fn create(
        self: &Arc<Self>,
        caller: &Caller,
        request: SessionConfig,
    ) -> Result<Arc<Session>, ApiError> {
        // The quota first: a refused request makes no directory.
        let open = self.open_sessions(&caller.tenant);
        check_sessions(open, &self.quotas(&caller.tenant)?)?;
        let id = uuid::Uuid::new_v4().to_string();
        let workspace = workspace::resolve(
            &self.workspace_root,
            &caller.tenant,
            request.workspace.as_deref(),
            &id,
        )?;
        let backend = request.backend.unwrap_or(self.default_backend);
        let config = StoredConfig {
            request,
            created_unix: unix_now(),
            backend,
            fork_of: None,
            created_by: Some(caller.key_id.clone()),
        };
        self.register(caller, id, workspace, config)
    }

    /// A new session in the same workspace whose conversation starts as a copy of
    /// `source`'s.
    pub fn fork(
        self: &Arc<Self>,
        caller: &Caller,
        source: &Session,
    ) -> Result<Arc<Session>, ApiError> {
        if !source.started() {
            return Err(ApiError::conflict(
                "the session has no conversation to fork yet",
            ));
        }
        let config = StoredConfig {
            request: source.config.request.clone(),
            created_unix: unix_now(),
            backend: source.config.backend,
            fork_of: Some(source.id.clone()),
            created_by: Some(caller.key_id.clone()),
        };
        let id = uuid::Uuid::new_v4().to_string();
        self.register(caller, id, source.workspace.clone(), config)
    }

    fn register(
        self: &Arc<Self>,
        caller: &Caller,
        id: String,
        workspace: PathBuf,
        config: StoredConfig,
    ) -> Result<Arc<Session>, ApiError> {
        let quotas = self.quotas(&caller.tenant)?;
        let now = crate::session::record::now_rfc3339();
        let row = SessionRow {
            id: id.clone(),
            tenant: caller.tenant.clone(),
            state: State::Starting.as_str().into(),
            reason: None,
            workspace,
            config: serde_json::to_value(&config).map_err(|e| ApiError::internal(e.to_string()))?,
            labels: serde_json::to_value(config.request.labels.clone().unwrap_or_default())
                .unwrap_or(Value::Null),
            started: false,
            created_at: now.clone(),
            updated_at: now,
        };
        let session = {
            let mut sessions = self.write();
            let open = count_open(&sessions, &caller.tenant);
            check_sessions(open, &quotas)?;
            self.limiter.take(
                &caller.tenant,
                Rate::SessionStart,
                quotas.session_starts_per_minute,
            )?;
            self.store.put_session(&row).map_err(store_error)?;
            let events = Arc::new(EventLog::open(&id, self.store.clone()).map_err(store_error)?);
            let session = Arc::new(Session::new(&row, config, events, State::Starting));
            sessions.insert(id.clone(), session.clone());
            session
        };
        session
            .events
            .emit("lifecycle", serde_json::json!({"state": "starting"}));
        let state = self.clone();
        let starting = session.clone();
        tokio::spawn(async move {
            let _ = state.ensure_running(&starting).await;
        });
        Ok(session)
    }

    fn open_sessions(&self, tenant: &str) -> usize {
        count_open(&self.read(), tenant)
    }

    /// The caller's session `id`; another tenant's is a 404 like a missing one.
    pub fn get(&self, caller: &Caller, id: &str) -> Result<Arc<Session>, ApiError> {
        self.read()
            .get(id)
            .filter(|s| s.tenant == caller.tenant)
            .cloned()
            .ok_or_else(|| ApiError::not_found("session"))
    }

    /// The caller's sessions, oldest first.
    pub fn list(&self, caller: &Caller) -> Vec<Arc<Session>> {
        let mut out: Vec<Arc<Session>> = self
            .read()
            .values()
            .filter(|s| s.tenant == caller.tenant)
            .cloned()
            .collect();
        out.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        out
    }

    /// The session's sandbox, started (or restarted after a pause, a failure or a server
    /// restart) when it is not running.
    pub async fn ensure_running(&self, session: &Arc<Session>) -> Result<Live, ApiError> {
        let mut runtime = session.runtime.lock().await;
        self.ensure_locked(session, &mut runtime).await
    }

    async fn ensure_locked(
        &self,
        session: &Arc<Session>,
        runtime: &mut Option<Runtime>,
    ) -> Result<Live, ApiError> {
        if let Some(rt) = runtime.as_ref().filter(|rt| !rt.task.is_finished()) {
            session.touch();
            return Ok(Live {
                ctx: rt.ctx.clone(),
                engine: rt.engine.clone(),
            });
        }
        if session.state().0 == State::Ended {
            return Err(ApiError::conflict("the session has ended"));
        }
        self.save(session.set_state(State::Starting, None));
        let started = std::time::Instant::now();
        match super::runner::start(session, self).await {
            Ok(rt) => {
                if let Some(m) = &self.ops.metrics {
                    let kind = if rt.sandbox.started_warm() {
                        super::metrics::StartKind::Warm
                    } else {
                        super::metrics::StartKind::Cold
                    };
                    m.sandbox_started(kind, started.elapsed().as_secs_f64());
                }
                let live = Live {
                    ctx: rt.ctx.clone(),
                    engine: rt.engine.clone(),
                };
                *runtime = Some(rt);
                self.save(session.set_state(State::Idle, None));
                Ok(live)
            }
            Err(reason) => {
                self.save(session.set_state(State::Failed, Some(reason.clone())));
                Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "start_failed",
                    format!("the session's sandbox did not start: {reason}"),
                ))
            }
        }
    }

    /// Queues a user message, starting the sandbox first when needed; under one lock, so
    /// a pause cannot slip in between.
    pub async fn send(&self, session: &Arc<Session>, content: String) -> Result<(), ApiError> {
        let used = self
            .store
            .tokens(&session.tenant, &super::quota::today())
            .map_err(store_error)?;
        super::quota::check_tokens(used, &self.quotas(&session.tenant)?, unix_now())?;
        let mut runtime = session.runtime.lock().await;
        self.ensure_locked(session, &mut runtime).await?;
        let Some(rt) = runtime.as_ref() else {
            return Err(ApiError::conflict("the session stopped; try again"));
        };
        let row = session.enqueue(rt, content)?;
        drop(runtime);
        self.save(row);
        Ok(())
    }

    /// Interrupts the turn under way (its tool calls are cancelled).
    pub async fn interrupt(&self, session: &Arc<Session>) -> bool {
        let runtime = session.runtime.lock().await;
        match runtime.as_ref() {
            Some(rt) => {
                rt.interrupter.interrupt();
                true
            }
            None => false,
        }
    }

    /// Stops the sandbox (its turn task ends it), then records `state`.
    async fn stop(&self, session: &Arc<Session>, state: State, reason: Option<String>) {
        let mut runtime = session.runtime.lock().await;
        // Checked again under the lock: a message or an exec may have come meanwhile.
        if state == State::Paused && reason.is_none() && !session.idle_expired(Instant::now()) {
            return;
        }
        if let Some(Runtime {
            inbox,
            task,
            interrupter,
            ..
        }) = runtime.take()
        {
            if state == State::Ended {
                interrupter.interrupt();
                session.pending.cancel_all();
            }
            drop(inbox);
            if let Err(e) = task.await {
                tracing::error!(session = %session.id, error = %e, "the session's turn task failed");
            }
        }
        self.save(session.set_state(state, reason));
    }

    /// Pauses an idle session: sandbox gone, workspace and transcript kept.
    pub async fn pause(&self, session: &Arc<Session>) {
        self.stop(session, State::Paused, None).await;
    }

    /// Ends a session for good.
    pub async fn end(&self, session: &Arc<Session>, reason: &str) {
        self.stop(session, State::Ended, Some(reason.to_string()))
            .await;
    }

    /// Pauses idle sessions and ends those past their TTL, every `every`.
    pub async fn reap(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let sessions: Vec<Arc<Session>> = self.read().values().cloned().collect();
            let (now, now_unix) = (Instant::now(), unix_now());
            for session in sessions {
                if session.ttl_expired(now_unix) {
                    self.end(&session, "ttl").await;
                } else if session.idle_expired(now) {
                    self.pause(&session).await;
                }
            }
        }
    }

    /// Ends every sandbox (graceful shutdown): running sessions are paused, so the next
    /// server resumes them; nothing completed is lost (transcripts are flushed per turn).
    pub async fn shutdown(&self) {
        let sessions: Vec<Arc<Session>> = self.read().values().cloned().collect();
        for session in sessions {
            if matches!(
                session.state().0,
                State::Idle | State::Running | State::Starting
            ) {
                self.stop(&session, State::Paused, Some("the server shut down".into()))
                    .await;
            }
        }
        // Then the idle sandboxes kept for sessions to come.
        if let Some(backend) = &self.sandboxes {
            backend.shutdown().await;
        }
    }

    /// Without `to`: the session's checkpoints (one per user message). With `to` (a user
    /// message's uuid, from its `prompt_recorded` event or the list): stops the sandbox
    /// (nothing may change the tree meanwhile) and restores the workspace to its state
    /// before that message; the next call resumes the session.
    pub async fn rewind(
        &self,
        session: &Arc<Session>,
        to: Option<&str>,
    ) -> Result<Value, ApiError> {
        let (state, _) = session.state();
        if state == State::Ended {
            return Err(ApiError::conflict("the session has ended"));
        }
        let checkpoints =
            crate::checkpoints::Checkpoints::open(&self.data, &session.id, &session.workspace)
                .map_err(|e| ApiError::internal(format!("opening the checkpoints: {e}")))?;
        let Some(to) = to else {
            let list = checkpoints
                .list()
                .map_err(|e| ApiError::internal(format!("listing the checkpoints: {e}")))?;
            return Ok(serde_json::json!({"checkpoints": list}));
        };
        if checkpoints.get(to).is_err() {
            return Err(ApiError::not_found("checkpoint"));
        }
        if state == State::Running {
            return Err(ApiError::conflict(
                "a turn is under way: interrupt it (or wait for its result) before rewinding",
            ));
        }
        self.stop(
            session,
            State::Paused,
            Some("rewound; the next call resumes the session".into()),
        )
        .await;
        let report = checkpoints
            .rewind_idle(to)
            .map_err(|e| ApiError::internal(format!("rewinding: {e}")))?;
        session
            .events
            .emit("rewound", serde_json::json!({"to": to, "report": report}));
        Ok(serde_json::json!({"rewound_to": to, "report": report}))
    }

    /// Ends open event streams (graceful shutdown).
    pub fn close_streams(&self) {
        self.closing.send_replace(true);
    }

    /// `stream`, ended when the server shuts down.
    pub fn until_closing<S: futures::Stream>(
        &self,
        stream: S,
    ) -> impl futures::Stream<Item = S::Item> + use<S> {
        let mut closing = self.closing.subscribe();
        futures::StreamExt::take_until(stream, async move {
            let _ = closing.wait_for(|c| *c).await;
        })
    }

    /// The session's permission engine: the running one, else one built from its settings
    /// (files can be read and written while a session is paused).
    pub async fn engine_for(
        &self,
        session: &Arc<Session>,
    ) -> Result<Arc<crate::permissions::Engine>, ApiError> {
        if let Some(rt) = session.runtime.lock().await.as_ref() {
            return Ok(rt.engine.clone());
        }
        if session.state().0 == State::Ended {
            return Err(ApiError::conflict("the session has ended"));
        }
        let settings = super::runner::settings_for(session, self).map_err(ApiError::internal)?;
        Ok(Arc::new(crate::permissions::Engine::new(
            settings.engine_config(&session.workspace),
        )))
    }

    /// Whether the databases answer (readiness; the backend is checked by `/readyz`).
    pub fn ready(&self) -> bool {
        self.store.ping().is_ok() && self.ops.audit_ready()
    }
}

/// Sessions of `tenant` that count against its quota (all but ended ones).
fn count_open(sessions: &HashMap<String, Arc<Session>>, tenant: &str) -> usize {
    sessions
        .values()
        .filter(|s| s.tenant == tenant && s.state().0 != State::Ended)
        .count()
}
