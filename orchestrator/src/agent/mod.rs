//! The agent loop: send the conversation to the model, run the tools it asks for inside
//! the sandbox, send the results back, until the model ends its turn.
//!
//! Invariants the loop keeps, whatever fails:
//! - every tool_use gets exactly one tool_result, in the next user turn, matched by id
//!   (also on denials, invalid input, interrupts and timeouts);
//! - the transcript is appended as events happen and fsynced at every turn boundary, so a
//!   crash loses no completed turn and a resumed session is valid;
//! - a model or sandbox failure ends the run with an error result, never a panic.

pub mod budget;
pub(crate) mod compact;
mod context_report;
pub mod gate;
pub mod options;
pub mod prompt;
mod shared;
pub mod structured;
mod tool_turn;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use crate::model::{
    AssistantMessage, CacheControl, ContentBlock, Message, MessagesRequest, ModelClient,
    StopReason, StreamEvent, SystemBlock, ToolDefinition, Usage,
};
use crate::session::{RecordBody, Transcript};
use crate::tools::tool_search::{self, Deferred, ToolSearchMode};
use crate::tools::{ToolContext, ToolRegistry};

pub use context_report::ContextReport;
pub use gate::{
    GateVerdict, LoopObserver, NoObserver, PromptVerdict, RulesGate, StopVerdict, ToolCallInfo,
    ToolGate,
};
pub use options::LoopOptions;
pub use shared::LoopShared;
pub use structured::StructuredOutput;

/// How one loop runs.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    pub model: String,
    pub max_tokens: u32,
    /// Most model calls in one run (`--max-turns`); `None` is unlimited.
    pub max_turns: Option<u32>,
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// Compact when the conversation passes this share of the window.
    pub compact_at: f64,
    pub cwd: PathBuf,
    /// The CLAUDE.md text (re-injected after compaction).
    pub memory: Option<String>,
    /// The memory files that text was read from (`get_context_usage`'s `memoryFiles`).
    pub memory_files: Vec<prompt::LoadedMemory>,
    /// Custom slash commands (`.claude/commands/*.md`): `/name args` runs as its body.
    pub commands: Vec<crate::slash_commands::CustomCommand>,
    /// Today's date as YYYY-MM-DD.
    pub today: String,
    /// The caller's choices (system prompt, thinking, effort, budget, output schema).
    pub options: LoopOptions,
    /// When MCP tools are deferred behind ToolSearch (`ENABLE_TOOL_SEARCH`).
    pub tool_search: ToolSearchMode,
}

impl LoopConfig {
    pub fn new(model: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            model: model.into(),
            max_tokens: 16_000,
            max_turns: None,
            context_window: 200_000,
            compact_at: 0.8,
            cwd: cwd.into(),
            memory: None,
            memory_files: Vec::new(),
            commands: Vec::new(),
            today: crate::session::record::now_rfc3339()[..10].to_string(),
            options: LoopOptions::default(),
            tool_search: ToolSearchMode::default(),
        }
    }
}

/// What the loop reports as it goes (for stream-json output and UIs).
#[derive(Debug, Clone)]
pub enum LoopEvent {
    /// A piece of assistant text as it streams.
    TextDelta(String),
    /// The API's stream event as it came (when the model client was asked for them).
    Stream(serde_json::Value),
    /// A complete assistant turn.
    Assistant(Message),
    /// A complete user turn (the prompt, or tool results).
    User(Message),
    /// The conversation was compacted.
    Compacted { tokens_before: u64 },
    /// An event of a sub-agent, run by the parent's Agent call `parent_tool_use_id`.
    Subagent {
        parent_tool_use_id: String,
        event: Box<LoopEvent>,
    },
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The final assistant text (or the error).
    pub text: String,
    pub is_error: bool,
    /// "success", "error_max_turns", "error_during_execution", "refusal", "interrupted".
    pub subtype: String,
    /// Model calls made in this run.
    pub turns: u32,
    pub usage: Usage,
    pub stop_reason: Option<StopReason>,
    /// What the session spent so far, in US dollars (none when a model had no price).
    pub total_cost_usd: Option<f64>,
    /// The value given through the StructuredOutput tool (`--json-schema`).
    pub structured_output: Option<serde_json::Value>,
}

