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
//! rewind_files, set_model, mcp_status, mcp_toggle, mcp_reconnect, mcp_message (a message
//! of the client's in-process MCP server), get_context_usage, stop_task) are answered
//! while a run goes on. Sub-agents are announced as tasks
//! (`task_started`, `task_notification`). The session ends at stdin EOF. With
//! `--permission-prompt-tool stdio`, questions the rules ask go to the client
//! (can_use_tool) instead of being denied.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use cordon::agent::gate::PermissionPrompter;
use cordon::agent::{AgentLoop, LoopEvent, LoopObserver, LoopOptions, RunOutcome};
use cordon::checkpoints::Checkpoints;
use cordon::control::{
    self, Controller, Event, McpControl, ModeSetter, PromptUuids, RecordInfo, Rewinder,
    SdkHookCallbacks, SdkPrompter, SessionControls,
};
use cordon::hooks::{HookObserver, Hooks};
use cordon::mcp::{McpServer, McpSet, Timeouts};
use cordon::model::{ModelConfig, ThinkingConfig};
use cordon::output::OutputFormat;
use cordon::session::{Prepared, SessionOverrides};
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

/// The flags of the stream-json protocol, and the Agent SDK's other flags, each applied as
/// Claude Code applies it, so an SDK drives Cordon unchanged.
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
    /// `--plugin-dir`: each directory (relative ones from `cwd`) loaded as a plugin; the
    /// ones that fail to load are reported and left out, as Claude Code leaves them.
    pub fn plugins(
        &self,
        cwd: &std::path::Path,
    ) -> (
        Vec<cordon::plugins::Plugin>,
        Vec<cordon::plugins::PluginError>,
    ) {
        let dirs: Vec<std::path::PathBuf> = self.plugin_dir.iter().map(|d| cwd.join(d)).collect();
        cordon::plugins::load_all(&dirs)
    }

    /// What the flags change about the session's loop and its built-in tools.
    pub fn overrides(&self) -> anyhow::Result<SessionOverrides> {
        let system_prompt = match (&self.system_prompt, &self.system_prompt_file) {
            (Some(text), None) => Some(text.clone()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading --system-prompt-file {path}"))?,
            ),
            // The SDK passes `--system-prompt ""` beside a file only when the caller set
            // none; two prompts are a mistake.
            (Some(text), Some(_)) if !text.is_empty() => {
                bail!("--system-prompt and --system-prompt-file cannot both be given")
            }
            (Some(_), Some(path)) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading --system-prompt-file {path}"))?,
            ),
            (None, None) => None,
        };
        let max_budget_usd = match &self.max_budget_usd {
            None => None,
            Some(text) => match text.trim().parse::<f64>() {
                Ok(usd) if usd.is_finite() && usd > 0.0 => Some(usd),
                _ => bail!("--max-budget-usd {text:?}: expected a positive number of dollars"),
            },
        };
        let json_schema = self
            .json_schema
            .as_deref()
            .map(cordon::agent::structured::parse_flag)
            .transpose()?;
        let options = LoopOptions {
            system_prompt,
            append_system_prompt: self.append_system_prompt.clone(),
            thinking: self.thinking_config()?,
            effort: self.effort()?,
            task_budget: match &self.task_budget {
                None => None,
                Some(text) => Some(text.trim().parse::<u64>().map_err(|_| {
                    anyhow::anyhow!("--task-budget {text:?}: expected a number of tokens")
                })?),
            },
            max_budget_usd,
            json_schema,
            spend: Default::default(),
        };
        Ok(SessionOverrides {
            options,
            builtin_tools: self.builtin_tools(),
            // The SDK resumes a session of its store by writing it back under a temporary
            // CLAUDE_CONFIG_DIR: one Cordon lacks is taken in from there.
            import_from: self
                .session_mirror
                .then(control::mirror::config_dir)
                .flatten(),
            plugins: Vec::new(),
        })
    }

    /// `--tools`: `default` for all built-ins, `""` for none, else the names (comma or
    /// space separated).
    fn builtin_tools(&self) -> Option<Vec<String>> {
        let list = self.tools.as_deref()?;
        if list.trim() == "default" {
            return None;
        }
        Some(
            list.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect(),
        )
    }

    /// `--thinking adaptive|disabled|enabled`, `--max-thinking-tokens N` (0: none) and
    /// `--thinking-display`, as the API's `thinking`.
    fn thinking_config(&self) -> anyhow::Result<Option<ThinkingConfig>> {
        let budget = match &self.max_thinking_tokens {
            None => None,
            Some(text) => Some(text.trim().parse::<u32>().map_err(|_| {
                anyhow::anyhow!("--max-thinking-tokens {text:?}: expected a number of tokens")
            })?),
        };
        let display = match self.thinking_display.as_deref() {
            None => None,
            Some(d @ ("summarized" | "omitted")) => Some(d.to_string()),
            Some(other) => {
                bail!("--thinking-display {other:?}: expected summarized or omitted")
            }
        };
        Ok(match (self.thinking.as_deref(), budget) {
            (Some("disabled"), _) | (None, Some(0)) => Some(ThinkingConfig::Disabled),
            (Some("adaptive"), _) => Some(ThinkingConfig::Adaptive { display }),
            (Some("enabled") | None, Some(budget_tokens)) => Some(ThinkingConfig::Enabled {
                budget_tokens,
                display,
            }),
            (Some("enabled"), None) => bail!("--thinking enabled needs --max-thinking-tokens"),
            (Some(other), _) => {
                bail!("--thinking {other:?}: expected adaptive, enabled or disabled")
            }
            (None, None) => None,
        })
    }

    /// `--effort`, one of the API's levels.
    fn effort(&self) -> anyhow::Result<Option<String>> {
        use cordon::agent::options::EFFORT_LEVELS as LEVELS;
        match self.effort.as_deref() {
            None => Ok(None),
            Some(level) if LEVELS.contains(&level) => Ok(Some(level.to_string())),
            Some(other) => bail!("--effort {other:?}: expected one of {}", LEVELS.join(", ")),
        }
    }

    /// The model client's part: `--betas`, `--fallback-model`, and the raw stream events
    /// `--include-partial-messages` shows.
    pub fn configure_model(&self, mut config: ModelConfig) -> anyhow::Result<ModelConfig> {
        if let Some(betas) = &self.betas {
            config.betas = betas
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|b| !b.is_empty())
                .map(String::from)
                .collect();
        }
        // The API takes `output_config.task_budget` under its beta.
        if self.task_budget.is_some() && !config.betas.iter().any(|b| b == TASK_BUDGET_BETA) {
            config.betas.push(TASK_BUDGET_BETA.to_string());
        }
        if let Some(fallback) = self.fallback_model.as_deref().filter(|f| !f.is_empty()) {
            config.fallback_model = Some(fallback.to_string());
        }
        config.raw_events = self.include_partial_messages;
        Ok(config)
    }

    /// `--session-id`: the id a new session (or a fork) gets; a UUID, as Claude Code
    /// requires.
    pub fn session_id(&self) -> anyhow::Result<Option<String>> {
        match &self.session_id {
            None => Ok(None),
            Some(id) => match uuid::Uuid::parse_str(id) {
                Ok(uuid) => Ok(Some(uuid.hyphenated().to_string())),
                Err(_) => bail!("--session-id {id:?} is not a UUID"),
            },
        }
    }

    /// `--mcp-config`: each a file or inline JSON of `{"mcpServers": {...}}`, merged (a
    /// later one's server replaces an earlier one's of the same name). The client's own
    /// in-process servers (`"type": "sdk"`) are left out: they live in the client and
    /// come through the control protocol's initialize, not as programs to start.
    pub fn mcp_servers(&self) -> anyhow::Result<Option<serde_json::Map<String, Value>>> {
        if self.mcp_config.is_empty() {
            return Ok(None);
        }
        let mut servers = serde_json::Map::new();
        for arg in &self.mcp_config {
            let (text, shown) = if arg.trim_start().starts_with('{') {
                (arg.clone(), "inline JSON".to_string())
            } else {
                let text = std::fs::read_to_string(arg)
                    .with_context(|| format!("reading --mcp-config {arg}"))?;
                (text, arg.clone())
            };
            let value: Value = serde_json::from_str(&text)
                .with_context(|| format!("--mcp-config ({shown}) is not valid JSON"))?;
            let Some(map) = value.get("mcpServers").and_then(Value::as_object) else {
                bail!("--mcp-config ({shown}) has no \"mcpServers\" object");
            };
            for (name, entry) in map {
                if entry.get("type").and_then(Value::as_str) != Some("sdk") {
                    servers.insert(name.clone(), entry.clone());
                }
            }
        }
        Ok(Some(servers))
    }

    /// `--setting-sources user,project,local` (any of them; empty: none).
    pub fn setting_sources(&self) -> anyhow::Result<Option<Vec<cordon::settings::Source>>> {
        let Some(list) = &self.setting_sources else {
            return Ok(None);
        };
        let mut sources = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match cordon::settings::Source::parse_file_source(name) {
                Some(source) => sources.push(source),
                None => bail!("--setting-sources {name:?}: expected user, project or local"),
            }
        }
        Ok(Some(sources))
    }

    /// `--add-dir`: absolute (relative ones from `cwd`); they join
    /// `permissions.additionalDirectories` of the command line's settings, and so pass
    /// the same host-side checks before the sandbox mounts them.
    pub fn add_dirs(&self, cwd: &std::path::Path) -> Vec<String> {
        self.add_dir
            .iter()
            .map(|d| cwd.join(d).display().to_string())
            .collect()
    }
}

