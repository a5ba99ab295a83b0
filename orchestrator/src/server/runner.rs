//! Starting a session's sandbox and running its turns.
//!
//! [`start`] assembles the session through the library builder ([`SessionEnv`]) with the
//! tenant's managed settings on top, the HTTP prompter, and the loop's events going to the
//! session's event log. The turn task takes queued user messages one at a time; when the
//! session pauses or ends its inbox closes, the task tears the sandbox down and returns.

use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;

use crate::agent::{AgentLoop, LoopEvent, RunOutcome};
use crate::model::{ContentBlock, Message};
use crate::session::{FrontEnd, SessionEnv, SessionHandles, SessionStart};
use crate::settings::{CliSettings, Settings, SettingsArg, SettingsSources};

use super::audit::AuditGate;
use super::events::EventLog;
use super::metrics::Metrics;
use super::prompter::HttpPrompter;
use super::registry::ServerState;
use super::sessions::{Runtime, Session};

/// The settings of a session: the tenant's as the managed layer (nothing below overrides
/// them), then the session's own `settings` and `permission_mode`; the workspace's files
/// count as an untrusted repository's.
pub fn settings_for(session: &Session, state: &ServerState) -> Result<Settings, String> {
    let managed = state.tenant_settings_file(&session.tenant)?;
    let request = &session.config.request;
    let cli = CliSettings {
        settings: request
            .settings
            .as_ref()
            .map(|s| SettingsArg::Inline(s.to_string())),
        permission_mode: request.permission_mode,
        model: request.model.clone(),
        ..CliSettings::default()
    };
    let sources = SettingsSources::managed_only(&managed);
    Settings::load_from(&session.workspace, cli, &sources).map_err(|e| format!("settings: {e}"))
}

/// Starts the sandbox and the turn task of `session`.
pub async fn start(session: &Arc<Session>, state: &ServerState) -> Result<Runtime, String> {
    let settings = settings_for(session, state)?;
    // A start that failed after the session was recorded (its sandbox did not come up, a
    // warm claim fell through) is retried under the same id: the same session, resumed,
    // never a second transcript of that name.
    let recorded = crate::session::SessionStore::open(&state.data)
        .and_then(|store| store.get(&session.id))
        .is_ok();
    let env = SessionEnv {
        workspace: session.workspace.clone(),
        home: state.data.clone(),
        settings,
        backend: session.config.backend,
        shared_backend: state.sandboxes.clone(),
        image: session.config.request.image.clone(),
        tenant: Some(session.tenant.clone()),
        model: state.model.clone(),
        start: match (&session.config.fork_of, session.started() || recorded) {
            (_, true) => SessionStart::Resume(session.id.clone()),
            (Some(from), false) => SessionStart::ForkAs {
                from: from.clone(),
                id: session.id.clone(),
            },
            (None, false) => SessionStart::New {
                id: Some(session.id.clone()),
            },
        },
        max_turns: None,
        context_window: None,
        user_home: None,
        overrides: Default::default(),
    };
    let prepared = env.prepare().await.map_err(|e| e.to_string())?;
    session.mark_started();
    let engine = prepared.handles.engine.clone();
    let prompter = Arc::new(HttpPrompter {
        pending: session.pending.clone(),
        events: session.events.clone(),
        rules: session.rules.clone(),
        engine: engine.clone(),
    });
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let front = FrontEnd {
        prompter: Some(prompter),
        observers: vec![Arc::new(Recorded(session.events.clone()))],
        events: Some(events_tx),
        exit_plan_mode: false,
    };
    // Every tool call of the session is audited under the key that created it.
    let audit = state.ops.scoped(
        &session.tenant,
        session.config.created_by.as_deref(),
        &session.id,
    );
    let (agent, handles) = prepared.into_loop_with_gate(front, |gate| match audit {
        Some((scope, sinks)) => Arc::new(AuditGate::new(gate, scope, sinks)),
        None => gate,
    });
    let metrics = state.ops.metrics.clone();
    let (inbox, messages) = mpsc::unbounded_channel();
    let runtime = Runtime {
        inbox,
        ctx: handles.ctx.clone(),
        interrupter: handles.interrupter.clone(),
        engine,
        sandbox: handles.sandbox.clone(),
        task: tokio::spawn(turns(
            session.clone(),
            state.store_handle(),
            agent,
            handles,
            messages,
            events_rx,
            metrics,
        )),
    };
    Ok(runtime)
}

/// Tells clients the transcript uuid of each user message (what a rewind names).
struct Recorded(Arc<EventLog>);

