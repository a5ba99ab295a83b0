//! `--input-format stream-json`: a multi-turn session driven over stdin and stdout by a
//! client such as the Claude Agent SDK (which runs `cordon --output-format stream-json
//! --verbose --input-format stream-json [--permission-prompt-tool stdio] ...`).
//!
//! The client's first message, `initialize`, is handled before the loop is built: its
//! hooks register, its programmatic sub-agents join the Agent tool's types, and the
//! in-process MCP servers it named in `--mcp-config` (`type: "sdk"`) are connected
//! through it, their tools offered as `mcp__<server>__<tool>`.
//!
//! Each user message on stdin is one run of the loop; its messages and its result go
//! out as they happen; the client's control requests (interrupt, set_permission_mode,
//! rewind_files, set_model, mcp_status, mcp_toggle, mcp_reconnect, get_context_usage,
//! stop_task) are answered while a run goes on. Sub-agents are announced as tasks
//! (`task_started`, `task_notification`). The session ends at stdin EOF. With
//! `--permission-prompt-tool stdio`, questions the rules ask go to the client
//! (can_use_tool) instead of being denied.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use clap::Args;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use cordon::agent::gate::PermissionPrompter;
use cordon::agent::{AgentLoop, LoopEvent, LoopObserver, RunOutcome};
use cordon::checkpoints::Checkpoints;
use cordon::control::{
    self, Controller, Event, McpControl, ModeSetter, PromptUuids, RecordInfo, Rewinder,
    SdkHookCallbacks, SdkPrompter, SessionControls,
};
use cordon::hooks::{HookObserver, Hooks};
use cordon::mcp::{McpServer, McpSet, Timeouts};
use cordon::output::OutputFormat;
use cordon::session::Prepared;
use cordon::subagents::Tasks;
use cordon::tools::Interrupter;

/// `--input-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// The prompt from the argument or standard input.
    Text,
    /// JSON lines: user messages and control requests (the Agent SDK's protocol).
    #[value(name = "stream-json")]
    StreamJson,
}

/// The flags of the stream-json protocol, and the Agent SDK's other flags: accepted so an
/// SDK can drive Cordon unchanged; those Cordon does not apply are named in a warning.
#[derive(Debug, Clone, Args)]
pub struct StreamArgs {
    /// `stream-json`: user messages and control requests as JSON lines on stdin (needs
    /// --output-format stream-json).
    #[arg(long, value_enum, default_value = "text")]
    pub input_format: InputFormat,
    /// `stdio`: permission questions go to the client as can_use_tool requests.
    #[arg(long)]
    pub permission_prompt_tool: Option<String>,
    #[arg(long, hide = true)]
    pub system_prompt: Option<String>,
    #[arg(long, hide = true)]
    pub system_prompt_file: Option<String>,
    #[arg(long, hide = true)]
    pub append_system_prompt: Option<String>,
    #[arg(long, hide = true)]
    pub tools: Option<String>,
    #[arg(long, hide = true)]
    pub max_budget_usd: Option<String>,
    #[arg(long, hide = true)]
    pub task_budget: Option<String>,
    #[arg(long, hide = true)]
    pub fallback_model: Option<String>,
    #[arg(long, hide = true)]
    pub betas: Option<String>,
    #[arg(long, hide = true)]
    pub session_id: Option<String>,
    #[arg(long, hide = true)]
    pub add_dir: Vec<String>,
    #[arg(long, hide = true)]
    pub mcp_config: Vec<String>,
    #[arg(long, hide = true)]
    pub include_partial_messages: bool,
    #[arg(long, hide = true)]
    pub include_hook_events: bool,
    #[arg(long, hide = true)]
    pub strict_mcp_config: bool,
    /// Prompts are always echoed as user records (with the uuid rewind_files takes).
    #[arg(long, hide = true)]
    pub replay_user_messages: bool,
    #[arg(long, hide = true)]
    pub resume_session_at: Option<String>,
    #[arg(long, hide = true)]
    pub resume_drops_turn: Option<String>,
    #[arg(long, hide = true)]
    pub session_mirror: bool,
    #[arg(long, hide = true)]
    pub setting_sources: Option<String>,
    #[arg(long, hide = true)]
    pub plugin_dir: Vec<String>,
    #[arg(long, hide = true)]
    pub thinking: Option<String>,
    #[arg(long, hide = true)]
    pub max_thinking_tokens: Option<String>,
    #[arg(long, hide = true)]
    pub thinking_display: Option<String>,
    #[arg(long, hide = true)]
    pub effort: Option<String>,
    #[arg(long, hide = true)]
    pub json_schema: Option<String>,
}