impl RunOutcome {
    /// A run that has not ended yet.
    pub fn start() -> Self {
        Self {
            text: String::new(),
            is_error: false,
            subtype: "success".into(),
            turns: 0,
            usage: Usage::default(),
            stop_reason: None,
            total_cost_usd: None,
            structured_output: None,
        }
    }
}

/// One session's loop.
pub struct AgentLoop {
    model: ModelClient,
    tools: ToolRegistry,
    gate: Arc<dyn ToolGate>,
    observer: Arc<dyn LoopObserver>,
    ctx: ToolContext,
    transcript: Transcript,
    messages: Vec<Message>,
    config: LoopConfig,
    events: Option<mpsc::UnboundedSender<LoopEvent>>,
    /// Input tokens of the last model call (what the conversation occupies).
    context_tokens: u64,
    /// The system blocks, built once: the environment (git status among it) is a snapshot
    /// taken at the start, so the cached prefix stays identical from turn to turn and no
    /// process is spawned per request.
    system: Vec<SystemBlock>,
    /// The model override and context usage a client's control requests see.
    shared: LoopShared,
    /// A sub-agent's loop: the parent's Agent tool_use id its events are wrapped with.
    sidechain_of: Option<String>,
    /// The StructuredOutput tool's state, when the answer must match a schema.
    structured: Option<StructuredOutput>,
    /// Which MCP tools are deferred and which were loaded (none: ToolSearch is off).
    deferred: Option<Deferred>,
    /// The MCP servers whose tools this loop offers, kept in step with their lists.
    mcp: Option<crate::mcp::sync::ToolSync>,
}

/// How many times in a row the loop asks the model to go on after it hit max_tokens.
const MAX_TOKEN_CONTINUATIONS: u32 = 2;
/// How many times in a row a Stop hook may keep the model going (a loop guard).
const MAX_STOP_CONTINUATIONS: u32 = 8;

impl AgentLoop {
    pub fn new(
        model: ModelClient,
        mut tools: ToolRegistry,
        gate: Arc<dyn ToolGate>,
        ctx: ToolContext,
        transcript: Transcript,
        config: LoopConfig,
    ) -> Self {
        // Its own ToolSearch (a sub-agent's registry came with its parent's): what this
        // loop loads goes in this loop's requests only.
        let deferred = (config.tool_search != ToolSearchMode::Off).then(|| {
            let deferred = Deferred::new(config.tool_search);
            tools.register(Arc::new(deferred.tool()));
            deferred
        });
        Self {
            model,
            tools,
            gate,
            observer: Arc::new(NoObserver),
            ctx,
            transcript,
            messages: Vec::new(),
            events: None,
            context_tokens: 0,
            shared: LoopShared::default(),
            sidechain_of: None,
            structured: None,
            deferred,
            mcp: None,
            system: prompt::system_blocks(
                &config.cwd,
                config.memory.as_deref(),
                &config.today,
                &config.options,
            ),
            config,
        }
    }