#[tonic::async_trait]
impl crate::agent::LoopObserver for Recorded {
    async fn prompt_recorded(&self, user_message_uuid: &str) {
        self.0.emit(
            "prompt_recorded",
            json!({"user_message_uuid": user_message_uuid}),
        );
    }
}

/// Runs queued messages until the inbox closes, then ends the sandbox.
async fn turns(
    session: Arc<Session>,
    store: Arc<dyn super::store::Store>,
    mut agent: AgentLoop,
    handles: SessionHandles,
    mut messages: mpsc::UnboundedReceiver<String>,
    mut events: mpsc::UnboundedReceiver<LoopEvent>,
    metrics: Option<Arc<Metrics>>,
) {
    let start = if handles.resumed { "resume" } else { "startup" };
    handles.observer.session_start(start).await;
    while let Some(content) = messages.recv().await {
        let mut interrupts = handles.ctx.interrupt_signal();
        let outcome = {
            let run = agent.run(&content, &mut interrupts);
            forwarding(run, &mut events, &session.events).await
        };
        while let Ok(event) = events.try_recv() {
            forward(&session.events, event);
        }
        // Counted before the result goes out, so a client that saw it sees them too.
        if let Some(m) = &metrics {
            m.tokens(&session.tenant, &outcome.usage);
        }
        finish(&session.events, &outcome);
        let u = &outcome.usage;
        let tokens = u.input_tokens
            + u.output_tokens
            + u.cache_read_input_tokens
            + u.cache_creation_input_tokens;
        if let Err(e) = store.add_tokens(&session.tenant, &super::quota::today(), tokens) {
            tracing::error!(session = %session.id, error = %e, "counting the tenant's tokens failed");
        }
        session.touch();
        if let Some(row) = session.turn_done(|| messages.is_empty())
            && let Err(e) = store.put_session(&row)
        {
            tracing::error!(session = %session.id, error = %e, "saving the session state failed");
        }
    }
    drop(agent);
    handles.observer.session_end("other").await;
    handles.end().await;
}

/// Drives `run` while forwarding the loop's events as they come. The select is biased to
/// the events: everything the loop sent is forwarded before the loop runs on, so an event
/// the prompter emits directly (a permission request, after it yields once) comes after
/// the assistant message that asked for the call.
async fn forwarding(
    run: impl std::future::Future<Output = RunOutcome>,
    events: &mut mpsc::UnboundedReceiver<LoopEvent>,
    log: &EventLog,
) -> RunOutcome {
    tokio::pin!(run);
    loop {
        tokio::select! {
            biased;
            Some(event) = events.recv() => forward(log, event),
            outcome = &mut run => return outcome,
        }
    }
}

/// One loop event as the API's events: text deltas, messages, tool calls and results.
fn forward(log: &EventLog, event: LoopEvent) {
    match event {
        LoopEvent::TextDelta(text) => {
            log.emit("text_delta", json!({"text": text}));
        }
        // The server's own events carry the deltas; its model client asks for no raw ones.
        LoopEvent::Stream(_) => {}
        LoopEvent::Assistant(message) => {
            log.emit("assistant", json!({"message": message}));
            for block in &message.content {
                if let ContentBlock::ToolUse { id, name, input } = block {
                    log.emit(
                        "tool_call",
                        json!({"tool_use_id": id, "tool": name, "input": input}),
                    );
                }
            }
        }
        LoopEvent::User(message) => forward_user(log, &message),
        LoopEvent::Compacted { tokens_before } => {
            log.emit("compacted", json!({"tokens_before": tokens_before}));
        }
        LoopEvent::Subagent {
            parent_tool_use_id,
            event,
        } => {
            if let LoopEvent::Assistant(message) | LoopEvent::User(message) = *event {
                log.emit(
                    "subagent_message",
                    json!({"parent_tool_use_id": parent_tool_use_id, "message": message}),
                );
            }
        }
    }
}

fn forward_user(log: &EventLog, message: &Message) {
    let mut prompt = false;
    for block in &message.content {
        match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => {
                log.emit(
                    "tool_result",
                    json!({"tool_use_id": tool_use_id, "content": content, "is_error": is_error}),
                );
            }
            _ => prompt = true,
        }
    }
    if prompt {
        log.emit("user", json!({"message": message}));
    }
}

/// The turn's usage, then its result.
fn finish(log: &EventLog, outcome: &RunOutcome) {
    log.emit("usage", json!({"usage": outcome.usage}));
    log.emit(
        "result",
        json!({
            "subtype": outcome.subtype,
            "is_error": outcome.is_error,
            "text": outcome.text,
            "turns": outcome.turns,
            "usage": outcome.usage,
        }),
    );
}