impl StreamArgs {
    /// The accepted flags that change nothing (yet), for the warning.
    fn not_applied(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut note = |set: bool, name: &'static str| {
            if set {
                out.push(name);
            }
        };
        // The SDK passes `--system-prompt ""` when the caller set none: that keeps ours.
        note(
            self.system_prompt.as_deref().is_some_and(|s| !s.is_empty()),
            "--system-prompt",
        );
        note(self.system_prompt_file.is_some(), "--system-prompt-file");
        note(
            self.append_system_prompt.is_some(),
            "--append-system-prompt",
        );
        note(self.tools.is_some(), "--tools");
        note(self.max_budget_usd.is_some(), "--max-budget-usd");
        note(self.task_budget.is_some(), "--task-budget");
        note(self.fallback_model.is_some(), "--fallback-model");
        note(self.betas.is_some(), "--betas");
        note(self.session_id.is_some(), "--session-id");
        note(!self.add_dir.is_empty(), "--add-dir");
        note(!self.mcp_config.is_empty(), "--mcp-config");
        note(self.include_partial_messages, "--include-partial-messages");
        note(self.include_hook_events, "--include-hook-events");
        note(self.resume_session_at.is_some(), "--resume-session-at");
        note(self.resume_drops_turn.is_some(), "--resume-drops-turn");
        note(self.session_mirror, "--session-mirror");
        note(!self.plugin_dir.is_empty(), "--plugin-dir");
        note(self.thinking.is_some(), "--thinking");
        note(self.max_thinking_tokens.is_some(), "--max-thinking-tokens");
        note(self.effort.is_some(), "--effort");
        note(self.json_schema.is_some(), "--json-schema");
        out
    }
}

/// A stream-json connection: the writer and reader tasks over stdout and stdin.
pub struct StreamSession {
    controller: Arc<Controller>,
    writer: JoinHandle<std::io::Result<()>>,
    events: mpsc::UnboundedReceiver<Event>,
    prompt_over_stdio: bool,
    controls: Option<SessionControls>,
    /// Events read before the loop was built (a prompt sent before, or instead of,
    /// initialize), served first.
    first: Vec<Event>,
    /// The client's in-process MCP servers (named in `--mcp-config` as `type: "sdk"`).
    sdk_server_names: Vec<String>,
    sdk_servers: McpSet,
}

/// Starts the connection when `--input-format stream-json` was given (`None` otherwise).
/// The client's first request (initialize) waits in the queue until the session is up.
pub fn start(args: &StreamArgs, output: OutputFormat) -> anyhow::Result<Option<StreamSession>> {
    if args.input_format == InputFormat::Text {
        if args.permission_prompt_tool.is_some() {
            bail!("--permission-prompt-tool needs --input-format stream-json");
        }
        return Ok(None);
    }
    if output != OutputFormat::StreamJson {
        bail!("--input-format stream-json needs --output-format stream-json");
    }
    let prompt_over_stdio = match args.permission_prompt_tool.as_deref() {
        None => false,
        Some("stdio") => true,
        Some(other) => bail!(
            "--permission-prompt-tool {other:?} is not supported: only \"stdio\" (the control protocol)"
        ),
    };
    let ignored = args.not_applied();
    if !ignored.is_empty() {
        tracing::warn!(flags = ?ignored, "accepted for compatibility, not applied");
    }
    let (controller, out) = Controller::new();
    let writer = tokio::spawn(control::write_lines(out, tokio::io::stdout()));
    let (tx, events) = mpsc::unbounded_channel();
    tokio::spawn(control::read_lines(
        BufReader::new(tokio::io::stdin()),
        controller.clone(),
        tx,
    ));
    Ok(Some(StreamSession {
        controller,
        writer,
        events,
        prompt_over_stdio,
        controls: None,
        first: Vec::new(),
        sdk_server_names: cordon::mcp::sdk::servers_in_mcp_config(&args.mcp_config),
        sdk_servers: McpSet::default(),
    }))
}