    /// Hooks and checkpoints: told about the run's moments.
    pub fn with_observer(mut self, observer: Arc<dyn LoopObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// Continues an existing conversation (a resumed or forked session); the deferred
    /// tools it loaded are loaded again.
    pub fn with_history(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        if let Some(deferred) = &self.deferred {
            let defs = self.offered_definitions();
            deferred.restore(&self.messages, &defs, &|name| self.is_deferrable(name));
        }
        self
    }

    /// Keeps the tools of `sync`'s MCP servers up to date before every model request (a
    /// server that sent `list_changed` is listed again).
    pub fn with_mcp(mut self, sync: crate::mcp::sync::ToolSync) -> Self {
        self.mcp = Some(sync);
        self
    }

    /// Replaces the system blocks (a sub-agent's own prompt).
    pub fn with_system(mut self, system: Vec<SystemBlock>) -> Self {
        self.system = system;
        self
    }

    /// The answer must come through `tool` (registered among the loop's tools by the
    /// caller): the run ends once it holds a matching value.
    pub fn with_structured_output(mut self, tool: StructuredOutput) -> Self {
        self.structured = Some(tool);
        self
    }

    /// Marks the loop as a sub-agent run by the parent's Agent call `parent_tool_use_id`:
    /// its events reach the parent's channel wrapped in [`LoopEvent::Subagent`].
    pub fn as_subagent_of(mut self, parent_tool_use_id: impl Into<String>) -> Self {
        self.sidechain_of = Some(parent_tool_use_id.into());
        self
    }

    /// Sends progress to `events`.
    pub fn with_events(mut self, events: mpsc::UnboundedSender<LoopEvent>) -> Self {
        self.events = Some(events);
        self
    }

    /// The loop acts through `shared` (made before the loop, so that what is built beside
    /// it, such as the Agent tool, sees the same model choice).
    pub fn with_shared(mut self, shared: LoopShared) -> Self {
        self.shared = shared;
        self
    }

    /// The handle a client's control requests act through (`set_model`,
    /// `get_context_usage`).
    pub fn shared(&self) -> LoopShared {
        self.shared.record_usage(self.context_report());
        self.shared.clone()
    }

    /// The model of the next call: the one a client chose, else the configured one.
    pub fn model_name(&self) -> String {
        self.shared
            .model()
            .unwrap_or_else(|| self.config.model.clone())
    }

    /// Whether `/name` is one of the session's custom commands.
    pub fn has_command(&self, name: &str) -> bool {
        self.config.commands.iter().any(|c| c.name == name)
    }

    /// The custom slash commands a prompt may run (`/name args`), by name.
    pub fn command_names(&self) -> Vec<String> {
        self.config
            .commands
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    pub fn session_id(&self) -> &str {
        self.transcript.session_id()
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The tools the model is offered (bare-name deny rules remove a tool); deferred MCP
    /// tools not loaded yet are left out, and ToolSearch lists them.
    pub fn tool_definitions(&self) -> Vec<ToolDefinition> {
        let mut defs = self.offered_definitions();
        if let Some(deferred) = &self.deferred {
            defs = deferred.select(
                defs,
                &|name| self.is_deferrable(name),
                self.config.context_window,
                self.gate.offers(tool_search::NAME),
            );
        }
        // The tool list is part of the stable prefix: cache it.
        if let Some(last) = defs.last_mut() {
            last.cache_control = Some(CacheControl::ephemeral());
        }
        defs
    }

    /// The names of every tool the model may call, deferred ones included (the
    /// stream-json init record's `tools`).
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .offered_definitions()
            .into_iter()
            .map(|d| d.name)
            .collect();
        if self
            .tool_definitions()
            .iter()
            .any(|d| d.name == tool_search::NAME)
        {
            names.push(tool_search::NAME.into());
        }
        names
    }

    /// Every tool the loop offers, with its full definition.
    fn offered_definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .definitions()
            .into_iter()
            .filter_map(|v| serde_json::from_value::<ToolDefinition>(v).ok())
            .filter(|d| self.gate.offers(&d.name))
            .collect()
    }

    /// MCP tools may be deferred; Cordon's own tools never are.
    fn is_deferrable(&self, name: &str) -> bool {
        self.tools
            .get(name)
            .is_some_and(|t| t.mcp_server().is_some())
    }

    /// The deferred tools this loop loaded so far (ToolSearch or a call by name).
    pub fn loaded_deferred_tools(&self) -> Vec<String> {
        self.deferred
            .as_ref()
            .map(Deferred::loaded)
            .unwrap_or_default()
    }

    fn emit(&self, event: LoopEvent) {
        if let Some(tx) = &self.events {
            let event = match &self.sidechain_of {
                Some(id) => LoopEvent::Subagent {
                    parent_tool_use_id: id.clone(),
                    event: Box::new(event),
                },
                None => event,
            };
            let _ = tx.send(event);
        }
    }

    /// Appends a record; returns its uuid.
    fn record(&mut self, body: RecordBody) -> Option<String> {
        match self.transcript.append(body) {
            Ok(rec) => Some(rec.uuid),
            Err(e) => {
                tracing::error!(error = %e, "transcript append failed");
                None
            }
        }
    }

    fn sync(&mut self) {
        if let Err(e) = self.transcript.sync() {
            tracing::error!(error = %e, "transcript sync failed");
        }
    }

    /// Records and sends a user turn; returns the record's uuid.
    fn push_user(&mut self, message: Message) -> Option<String> {
        let uuid = self.record(RecordBody::User {
            message: message.clone(),
        });
        self.emit(LoopEvent::User(message.clone()));
        crate::session::transcript::push_merged(&mut self.messages, message);
        uuid
    }

    /// Runs one user prompt to the end of the model's turn.
    pub async fn run(&mut self, prompt: &str, interrupts: &mut watch::Receiver<u64>) -> RunOutcome {
        interrupts.borrow_and_update();
        let outcome = RunOutcome::start();
        if let Some(structured) = &self.structured {
            structured.reset();
        }
        // Session commands, as users of Claude Code type them: they act on the session
        // instead of going to the model.
        match prompt.trim() {
            "/compact" => return self.manual_compact(outcome).await,
            "/context" => {
                let report = self.context_report().to_string();
                return self.finish(outcome, false, "success", report);
            }
            _ => {}
        }
        let expanded = crate::slash_commands::expand_prompt(&self.config.commands, prompt);
        let prompt = expanded.as_deref().unwrap_or(prompt);
        match self.observer.user_prompt(prompt).await {
            PromptVerdict::Block { reason } => {
                return self.finish(
                    outcome,
                    true,
                    "blocked",
                    format!("the prompt was blocked: {reason}"),
                );
            }
            PromptVerdict::Continue { context } => {
                let mut content = vec![ContentBlock::text(prompt)];
                if let Some(context) = context {
                    content.push(ContentBlock::text(context));
                }
                let uuid = self.push_user(Message::user(content));
                self.sync();
                if let Some(uuid) = uuid {
                    self.observer.prompt_recorded(&uuid).await;
                }
            }
        }
        self.converse(outcome, interrupts).await
    }

    /// Calls the model and runs its tools until the turn ends.
    async fn converse(
        &mut self,
        mut outcome: RunOutcome,
        interrupts: &mut watch::Receiver<u64>,
    ) -> RunOutcome {
        let mut continuations = 0;
        let mut stop_continuations = 0;
        loop {
            // Checked before a call, never after one: the tools of the last reply ran
            // and have their results, so the transcript stays whole.
            if let Some(why) = self
                .config
                .options
                .max_budget_usd
                .and_then(|budget| self.config.options.spend.over(budget))
            {
                return self.finish(outcome, true, "error_max_budget_usd", why);
            }
            if self
                .config
                .max_turns
                .is_some_and(|max| outcome.turns >= max)
            {
                let why = format!(
                    "stopped after the maximum of {} turns (--max-turns)",
                    outcome.turns
                );
                return self.finish(outcome, true, "error_max_turns", why);
            }
            if self.needs_compaction() {
                self.observer.pre_compact(false).await;
            }
            if self.needs_compaction()
                && let Err(e) = self.compact().await
            {
                tracing::warn!(error = %e, "compaction failed; continuing with the full conversation");
            }
            if let Some(mcp) = self.mcp.as_mut() {
                mcp.sync(&mut self.tools).await;
            }
            outcome.turns += 1;
            self.observer.turn_start(outcome.turns).await;
            let reply = match self.call_model(interrupts).await {
                Ok(Some(reply)) => reply,
                Ok(None) => {
                    return self.finish(
                        outcome,
                        true,
                        "interrupted",
                        "interrupted by the user".into(),
                    );
                }
                Err(e) => {
                    return self.finish(
                        outcome,
                        true,
                        "error_during_execution",
                        format!("model error: {e}"),
                    );
                }
            };
            add_usage(&mut outcome.usage, &reply.usage);
            self.config.options.spend.add(&reply.model, &reply.usage);
            self.context_tokens = reply.usage.input_tokens
                + reply.usage.cache_read_input_tokens
                + reply.usage.cache_creation_input_tokens
                + reply.usage.output_tokens;
            self.shared.record_usage(self.context_report());
            let message = reply.to_message();
            let uuid = self.record(RecordBody::Assistant {
                message: message.clone(),
                stop_reason: reply.stop_reason.as_ref().map(|s| s.as_str().to_string()),
                usage: reply.usage,
            });
            if let Some(uuid) = uuid {
                self.observer.assistant_recorded(&uuid).await;
            }
            self.emit(LoopEvent::Assistant(message.clone()));
            self.messages.push(message);
            outcome.stop_reason = reply.stop_reason.clone();
            let has_tools = reply
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
            if has_tools {
                let interrupted = self.run_tools(&reply, interrupts).await;
                self.sync();
                if interrupted {
                    return self.finish(
                        outcome,
                        true,
                        "interrupted",
                        "interrupted by the user".into(),
                    );
                }
                if let Some(structured) = &self.structured {
                    structured.refused(refused_calls(&reply, &self.messages, structured::NAME));
                    if structured.exhausted() {
                        return self.structured_retries_spent(outcome);
                    }
                }
                continue;
            }
            self.sync();
            match reply.stop_reason {
                Some(StopReason::PauseTurn) => continue,
                Some(StopReason::MaxTokens) if continuations < MAX_TOKEN_CONTINUATIONS => {
                    continuations += 1;
                    self.push_user(Message::user_text(
                        "Your last reply was cut off at the output token limit. Continue exactly where it stopped.",
                    ));
                    self.sync();
                    continue;
                }
                Some(StopReason::MaxTokens) => {
                    let text = last_text(&self.messages);
                    return self.finish(outcome, true, "error_max_tokens", text);
                }
                Some(StopReason::Refusal) => {
                    let text = last_text(&self.messages);
                    let text = if text.is_empty() {
                        "the model declined to continue".to_string()
                    } else {
                        text
                    };
                    return self.finish(outcome, true, "refusal", text);
                }
                _ => {
                    let text = last_text(&self.messages);
                    if let Some(structured) = &self.structured
                        && structured.value().is_none()
                    {
                        if !structured.missed() {
                            return self.structured_retries_spent(outcome);
                        }
                        self.push_user(Message::user_text(structured::REMINDER));
                        self.sync();
                        continue;
                    }
                    if stop_continuations < MAX_STOP_CONTINUATIONS
                        && let StopVerdict::Continue { reason } = self.observer.stop(&text).await
                    {
                        stop_continuations += 1;
                        self.push_user(Message::user_text(reason));
                        self.sync();
                        continue;
                    }
                    return self.finish(outcome, false, "success", text);
                }
            }
        }
    }

    /// `/compact`: summarise the conversation now, whatever its size.
    async fn manual_compact(&mut self, outcome: RunOutcome) -> RunOutcome {
        self.observer.pre_compact(true).await;
        if self.messages.is_empty() {
            return self.finish(outcome, false, "success", "nothing to compact yet".into());
        }
        let before = self
            .context_tokens
            .max(compact::estimate_tokens(&self.messages));
        match self.summarise(before, true).await {
            Ok(()) => {
                self.emit(LoopEvent::Compacted {
                    tokens_before: before,
                });
                let text = format!(
                    "compacted the conversation: about {before} tokens before, about {} after",
                    self.context_tokens
                );
                self.finish(outcome, false, "success", text)
            }
            Err(e) => self.finish(
                outcome,
                true,
                "error_during_execution",
                format!("compaction failed: {e}"),
            ),
        }
    }

    fn structured_retries_spent(&mut self, outcome: RunOutcome) -> RunOutcome {
        let why = format!(
            "no value matching the --json-schema after {} attempts",
            structured::MAX_RETRIES
        );
        self.finish(outcome, true, "error_max_structured_output_retries", why)
    }

    fn finish(
        &mut self,
        mut outcome: RunOutcome,
        is_error: bool,
        subtype: &str,
        text: String,
    ) -> RunOutcome {
        outcome.total_cost_usd = self.config.options.spend.total();
        outcome.structured_output = self.structured.as_ref().and_then(StructuredOutput::value);
        outcome.is_error = is_error;
        outcome.subtype = subtype.to_string();
        outcome.text = text;
        self.record(RecordBody::Result {
            is_error,
            subtype: subtype.to_string(),
            text: Some(outcome.text.clone()),
        });
        self.sync();
        outcome
    }

    fn request(&self) -> MessagesRequest {
        let options = &self.config.options;
        let mut req = MessagesRequest::new(
            self.model_name(),
            options.max_tokens(self.config.max_tokens),
            self.messages.clone(),
        );
        req.system = self.system.clone();
        req.thinking = options.thinking.clone();
        req.output_config = options.output_config();
        req.tools = self.tool_definitions();
        // A breakpoint on the latest turn: the next call reads the whole conversation from
        // the cache and only pays for what is new.
        if let Some(block) = req.messages.last_mut().and_then(|m| m.content.last_mut()) {
            set_cache_control(block);
        }
        req
    }

    /// One model call. `Ok(None)` when interrupted.
    async fn call_model(
        &self,
        interrupts: &mut watch::Receiver<u64>,
    ) -> Result<Option<AssistantMessage>, crate::model::ModelError> {
        let req = self.request();
        let call = async {
            let mut stream = self.model.stream(&req).await?;
            while let Some(event) = stream.next().await {
                match event? {
                    StreamEvent::TextDelta { text, .. } => self.emit(LoopEvent::TextDelta(text)),
                    StreamEvent::Raw(event) => self.emit(LoopEvent::Stream(event)),
                    StreamEvent::Message(message) => return Ok(message),
                    _ => {}
                }
            }
            Err(crate::model::ModelError::StreamIncomplete)
        };
        tokio::select! {
            result = call => result.map(Some),
            _ = interrupts.changed() => Ok(None),
        }
    }

    /// Runs the tool calls of `reply` and appends their results as one user turn.
    /// Returns true when the user interrupted.
    async fn run_tools(
        &mut self,
        reply: &AssistantMessage,
        interrupts: &mut watch::Receiver<u64>,
    ) -> bool {
        let plan = tool_turn::plan(reply, &self.tools, self.gate.as_ref()).await;
        for decision in &plan.decisions {
            self.record(decision.clone());
        }
        let started = Instant::now();
        let (results, calls, interrupted) =
            tool_turn::execute(plan, &self.tools, self.gate.as_ref(), &self.ctx, interrupts).await;
        tracing::debug!(took = ?started.elapsed(), n = results.len(), "tool turn");
        for call in calls {
            self.record(call);
        }
        // A deferred tool the model called by name is loaded: it gets the definition.
        if let Some(deferred) = &self.deferred {
            deferred.mark_called(reply.content.iter().filter_map(|b| match b {
                ContentBlock::ToolUse { name, .. } => Some(name.as_str()),
                _ => None,
            }));
        }
        self.push_user(Message::user(results));
        interrupted
    }

    /// What occupies the context window, by category.
    pub fn context_report(&self) -> ContextReport {
        context_report::build(self)
    }
}

fn set_cache_control(block: &mut ContentBlock) {
    match block {
        ContentBlock::Text { cache_control, .. }
        | ContentBlock::ToolResult { cache_control, .. } => {
            *cache_control = Some(CacheControl::ephemeral());
        }
        _ => {}
    }
}

fn add_usage(total: &mut Usage, more: &Usage) {
    total.input_tokens += more.input_tokens;
    total.output_tokens += more.output_tokens;
    total.cache_read_input_tokens += more.cache_read_input_tokens;
    total.cache_creation_input_tokens += more.cache_creation_input_tokens;
}

/// How many of `reply`'s calls of the tool `name` got an error result (in the latest user
/// turn of `messages`).
fn refused_calls(reply: &AssistantMessage, messages: &[Message], name: &str) -> u32 {
    let ids: Vec<&str> = reply
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, name: n, .. } if n == name => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let Some(results) = messages.last() else {
        return 0;
    };
    let refused = results
        .content
        .iter()
        .filter(|b| {
            matches!(b, ContentBlock::ToolResult { tool_use_id, is_error: true, .. }
                if ids.contains(&tool_use_id.as_str()))
        })
        .count();
    u32::try_from(refused).unwrap_or(u32::MAX)
}

fn last_text(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.role == crate::model::Role::Assistant)
        .map(crate::session::transcript::text_of)
        .unwrap_or_default()
}