/// The beta `output_config.task_budget` needs.
const TASK_BUDGET_BETA: &str = "task-budgets-2026-03-13";

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
            mirror: None,
        });
        self.prompt_over_stdio.then(|| {
            Arc::new(SdkPrompter::new(self.controller.clone()).with_interrupts(interrupts))
                as Arc<dyn PermissionPrompter>
        })
    }

    /// `--include-hook-events`: the session's command hooks are reported as they run.
    pub fn report_hooks(&self, hooks: &Hooks, session_id: &str) {
        hooks
            .runner
            .set_events(Arc::new(control::hook_events::SdkHookEvents::new(
                self.controller.clone(),
                session_id,
            )));
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
                // The skills and MCP servers a sub-agent names must be the session's.
                let skills = prepared.skill_names();
                let mut servers: Vec<&str> = prepared
                    .handles
                    .mcp
                    .servers()
                    .iter()
                    .map(|s| s.name())
                    .collect();
                servers.extend(self.sdk_server_names.iter().map(String::as_str));
                let check = |defs: &[_]| control::agents::check_names(defs, &skills, &servers);
                match control::session::initialize(&controls, &hooks, &agents, check) {
                    Ok((answer, defs)) => {
                        self.controller
                            .send(control::protocol::success_response(&request_id, answer));
                        prepared.add_agents(defs);
                    }
                    Err(why) => {
                        tracing::warn!("initialize refused: {why}");
                        self.controller
                            .send(control::protocol::error_response(&request_id, &why));
                    }
                }
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
        prepared.set_mcp_servers(all.servers().to_vec());
        if let Some(controls) = &mut self.controls {
            controls.mcp = Some(McpControl {
                servers: all,
                ctx: mcp.ctx,
            });
        }
    }

    /// `--session-mirror`: the session's transcript at `transcript` goes to the client as
    /// it is written, keyed as Claude Code keys session `session_id` of `workspace`; a
    /// session carried on (not new, not a fork) starts at its transcript's end.
    pub fn set_mirror(
        &mut self,
        transcript: &std::path::Path,
        workspace: &std::path::Path,
        session_id: &str,
        from_start: bool,
    ) {
        let Some(config) = control::mirror::config_dir() else {
            tracing::warn!(
                "--session-mirror: neither CLAUDE_CONFIG_DIR nor HOME is set; not mirrored"
            );
            return;
        };
        let file_path = control::mirror::store_path(&config, workspace, session_id);
        let mirror = control::mirror::TranscriptMirror::new(transcript, &file_path, from_start);
        if let Some(controls) = &mut self.controls {
            controls.mirror = Some(Arc::new(std::sync::Mutex::new(mirror)));
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
        if init.get("slash_commands").is_none() {
            init["slash_commands"] = json!([]);
        }
        init["output_style"] = json!("default");
        if let Some(mcp) = &controls.mcp {
            init["mcp_servers"] = json!(mcp.servers.init_entries());
        }
        init["agents"] = json!(controls.agents.iter().map(|d| &d.name).collect::<Vec<_>>());
        self.controller.send(init);
        control::session::send_mirror(&self.controller, &controls);
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        stream: StreamArgs,
    }

    fn args(flags: &[&str]) -> StreamArgs {
        let mut argv = vec!["cordon"];
        argv.extend_from_slice(flags);
        Cli::try_parse_from(argv).unwrap().stream
    }

    #[test]
    fn tools_thinking_and_effort_are_read_as_claude_code_reads_them() {
        assert_eq!(args(&["--tools", "default"]).builtin_tools(), None);
        assert_eq!(args(&["--tools", ""]).builtin_tools(), Some(vec![]));
        assert_eq!(
            args(&["--tools", "Read,Grep"]).builtin_tools(),
            Some(vec!["Read".to_string(), "Grep".to_string()])
        );
        let thinking = |flags: &[&str]| args(flags).thinking_config();
        assert_eq!(
            thinking(&["--max-thinking-tokens", "2048"]).unwrap(),
            Some(ThinkingConfig::Enabled {
                budget_tokens: 2048,
                display: None
            })
        );
        assert_eq!(
            thinking(&["--max-thinking-tokens", "0"]).unwrap(),
            Some(ThinkingConfig::Disabled)
        );
        assert_eq!(
            thinking(&["--thinking", "adaptive", "--thinking-display", "omitted"]).unwrap(),
            Some(ThinkingConfig::Adaptive {
                display: Some("omitted".into())
            })
        );
        for bad in [
            &["--thinking", "lots"][..],
            &["--thinking", "enabled"],
            &["--max-thinking-tokens", "many"],
            &["--thinking", "adaptive", "--thinking-display", "loud"],
        ] {
            assert!(thinking(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            args(&["--effort", "high"]).effort().unwrap(),
            Some("high".into())
        );
        let err = args(&["--effort", "extreme"]).effort().unwrap_err();
        assert!(err.to_string().contains("low, medium, high"), "{err}");
    }

    #[test]
    fn budgets_schemas_and_session_ids_are_checked_before_anything_runs() {
        for bad in ["0", "-1", "lots", "NaN"] {
            let flag = format!("--max-budget-usd={bad}");
            assert!(args(&[&flag]).overrides().is_err(), "{bad}");
        }
        let o = args(&["--max-budget-usd", "0.5", "--task-budget", "1000"])
            .overrides()
            .unwrap();
        assert_eq!(o.options.max_budget_usd, Some(0.5));
        assert_eq!(o.options.task_budget, Some(1000));
        assert!(args(&["--json-schema", "{not json"]).overrides().is_err());
        assert!(args(&["--session-id", "not-a-uuid"]).session_id().is_err());
        assert_eq!(
            args(&["--session-id=0B5C1E0E-5D7A-4C39-9A57-3F1C2A9D0001"])
                .session_id()
                .unwrap()
                .as_deref(),
            Some("0b5c1e0e-5d7a-4c39-9a57-3f1c2a9d0001")
        );
        assert!(
            args(&[
                "--system-prompt",
                "a",
                "--system-prompt-file",
                "/nonexistent"
            ])
            .overrides()
            .is_err()
        );
    }

    #[test]
    fn mcp_config_merges_files_and_json_and_leaves_the_clients_own_servers_out() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("servers.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {"a": {"command": "one"}, "b": {"command": "file"}}}"#,
        )
        .unwrap();
        let inline = r#"{"mcpServers": {"b": {"command": "inline"}, "mine": {"type": "sdk", "name": "mine"}}}"#;
        let servers = args(&[
            "--mcp-config",
            file.to_str().unwrap(),
            "--mcp-config",
            inline,
        ])
        .mcp_servers()
        .unwrap()
        .unwrap();
        assert_eq!(servers["a"]["command"], "one");
        assert_eq!(servers["b"]["command"], "inline", "a later one replaces");
        assert!(
            !servers.contains_key("mine"),
            "sdk servers live in the client"
        );
        assert!(args(&["--mcp-config", "{\"x\": 1}"]).mcp_servers().is_err());
        assert!(
            args(&["--mcp-config", "/nonexistent.json"])
                .mcp_servers()
                .is_err()
        );
        assert_eq!(args(&[]).mcp_servers().unwrap(), None);
    }

    #[test]
    fn setting_sources_name_files_and_betas_reach_the_client() {
        use cordon::settings::Source;
        assert_eq!(
            args(&["--setting-sources=user,local"])
                .setting_sources()
                .unwrap(),
            Some(vec![Source::User, Source::Local])
        );
        assert_eq!(
            args(&["--setting-sources="]).setting_sources().unwrap(),
            Some(vec![])
        );
        assert!(
            args(&["--setting-sources=managed"])
                .setting_sources()
                .is_err()
        );
        let config = ModelConfig::new(
            "http://127.0.0.1:9",
            cordon::model::Credentials::ApiKey("k".into()),
        );
        let config = args(&[
            "--betas",
            "a-1,b-2",
            "--task-budget",
            "5",
            "--fallback-model",
            "claude-haiku-4-5",
            "--include-partial-messages",
        ])
        .configure_model(config)
        .unwrap();
        assert_eq!(config.betas, ["a-1", "b-2", TASK_BUDGET_BETA]);
        assert_eq!(config.fallback_model.as_deref(), Some("claude-haiku-4-5"));
        assert!(config.raw_events);
    }
}
