//! One stream-json session: the reader over the client's lines, the handling of the
//! client's requests, and the serve loop (each prompt is one run of the agent loop, its
//! messages and result go out as they happen; requests are answered while a run goes on).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::{mpsc, watch};

use super::channel::Controller;
use super::protocol::{self, Inbound, Request};
use super::{records, sdk_hooks};
use crate::agent::{AgentLoop, LoopEvent, LoopShared, RunOutcome};
use crate::hooks::HookSet;
use crate::mcp::McpSet;
use crate::permissions::PermissionMode;
use crate::subagents::{AgentDefinition, Tasks};
use crate::tools::ToolContext;

/// What the session loop gets from the reader.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Prompt {
        text: String,
        uuid: Option<String>,
    },
    Request {
        request_id: String,
        request: Request,
    },
}

/// Changes the session's permission mode (`set_permission_mode`).
pub type ModeSetter = Arc<dyn Fn(PermissionMode) + Send + Sync>;

/// Restores the workspace to its state at a user message (`rewind_files`).
#[tonic::async_trait]
pub trait Rewinder: Send + Sync {
    /// Returns what was (or, with `dry_run`, would be) restored, as the response body.
    async fn rewind(&self, user_message_id: &str, dry_run: bool) -> Result<Value, String>;
}

/// Interrupts the running prompt (the session's [`crate::tools::Interrupter`]).
pub type InterruptFn = Arc<dyn Fn() + Send + Sync>;

/// Remembers the transcript uuid of the latest prompt, so the prompt's user record names
/// it: checkpoints are recorded against that uuid, and `rewind_files` takes it back.
/// Put it first among the loop's observers (it then runs before the prompt's record can
/// be forwarded).
/// The assistant records' uuids likewise, in order (a fork may resume at one of them).
#[derive(Debug, Default)]
pub struct PromptUuids(
    std::sync::Mutex<Option<String>>,
    std::sync::Mutex<VecDeque<String>>,
);

impl PromptUuids {
    fn take(&self) -> Option<String> {
        self.0.lock().ok().and_then(|mut u| u.take())
    }

    fn take_assistant(&self) -> Option<String> {
        self.1.lock().ok().and_then(|mut q| q.pop_front())
    }
}

#[tonic::async_trait]
impl crate::agent::LoopObserver for PromptUuids {
    async fn prompt_recorded(&self, user_message_uuid: &str) {
        if let Ok(mut u) = self.0.lock() {
            *u = Some(user_message_uuid.to_string());
        }
    }

    async fn assistant_recorded(&self, uuid: &str) {
        if let Ok(mut q) = self.1.lock() {
            q.push_back(uuid.to_string());
        }
    }
}

/// The session handles the client's requests act on.
#[derive(Clone)]
pub struct SessionControls {
    pub interrupt: InterruptFn,
    pub set_mode: Option<ModeSetter>,
    pub rewinder: Option<Arc<dyn Rewinder>>,
    /// Where the client's hook callbacks are registered (`initialize`).
    pub hooks: Option<Arc<HookSet>>,
    pub prompt_uuids: Arc<PromptUuids>,
    /// The session's MCP servers, the client's own SDK servers among them (`mcp_status`,
    /// `mcp_toggle`, `mcp_reconnect`).
    pub mcp: Option<McpControl>,
    /// The loop's model override and context usage (`set_model`, `get_context_usage`);
    /// [`serve`] fills it from the loop it runs.
    pub loop_shared: Option<LoopShared>,
    /// The running sub-agents (`stop_task`).
    pub tasks: Option<Tasks>,
    /// The sub-agent types the Agent tool offers (`get_context_usage`).
    pub agents: Arc<Vec<AgentDefinition>>,
    /// The client's `initialize` was answered.
    pub initialized: Arc<AtomicBool>,
    /// `--session-mirror`: the transcript, mirrored to the client as it is written.
    pub mirror: Option<Arc<std::sync::Mutex<super::mirror::TranscriptMirror>>>,
}