impl StreamSession {
    /// Connects the session's handles: the client's hook callbacks run through `hooks`,
    /// interrupts and mode changes reach the session. Returns the prompter for the gate
    /// (with `--permission-prompt-tool stdio`).
    pub fn attach(
        &mut self,
        interrupter: Interrupter,
        interrupts: watch::Receiver<u64>,
        set_mode: ModeSetter,
        hooks: &Hooks,
    ) -> Option<Arc<dyn PermissionPrompter>> {
        hooks
            .runner
            .set_callbacks(Arc::new(SdkHookCallbacks::new(self.controller.clone())));
        self.controls = Some(SessionControls {
            interrupt: Arc::new(move || interrupter.interrupt()),
            set_mode: Some(set_mode),
            rewinder: None,
            hooks: Some(hooks.set.clone()),
            prompt_uuids: Arc::new(PromptUuids::default()),
            mcp: None,
            loop_shared: None,
            tasks: None,
            agents: Arc::default(),
            initialized: Arc::default(),
        });
        self.prompt_over_stdio.then(|| {
            Arc::new(SdkPrompter::new(self.controller.clone()).with_interrupts(interrupts))
                as Arc<dyn PermissionPrompter>
        })
    }

    /// `mcp_status`, `mcp_toggle` and `mcp_reconnect` act on these servers (and on the
    /// client's own, once [`StreamSession::handshake`] connected them); `ctx` is where
    /// a restarted stdio server runs.
    pub fn set_mcp(&mut self, mcp: McpSet, ctx: cordon::tools::ToolContext) {
        if let Some(controls) = &mut self.controls {
            controls.mcp = Some(McpControl { servers: mcp, ctx });
        }
    }

    /// The session's sub-agents are announced to the client as tasks, and `stop_task`
    /// stops one.
    pub fn set_tasks(&mut self, tasks: &Tasks, session_id: &str) {
        let controller = self.controller.clone();
        let session_id = session_id.to_string();
        tasks.set_listener(Arc::new(move |event| {
            controller.send(control::records::task(&session_id, &event));
        }));
        if let Some(controls) = &mut self.controls {
            controls.tasks = Some(tasks.clone());
        }
    }

    /// Before the loop is built: waits for the client's first message. When it is
    /// `initialize`, registers the client's hooks, answers it, adds its sub-agent types
    /// to `prepared`, and connects its SDK MCP servers, whose tools join `prepared`'s.
    /// Anything else is kept for [`StreamSession::serve`].
    pub async fn handshake(&mut self, prepared: &mut Prepared) {
        let Some(controls) = self.controls.clone() else {
            return;
        };
        match self.events.recv().await {
            Some(Event::Request {
                request_id,
                request: control::protocol::Request::Initialize { hooks, agents },
            }) => {
                let (answer, defs) = control::session::initialize(&controls, &hooks, &agents);
                self.controller
                    .send(control::protocol::success_response(&request_id, answer));
                prepared.add_agents(defs);
            }
            Some(other) => self.first.push(other),
            None => {}
        }
        self.connect_sdk_servers(prepared).await;
        if let Some(controls) = &mut self.controls {
            controls.agents = Arc::new(prepared.agents().to_vec());
        }
    }

    /// Connects the client's in-process MCP servers through its connection (each
    /// JSON-RPC message an `mcp_message` control request); their tools join the loop's
    /// and `mcp_status` reports them beside the configured servers.
    async fn connect_sdk_servers(&mut self, prepared: &mut Prepared) {
        let Some(mcp) = self.controls.as_ref().and_then(|c| c.mcp.clone()) else {
            return;
        };
        if self.sdk_server_names.is_empty() {
            return;
        }
        let channel: Arc<dyn cordon::mcp::sdk::ClientChannel> =
            Arc::new(control::sdk_mcp::ClientMcp(self.controller.clone()));
        let timeouts = Timeouts::from_env();
        let servers: Vec<Arc<McpServer>> = self
            .sdk_server_names
            .iter()
            .map(|name| Arc::new(McpServer::sdk(name, channel.clone(), timeouts)))
            .collect();
        let (all, replaced) = mcp.servers.with_servers(servers.clone());
        for server in replaced {
            prepared.remove_tools_of(server.name());
            server.stop().await;
        }
        (self.sdk_servers, _) = McpSet::default().with_servers(servers);
        let mut tools = cordon::tools::ToolRegistry::new();
        self.sdk_servers.connect_into(&mcp.ctx, &mut tools).await;
        prepared.add_tools(&tools);
        if let Some(controls) = &mut self.controls {
            controls.mcp = Some(McpControl {
                servers: all,
                ctx: mcp.ctx,
            });
        }
    }