/// Sends what the transcript gained since the last call, when it is mirrored.
pub fn send_mirror(controller: &Controller, controls: &SessionControls) {
    let Some(mirror) = &controls.mirror else {
        return;
    };
    let frames = mirror
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .frames();
    for frame in frames {
        controller.send(frame);
    }
}

/// The MCP servers a client's requests act on, and the context a (re)start runs in.
#[derive(Clone)]
pub struct McpControl {
    pub servers: McpSet,
    pub ctx: ToolContext,
}

/// Reads the client's lines until EOF: answers to our requests go to the controller,
/// prompts and requests to `events`. At EOF every open request of ours fails.
pub async fn read_lines<R: AsyncBufRead + Unpin>(
    reader: R,
    controller: Arc<Controller>,
    events: mpsc::UnboundedSender<Event>,
) {
    let mut lines = reader.lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "reading the client's input failed");
                break;
            }
        };
        match protocol::parse_line(&line) {
            Ok(None) => {}
            Ok(Some(Inbound::User { text, uuid })) => {
                let _ = events.send(Event::Prompt { text, uuid });
            }
            Ok(Some(Inbound::Request {
                request_id,
                request,
            })) => {
                let _ = events.send(Event::Request {
                    request_id,
                    request,
                });
            }
            Ok(Some(Inbound::Response { request_id, result })) => {
                if !controller.resolve(&request_id, result) {
                    tracing::debug!(%request_id, "an answer to no open request");
                }
            }
            Ok(Some(Inbound::Cancel { request_id })) => {
                tracing::debug!(%request_id, "cancel for a request we do not run concurrently");
            }
            Ok(Some(Inbound::Ignored { kind })) => {
                tracing::debug!(%kind, "ignored a client message");
            }
            Err(protocol::ParseError::BadRequest { request_id, reason }) => {
                controller.send(protocol::error_response(&request_id, &reason));
            }
            Err(e) => tracing::warn!(error = %e, "ignored a line the client sent"),
        }
    }
    controller.close();
}

/// Answers one client request.
pub async fn handle_request(
    controller: &Controller,
    controls: &SessionControls,
    request_id: &str,
    request: Request,
) {
    let answer = match request {
        Request::Initialize { hooks, agents } => late_initialize(controls, &hooks, &agents),
        Request::Interrupt => {
            (controls.interrupt)();
            Ok(json!({}))
        }
        Request::SetPermissionMode { mode } => set_mode(controls, &mode),
        Request::RewindFiles {
            user_message_id,
            dry_run,
        } => match &controls.rewinder {
            Some(r) => r.rewind(&user_message_id, dry_run).await,
            None => Err("file checkpoints are not enabled for this session".into()),
        },
        Request::McpStatus => Ok(controls
            .mcp
            .as_ref()
            .map_or_else(|| json!({"mcpServers": []}), |m| m.servers.status())),
        Request::McpToggle { server, enabled } => match &controls.mcp {
            Some(m) => m
                .servers
                .toggle(&server, enabled, &m.ctx)
                .await
                .map(|()| json!({})),
            None => Err(format!("there is no MCP server named `{server}`")),
        },
        Request::McpReconnect { server } => match &controls.mcp {
            Some(m) => m
                .servers
                .reconnect(&server, &m.ctx)
                .await
                .map(|()| json!({})),
            None => Err(format!("there is no MCP server named `{server}`")),
        },
        // Claude Code acknowledges these with an empty success; a server the session does
        // not have is named in an error instead (the client's message went nowhere).
        Request::McpMessage { server, message } => match &controls.mcp {
            Some(m) => m
                .servers
                .deliver(&server, message)
                .await
                .map(|()| json!({})),
            None => Err(format!("there is no MCP server named `{server}`")),
        },
        Request::StopTask { task_id } => match &controls.tasks {
            Some(tasks) => tasks.stop(&task_id).map(|()| json!({})),
            None => Err(format!("no running task with id {task_id:?}")),
        },
        Request::SetModel { model } => match &controls.loop_shared {
            Some(shared) => {
                shared.set_model(model.clone());
                Ok(json!({"model": model}))
            }
            None => Err("this session's model cannot change".into()),
        },
        Request::GetContextUsage => match &controls.loop_shared {
            Some(shared) => match shared.context_usage() {
                Some(report) => Ok(super::context_usage::answer(
                    &report,
                    shared.model().as_deref(),
                    controls.mcp.as_ref().map(|m| &m.servers),
                    &controls.agents,
                )),
                None => Err("no context usage yet".into()),
            },
            None => Err("no context usage yet".into()),
        },
        Request::Unsupported { subtype } => {
            Err(format!("unsupported control request subtype: {subtype}"))
        }
    };
    controller.send(match answer {
        Ok(body) => protocol::success_response(request_id, body),
        Err(e) => protocol::error_response(request_id, &e),
    });
}

/// The client's `initialize`, as the session's first message: registers its hooks and
/// returns the answer and its sub-agent types, which the loop (not built yet) includes;
/// an error (a sub-agent definition Cordon cannot apply, or one `check` refuses, such as
/// one naming a skill the session does not have) is the answer instead, and then nothing
/// is registered.
pub fn initialize(
    controls: &SessionControls,
    hooks: &BTreeMap<String, Vec<protocol::HookMatcherConfig>>,
    agents: &BTreeMap<String, protocol::AgentConfig>,
    check: impl FnOnce(&[AgentDefinition]) -> Result<(), String>,
) -> Result<(Value, Vec<AgentDefinition>), String> {
    let defs = super::agents::definitions(agents)?;
    check(&defs)?;
    controls.initialized.store(true, Ordering::Release);
    let applied = match (&controls.hooks, hooks.is_empty()) {
        (_, true) => true,
        (Some(set), false) => match sdk_hooks::register(set, hooks) {
            Ok(n) => {
                tracing::debug!(callbacks = n, "registered the client's hooks");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "the client's hooks could not be registered");
                false
            }
        },
        (None, false) => {
            tracing::warn!("this session runs no hooks; the client's hooks are ignored");
            false
        }
    };
    let answer = json!({
        "commands": [],
        "output_style": "default",
        "available_output_styles": ["default"],
        "models": [],
        "agents": defs.iter().map(|d| json!({
            "name": d.name,
            "description": d.description,
            "model": d.model,
        })).collect::<Vec<_>>(),
        "hooks_applied": applied,
    });
    Ok((answer, defs))
}

/// `initialize` after the session started (a prompt came first): hooks still register,
/// sub-agent types cannot join a loop that is running, and a second one is refused.
fn late_initialize(
    controls: &SessionControls,
    hooks: &BTreeMap<String, Vec<protocol::HookMatcherConfig>>,
    agents: &BTreeMap<String, protocol::AgentConfig>,
) -> Result<Value, String> {
    if controls.initialized.load(Ordering::Acquire) {
        return Err("the session is already initialized".into());
    }
    if !agents.is_empty() {
        return Err(
            "initialize with agents must be the session's first message (the Agent tool \
             was set up before it arrived)"
                .into(),
        );
    }
    initialize(controls, hooks, agents, |_| Ok(())).map(|(answer, _)| answer)
}

fn set_mode(controls: &SessionControls, mode: &str) -> Result<Value, String> {
    let parsed = <PermissionMode as clap::ValueEnum>::from_str(mode, false)
        .map_err(|_| format!("unknown permission mode {mode:?}"))?;
    let Some(setter) = &controls.set_mode else {
        return Err("this session's permission mode cannot change".into());
    };
    setter(parsed);
    Ok(json!({"mode": parsed.as_str()}))
}