    /// `rewind_files` restores the workspace from these checkpoints.
    pub fn set_checkpoints(
        &mut self,
        checkpoints: Checkpoints,
        sandbox: Option<Arc<cordon::sandbox::Supervisor>>,
    ) {
        if let Some(controls) = &mut self.controls {
            controls.rewinder = Some(Arc::new(CheckpointRewinder(Arc::new(checkpoints), sandbox)));
        }
    }

    /// The observer that lets prompt records carry their transcript uuid (put it first
    /// among the loop's observers).
    pub fn prompt_uuids(&self) -> Option<Arc<dyn LoopObserver>> {
        self.controls
            .as_ref()
            .map(|c| c.prompt_uuids.clone() as Arc<dyn LoopObserver>)
    }

    /// Serves prompts until the client closes stdin; `init` is the system/init record.
    #[allow(clippy::too_many_arguments)]
    pub async fn serve(
        self,
        agent: &mut AgentLoop,
        loop_events: mpsc::UnboundedReceiver<LoopEvent>,
        interrupts: &mut watch::Receiver<u64>,
        mut init: Value,
        observer: &HookObserver,
        resumed: bool,
        info: RecordInfo,
    ) -> ExitCode {
        let Some(controls) = self.controls else {
            tracing::error!("stream session served before attach");
            return ExitCode::FAILURE;
        };
        init["uuid"] = json!(uuid::Uuid::new_v4().to_string());
        init["slash_commands"] = json!([]);
        init["output_style"] = json!("default");
        if let Some(mcp) = &controls.mcp {
            init["mcp_servers"] = json!(mcp.servers.init_entries());
        }
        init["agents"] = json!(controls.agents.iter().map(|d| &d.name).collect::<Vec<_>>());
        self.controller.send(init);
        observer
            .session_start(if resumed { "resume" } else { "startup" })
            .await;
        let last = control::serve(
            agent,
            self.first,
            self.events,
            loop_events,
            &self.controller,
            &controls,
            interrupts,
            &info,
        )
        .await;
        observer.session_end("other").await;
        self.sdk_servers.stop_all().await;
        self.controller.shutdown();
        match self.writer.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "writing to stdout failed"),
            Err(e) => tracing::warn!(error = %e, "the stdout writer failed"),
        }
        exit_code(last.as_ref())
    }
}

/// Non-zero when the last prompt ended in error (an interrupt is the client's own doing).
fn exit_code(last: Option<&RunOutcome>) -> ExitCode {
    match last {
        Some(o) if o.is_error && o.subtype != "interrupted" => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    }
}

/// `rewind_files` over the session's checkpoint store, with the session's sandbox frozen
/// while the files change.
struct CheckpointRewinder(Arc<Checkpoints>, Option<Arc<cordon::sandbox::Supervisor>>);

#[tonic::async_trait]
impl Rewinder for CheckpointRewinder {
    async fn rewind(&self, user_message_id: &str, dry_run: bool) -> Result<Value, String> {
        let id = user_message_id.to_string();
        if dry_run {
            return self
                .0
                .get(&id)
                .map(|cp| json!({"dry_run": true, "checkpoint": cp}))
                .map_err(|e| e.to_string());
        }
        cordon::checkpoints::while_quiet(&self.0, self.1.as_ref(), move |store| {
            store.rewind(&id).map(|report| {
                json!({"restored": report.restored, "removed": report.removed,
                       "skipped": report.skipped, "kept": report.kept})
            })
        })
        .await
    }
}