/// Facts every record carries.
#[derive(Debug, Clone)]
pub struct RecordInfo {
    pub session_id: String,
    pub model: String,
}

/// Runs prompts as they arrive until the client closes its input (`first` are events
/// read before the loop was built); returns the outcome of the last run. Messages of a
/// run go out as the loop reports them, its result after the last of them.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    agent: &mut AgentLoop,
    first: Vec<Event>,
    mut events: mpsc::UnboundedReceiver<Event>,
    mut loop_events: mpsc::UnboundedReceiver<LoopEvent>,
    controller: &Controller,
    controls: &SessionControls,
    interrupts: &mut watch::Receiver<u64>,
    info: &RecordInfo,
) -> Option<RunOutcome> {
    let mut controls = controls.clone();
    controls.loop_shared = Some(agent.shared());
    let controls = &controls;
    let mut queued: VecDeque<Event> = first.into();
    let mut input_open = true;
    let mut last = None;
    loop {
        let next = match queued.pop_front() {
            Some(event) => Some(event),
            None if input_open => events.recv().await,
            None => None,
        };
        let (text, _uuid) = match next {
            None => break,
            Some(Event::Request {
                request_id,
                request,
            }) => {
                handle_request(controller, controls, &request_id, request).await;
                continue;
            }
            Some(Event::Prompt { text, uuid }) => (text, uuid),
        };
        let started = Instant::now();
        let outcome = {
            let run = agent.run(&text, interrupts);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(event) = loop_events.recv() => {
                        forward(controller, controls, info, event);
                        send_mirror(controller, controls);
                    }
                    event = events.recv(), if input_open => match event {
                        None => input_open = false,
                        Some(Event::Request { request_id, request }) => {
                            handle_request(controller, controls, &request_id, request).await;
                        }
                        Some(prompt) => queued.push_back(prompt),
                    },
                }
            }
        };
        // The loop reports synchronously before it returns: all of this run's messages
        // are queued now, and go out before its result.
        while let Ok(event) = loop_events.try_recv() {
            forward(controller, controls, info, event);
        }
        // The SDK writes its session store when it sees the result: the turn's records
        // go out before it.
        send_mirror(controller, controls);
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        controller.send(records::result(&info.session_id, &outcome, ms, ms));
        last = Some(outcome);
    }
    last
}

fn forward(
    controller: &Controller,
    controls: &SessionControls,
    info: &RecordInfo,
    event: LoopEvent,
) {
    match event {
        LoopEvent::Assistant(m) => {
            let mut record = records::message(&info.session_id, &info.model, &m);
            if let Some(uuid) = controls.prompt_uuids.take_assistant() {
                record["uuid"] = json!(uuid);
            }
            controller.send(record);
        }
        LoopEvent::User(m) => {
            let mut record = records::message(&info.session_id, &info.model, &m);
            let is_prompt = m
                .content
                .iter()
                .all(|b| !matches!(b, crate::model::ContentBlock::ToolResult { .. }));
            if is_prompt && let Some(uuid) = controls.prompt_uuids.take() {
                record["uuid"] = json!(uuid);
            }
            controller.send(record);
        }
        LoopEvent::Stream(event) => {
            controller.send(records::stream_event(&info.session_id, event, None));
        }
        LoopEvent::Subagent {
            parent_tool_use_id,
            event,
        } => match *event {
            LoopEvent::Assistant(m) | LoopEvent::User(m) => {
                let mut record = records::message(&info.session_id, &info.model, &m);
                record["parent_tool_use_id"] = json!(parent_tool_use_id);
                controller.send(record);
            }
            LoopEvent::Stream(event) => {
                let parent = Some(parent_tool_use_id);
                controller.send(records::stream_event(&info.session_id, event, parent));
            }
            _ => {}
        },
        LoopEvent::TextDelta(_) | LoopEvent::Compacted { .. } => {}
    }
}
