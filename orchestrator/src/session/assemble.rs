//! Putting a session together: the library's composition root.
//!
//! A [`SessionEnv`] names everything a session needs from its surroundings (the merged
//! settings, the backend, the model endpoint, where state lives, which session to start
//! or continue). [`SessionEnv::prepare`] opens the transcript, starts the sandbox and
//! builds the permission engine, hooks and checkpoints, returning a [`Prepared`] whose
//! [`SessionHandles`] a front end can wire into its own UI (a terminal, the stream-json
//! protocol, the HTTP server) before [`Prepared::into_loop`] makes the [`AgentLoop`] with
//! that front end's prompter, observers and event channel.
//!
//! The CLI (`cordon run`), the demo and the server all build sessions here; none of them
//! re-parses command lines to reach this.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::agent::gate::{LoopObserver, Observers, PermissionPrompter, ToolGate};
use crate::agent::{AgentLoop, LoopConfig, LoopEvent, prompt};
use crate::checkpoints::{CheckpointError, CheckpointObserver, Checkpoints};
use crate::hooks::{HookObserver, HookRunner, HookSet, Hooks, HooksError, SessionFacts};
use crate::model::{ContentBlock, Message, ModelClient, ModelConfig, ModelError, Role};
use crate::permissions::PermissionMode;
use crate::policy_gate::{Engine, PolicyGate};
use crate::sandbox::{BackendKind, SandboxError, SandboxSpec, Supervisor};
use crate::session::{Loaded, RecordBody, SessionStore, StoreError, Transcript};
use crate::settings::Settings;
use crate::tools::tool_search::{self, ToolSearchMode};
use crate::tools::{Interrupter, ToolContext, ToolRegistry};

/// Which conversation the session carries on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStart {
    /// A new session; with an id when the caller chose it (the server's unguessable ids).
    New { id: Option<String> },
    /// Continue the session with this id.
    Resume(String),
    /// Continue the most recent session in the workspace.
    ContinueLatest,
    /// A new session that starts with a copy of this one's turns.
    Fork(String),
    /// A fork of the most recent session in the workspace.
    ForkLatest,
    /// A fork of `from` under the id the caller chose.
    ForkAs { from: String, id: String },
    /// A fork of `from` that keeps its conversation up to the record `at`; with
    /// `drops_turn`, only that prompt's turn may be left out.
    ForkAt {
        from: String,
        id: Option<String>,
        at: String,
        drops_turn: Option<String>,
    },
}

/// Everything a session needs from outside, made explicit.
pub struct SessionEnv {
    /// The project directory: canonical and already checked by the caller's location
    /// policy (the backend checks it again before it starts a sandbox).
    pub workspace: PathBuf,
    /// Where the session index, transcripts and checkpoints live (`$CORDON_HOME` for the
    /// CLI, the server's data directory).
    pub home: PathBuf,
    /// The merged settings (the caller decides the layers and the workspace's trust).
    pub settings: Settings,
    pub backend: BackendKind,
    /// A backend kept across sessions (the server's Docker backend and its warm pool):
    /// used when it is of `backend`'s kind and starts this session's sandbox as asked;
    /// otherwise (and when `None`) a backend is made for this session.
    pub shared_backend: Option<Arc<dyn crate::sandbox::Backend>>,
    /// Docker image (docker backend).
    pub image: Option<String>,
    /// Tenant the sandbox belongs to (labels; the server sets it).
    pub tenant: Option<String>,
    /// The model endpoint; the settings' `model` replaces its model name.
    pub model: ModelConfig,
    pub start: SessionStart,
    pub max_turns: Option<u32>,
    /// Overrides the model's context window (`CORDON_CONTEXT_WINDOW` for the CLI).
    pub context_window: Option<u64>,
    /// The user's home: `~` in deny rules and the user's CLAUDE.md (none on a server).
    pub user_home: Option<PathBuf>,
    /// What the caller changes beyond the settings (the Agent SDK's flags).
    pub overrides: SessionOverrides,
}

/// The caller's choices for one session beyond the settings: how the loop asks the model
/// and which built-in tools it offers.
#[derive(Debug, Clone, Default)]
pub struct SessionOverrides {
    pub options: crate::agent::LoopOptions,
    /// The built-in tools offered (`--tools`): `None` for all of them, else only these
    /// (MCP servers' tools are not built-ins and stay).
    pub builtin_tools: Option<Vec<String>>,
    /// Where a session to continue that this store lacks may be taken in from: a Claude
    /// Code configuration directory an Agent SDK session store wrote it back into
    /// (`--session-mirror`; see [`crate::control::mirror`]).
    pub import_from: Option<PathBuf>,
    /// Plugins the caller chose (`--plugin-dir`): their commands, agents, skills, hooks
    /// and MCP servers join the session's (see [`crate::plugins`]).
    pub plugins: Vec<crate::plugins::Plugin>,
}

/// Why a session could not be assembled; each variant names the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum AssembleError {
    #[error("model client: {0}")]
    Model(#[from] ModelError),
    #[error("opening the session: {0}")]
    Store(#[from] StoreError),
    #[error("reading hooks from the settings: {0}")]
    Hooks(#[from] HooksError),
    #[error("starting the sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    #[error("reading the network settings: {0}")]
    Network(#[from] crate::network::policy::DomainError),
    #[error("opening the egress log: {0}")]
    EgressLog(std::io::Error),
    #[error("{0}")]
    Broker(#[from] crate::network::broker::BrokerError),
    #[error("opening the checkpoint store: {0}")]
    Checkpoints(#[from] CheckpointError),
    #[error("closing unfinished tool calls in the transcript: {0}")]
    Transcript(#[from] crate::session::TranscriptError),
    #[error(transparent)]
    Schema(#[from] crate::agent::structured::SchemaError),
    #[error("plugin {plugin}: {why}")]
    Plugin { plugin: String, why: String },
}

/// The parts of a running session a front end keeps and wires into its UI.
pub struct SessionHandles {
    pub session_id: String,
    pub workspace: PathBuf,
    pub store: SessionStore,
    pub settings: Settings,
    pub model_name: String,
    pub engine: Arc<Engine>,
    pub hooks: Arc<Hooks>,
    /// Runs the SessionStart/SessionEnd hooks and the loop's hook moments.
    pub observer: Arc<HookObserver>,
    pub sandbox: Arc<Supervisor>,
    pub ctx: ToolContext,
    pub interrupter: Interrupter,
    pub checkpoints: Checkpoints,
    pub transcript_path: PathBuf,
    /// Messages carried over from a resumed or forked session.
    pub resumed_messages: usize,
    /// The session continues an earlier one (the SessionStart hook's "resume").
    pub resumed: bool,
    /// The session's MCP servers (stdio ones run inside its sandbox).
    pub mcp: crate::mcp::McpSet,
    /// The sub-agents running now (a client sees them start and end, and may stop one).
    pub tasks: crate::subagents::Tasks,
}

impl SessionHandles {
    /// Marks the session used in the index, ends its background shells and tears its
    /// sandbox down; all best effort (the transcript is already on disk), so failures are
    /// logged, not returned. The index is updated and the shells' exec calls ended at
    /// once; the returned future (which holds no borrow of the
    /// handles, so a spawned task may await it) ends the sandbox.
    pub fn end(&self) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        if let Err(e) = self.store.touch(&self.session_id) {
            tracing::warn!(error = %e, "could not update the session index");
        }
        let sandbox = self.sandbox.clone();
        let mcp = self.mcp.clone();
        // Background shells end with the session (the agent kills each one's cgroup).
        self.ctx.background().stop_all();
        async move {
            mcp.stop_all().await;
            if let Err(e) = sandbox.destroy().await {
                tracing::warn!(error = %e, "sandbox teardown reported an error");
            }
        }
    }
}

/// What the loop itself consumes.
struct LoopInputs {
    model: ModelClient,
    transcript: Transcript,
    history: Vec<Message>,
    config: LoopConfig,
    /// Tools beside the built-ins: TodoWrite, Skill, and the MCP servers' tools.
    extra_tools: ToolRegistry,
    /// The sub-agent types the Agent tool offers.
    agents: Vec<crate::subagents::AgentDefinition>,
    /// `--tools`: the built-ins offered (all when `None`).
    builtin_tools: Option<Vec<String>>,
    /// The StructuredOutput tool, when the answer must match a schema.
    structured: Option<crate::agent::StructuredOutput>,
    /// The MCP servers whose tools the loop offers (kept in step with their lists).
    mcp_servers: Vec<Arc<crate::mcp::McpServer>>,
    /// The session's skills (a sub-agent's `skills` preloads some of them).
    skills: Vec<crate::tools::skill::Skill>,
}

/// A session whose sandbox runs, waiting for its front end's parts.
pub struct Prepared {
    pub handles: SessionHandles,
    inputs: LoopInputs,
}

/// What a front end brings to the loop.
#[derive(Default)]
pub struct FrontEnd {
    /// Who answers permission questions (none: an "ask" is a denial that says why).
    pub prompter: Option<Arc<dyn PermissionPrompter>>,
    /// Observers that run before the hooks and checkpoints (in this order).
    pub observers: Vec<Arc<dyn LoopObserver>>,
    /// Where the loop's progress goes.
    pub events: Option<mpsc::UnboundedSender<LoopEvent>>,
    /// Offer ExitPlanMode even when the session does not start in plan mode (a terminal,
    /// where the mode can change at any time).
    pub exit_plan_mode: bool,
}

impl SessionEnv {
    /// Opens (or continues) the session, starts its sandbox, builds its policy.
    pub async fn prepare(self) -> Result<Prepared, AssembleError> {
        self.check_plugins()?;
        let mut model_config = self.model.clone();
        if let Some(m) = &self.settings.model {
            model_config = model_config.with_model(m.clone());
        }
        let model_name = model_config.model.clone();
        let model = ModelClient::new(model_config)?;
        let store = SessionStore::open(&self.home)?;
        if let Some(dir) = &self.overrides.import_from {
            import_missing(&store, &self.start, &self.workspace, dir)?;
        }
        let (session_id, history, transcript) =
            open_session(&store, &self.start, &self.workspace, &model_name)?;
        let resumed_messages = history.len();
        let workspace = self.workspace.clone();
        let settings = &self.settings;
        let engine = Arc::new(Engine::new(settings.engine_config(&workspace)));
        let plugins = &self.overrides.plugins;
        let hook_set = Arc::new(HookSet::from_settings(settings)?);
        hook_set.extend(plugin_hooks(settings, plugins));
        let transcript_path = transcript.path().to_path_buf();
        let mut spec = self.sandbox_spec(&session_id);
        if self.tenant.is_none() {
            self.local_extras(&mut spec).await?;
        }
        let network = crate::network::layers::from_settings(settings)?;
        for w in &network.warnings {
            tracing::warn!("{w}");
        }
        let web_model = crate::tools::web_fetch::SideModel {
            client: model.clone(),
            model: settings
                .web_fetch_model()
                .unwrap_or_else(|| model_name.clone()),
        };
        // Every connection, allowed or refused, the sandbox's and WebFetch's, is recorded
        // beside the transcript.
        let egress_log: Option<Arc<dyn crate::network::proxy::record::ConnectionLog>> =
            if network.policy.grants_egress() {
                let mut log_path = transcript.path().as_os_str().to_owned();
                log_path.push(".egress.jsonl");
                let log = crate::network::proxy::record::JsonlLog::open(Path::new(&log_path))
                    .map_err(AssembleError::EgressLog)?;
                Some(Arc::new(log))
            } else {
                None
            };
        let mut web_tools = ToolRegistry::new();
        if let Some(log) = &egress_log {
            // WebFetch runs here, under the same policy and resolver as the proxy.
            let fetch = crate::tools::web_fetch::for_session(
                &session_id,
                network.policy.clone(),
                Arc::new(crate::network::proxy::dial::SystemResolver),
                log.clone(),
                web_model.clone(),
            );
            web_tools.register(Arc::new(fetch));
        }
        if settings.web_search_enabled() {
            let search_model = crate::tools::web_fetch::SideModel {
                model: model_name.clone(),
                ..web_model
            };
            web_tools.register(Arc::new(crate::tools::web_search::WebSearchTool::new(
                search_model,
            )));
        }
        // HTTP MCP servers are reached from here, under the same policy and resolver.
        let mcp_egress =
            network
                .policy
                .grants_egress()
                .then(|| crate::network::proxy::dial::Dialer {
                    policy: Arc::new(network.policy.clone()),
                    resolver: Arc::new(crate::network::proxy::dial::SystemResolver),
                });
        if let Some(log) = egress_log {
            let mut egress = crate::network::EgressSpec::for_session(&session_id, &network)?;
            egress.log = log;
            spec = spec.with_egress(egress);
        }
        // What of this process's environment the MCP entries may expand (mcp::ProcessVars).
        let mcp_vars = crate::mcp::ProcessVars {
            tenant: self.tenant.is_some(),
            withheld: spec
                .egress
                .iter()
                .flat_map(|e| e.secret_variables())
                .collect(),
        };
        let sandbox = match &self.shared_backend {
            Some(shared) if shared.kind() == self.backend && shared.starts_as_asked(&spec) => {
                Supervisor::start(shared.clone(), spec).await?
            }
            _ => crate::sandbox::supervise(self.backend, &spec).await?,
        };
        let (ctx, interrupter) = ToolContext::supervised(sandbox.clone(), &workspace);
        let ctx = ctx.with_env(settings.env.clone().into_iter().collect());
        let mode_engine = engine.clone();
        let hooks = Arc::new(Hooks::new(
            hook_set,
            HookRunner::new(Some(ctx.clone()), &workspace),
            SessionFacts {
                session_id: session_id.clone(),
                transcript_path: transcript_path.clone(),
                cwd: workspace.clone(),
            },
            Arc::new(move || mode_engine.mode().as_str().to_string()),
        ));
        let observer = Arc::new(HookObserver::new(hooks.clone()));
        // MCP servers: stdio ones start inside the sandbox; their tools join the built-ins.
        let mcp =
            crate::mcp::McpSet::for_session(settings, &workspace, mcp_egress, plugins, &mcp_vars);
        let mut extra_tools = web_tools;
        extra_tools.register(Arc::new(crate::tools::todo_write::TodoWriteTool::default()));
        let mut skills = crate::tools::skill::load(&workspace, self.user_home.as_deref());
        skills.extend(plugins.iter().flat_map(|p| p.skills.iter().cloned()));
        if let Some(skill_tool) = crate::tools::skill::SkillTool::new(skills.clone()) {
            extra_tools.register(Arc::new(skill_tool));
        }
        mcp.connect_into(&ctx, &mut extra_tools).await;
        let mcp_servers = mcp.servers().to_vec();
        let checkpoints = Checkpoints::open(&self.home, &session_id, &workspace)?
            .with_budget(settings.checkpoint_budget_bytes());
        let config = self.loop_config(&model_name);
        let structured = config
            .options
            .json_schema
            .clone()
            .map(crate::agent::StructuredOutput::new)
            .transpose()?;
        let resumed = !matches!(self.start, SessionStart::New { .. });
        let mut agents = crate::subagents::definition::load(
            &workspace,
            self.user_home.as_deref(),
            settings.trust().is_trusted(),
        );
        agents.extend(plugins.iter().flat_map(|p| p.agents.iter().cloned()));
        Ok(Prepared {
            handles: SessionHandles {
                session_id,
                workspace,
                store,
                settings: self.settings,
                model_name,
                engine,
                hooks,
                observer,
                sandbox,
                ctx,
                interrupter,
                checkpoints,
                transcript_path,
                resumed_messages,
                resumed,
                mcp,
                tasks: crate::subagents::Tasks::default(),
            },
            inputs: LoopInputs {
                model,
                transcript,
                history,
                config,
                extra_tools,
                agents,
                builtin_tools: self.overrides.builtin_tools.clone(),
                structured,
                mcp_servers,
                skills,
            },
        })
    }

    /// Plugins that run programs need their directory in the sandbox, which only the
    /// local backend shows (beside the workspace, never around it); a server tenant's
    /// session takes none.
    fn check_plugins(&self) -> Result<(), AssembleError> {
        let refuse = |plugin: &crate::plugins::Plugin, why: &str| AssembleError::Plugin {
            plugin: plugin.name.clone(),
            why: why.to_string(),
        };
        for plugin in &self.overrides.plugins {
            if self.tenant.is_some() {
                return Err(refuse(plugin, "a server session takes no plugins"));
            }
            if self.workspace.starts_with(&plugin.root) && self.workspace != plugin.root {
                return Err(refuse(
                    plugin,
                    "its directory contains the workspace, so the sandbox could not show \
                     it read-only beside it; move the plugin out of the workspace's parents",
                ));
            }
            let inside = plugin.root.starts_with(&self.workspace);
            if self.backend == BackendKind::Docker && plugin.runs_programs() && !inside {
                return Err(refuse(
                    plugin,
                    "its hooks and MCP servers run in the sandbox, which shows plugin \
                     directories outside the workspace on the local backend only: use \
                     --sandbox local",
                ));
            }
        }
        Ok(())
    }

    /// The sandbox this session asks its backend for: the settings' limits, and the
    /// Read/Edit deny rules bound in the kernel as well.
    fn sandbox_spec(&self, session_id: &str) -> SandboxSpec {
        let mut spec = SandboxSpec::new(session_id, &self.workspace);
        spec.image = self.image.clone();
        spec.tenant = self.tenant.clone();
        spec.limits = Some(self.settings.sandbox_limits());
        let denies = crate::sandbox::deny::resolve(
            &crate::sandbox::deny::rules_from_settings(&self.settings),
            &self.workspace,
            self.user_home.as_deref(),
        );
        (spec.denied_read, spec.denied_write) = (denies.read, denies.write);
        spec
    }

    /// What a user's own session adds (never a server tenant's, whose sandboxes must not
    /// see the server user's home or share its caches, nor write host directories its
    /// request names): the user's toolchains on the local backend, the settings'
    /// additional directories, and a trusted workspace's devcontainer as the Docker image
    /// when none was asked for.
    async fn local_extras(&self, spec: &mut SandboxSpec) -> Result<(), SandboxError> {
        spec.toolchains =
            crate::toolchains::for_session(&self.settings, &self.home, &self.workspace);
        spec.additional_dirs = self.settings.additional_directories();
        // The plugins' directories, read-only at their own paths, so their hooks and
        // servers find their files (each root was checked when it was loaded).
        for plugin in &self.overrides.plugins {
            let root = &plugin.root;
            let seen = root.starts_with(&self.workspace)
                || spec.additional_dirs.iter().any(|d| root.starts_with(d))
                || spec
                    .toolchains
                    .view
                    .read_only
                    .iter()
                    .any(|r| root.starts_with(r));
            if !seen {
                spec.toolchains.view.read_only.push(root.clone());
            }
        }
        if spec.image.is_none() && self.backend == crate::sandbox::BackendKind::Docker {
            spec.image = crate::sandbox::docker::devcontainer::image_for_session(
                &self.workspace,
                self.settings.trust().is_trusted(),
                &mut |line| eprintln!("cordon: {line}"),
            )
            .await?;
        }
        Ok(())
    }

    fn loop_config(&self, model_name: &str) -> LoopConfig {
        let mut config = LoopConfig::new(model_name, &self.workspace);
        config.max_turns = self.max_turns;
        // The settings' `env` first, as Claude Code applies it to its own environment.
        let tool_search = self.settings.env.get(tool_search::ENV).cloned();
        config.tool_search = ToolSearchMode::from_value(
            tool_search
                .or_else(|| std::env::var(tool_search::ENV).ok())
                .as_deref(),
        );
        config.options = self.overrides.options.clone();
        if let Some(window) = self.context_window {
            config.context_window = window;
        }
        config.commands = crate::slash_commands::load(&self.workspace, self.user_home.as_deref());
        for plugin in &self.overrides.plugins {
            config.commands.extend(plugin.commands.iter().cloned());
        }
        let mut memory = prompt::memory_files(&self.workspace, self.user_home.as_deref());
        if let Some(only) = &self.settings.setting_sources {
            memory.retain(|file| only.contains(&file.source()));
        }
        let memory = prompt::load_memory(&self.workspace, &memory);
        (config.memory, config.memory_files) = (memory.text, memory.files);
        config
    }
}

impl Prepared {
    /// Adds sub-agent types the front end brings (the SDK client's `agents`); they shadow
    /// the files' types of the same name.
    pub fn add_agents(&mut self, agents: Vec<crate::subagents::AgentDefinition>) {
        let files = std::mem::take(&mut self.inputs.agents);
        self.inputs.agents = crate::subagents::definition::shadowing(agents, files);
    }

    /// The sub-agent types the Agent tool will offer.
    pub fn agents(&self) -> &[crate::subagents::AgentDefinition] {
        &self.inputs.agents
    }

    /// The names of the session's skills.
    pub fn skill_names(&self) -> Vec<&str> {
        self.inputs.skills.iter().map(|s| s.name.as_str()).collect()
    }

    /// Adds tools the front end brings (the SDK client's in-process MCP servers').
    pub fn add_tools(&mut self, tools: &ToolRegistry) {
        for name in tools.names() {
            if let Some(tool) = tools.get(name) {
                self.inputs.extra_tools.register(tool.clone());
            }
        }
    }

    /// The MCP servers whose tools the loop offers, when the front end changed the set
    /// (its SDK servers joined, replacing configured servers of their names).
    pub fn set_mcp_servers(&mut self, servers: Vec<Arc<crate::mcp::McpServer>>) {
        self.inputs.mcp_servers = servers;
    }

    /// Removes the tools of the MCP server `server` (one the front end replaced).
    pub fn remove_tools_of(&mut self, server: &str) {
        let prefix = crate::mcp::tool::full_name(server, "");
        let names: Vec<String> = self
            .inputs
            .extra_tools
            .names()
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .map(str::to_string)
            .collect();
        for name in names {
            self.inputs.extra_tools.remove(&name);
        }
    }

    /// The loop, with the front end's prompter, observers and event channel; the hooks and
    /// checkpoints observe after the front end's own observers.
    pub fn into_loop(self, front: FrontEnd) -> (AgentLoop, SessionHandles) {
        self.into_loop_with_gate(front, |gate| gate)
    }

    /// [`Prepared::into_loop`], with the session's policy gate passed through `wrap` first
    /// (the server wraps it to audit every call; the wrapper must not loosen the verdict).
    pub fn into_loop_with_gate(
        self,
        front: FrontEnd,
        wrap: impl FnOnce(Arc<dyn ToolGate>) -> Arc<dyn ToolGate>,
    ) -> (AgentLoop, SessionHandles) {
        let Prepared { handles, inputs } = self;
        let mut tools = tools_for_mode(
            &handles.engine,
            front.prompter.clone(),
            front.exit_plan_mode,
        );
        for name in inputs.extra_tools.names() {
            if let Some(tool) = inputs.extra_tools.get(name) {
                tools.register(tool.clone());
            }
        }
        let offered = |name: &str| {
            inputs
                .builtin_tools
                .as_ref()
                .is_none_or(|only| builtin_offered(only, name))
        };
        if inputs.builtin_tools.is_some() {
            let names: Vec<String> = tools.names().into_iter().map(String::from).collect();
            for name in names.iter().filter(|n| !offered(n)) {
                tools.remove(name);
            }
        }
        let mut observers = front.observers;
        observers.push(handles.observer.clone());
        observers.push(Arc::new(
            CheckpointObserver::new(handles.checkpoints.clone())
                .with_sandbox(handles.sandbox.clone()),
        ));
        let gate = wrap(Arc::new(PolicyGate::new(
            handles.engine.clone(),
            handles.hooks.clone(),
            front.prompter,
        )));
        // The Agent tool: sub-agents on the same model, sandbox, gate, hooks and events,
        // with the session's other tools (or a subset of them).
        let shared = crate::agent::LoopShared::default();
        let kit = crate::subagents::SubagentKit {
            model: inputs.model.clone(),
            config: inputs.config.clone(),
            tools: tools.clone(),
            gate: gate.clone(),
            hooks: Some(handles.hooks.clone()),
            transcript_path: handles.transcript_path.clone(),
            session_id: handles.session_id.clone(),
            events: front.events.clone(),
            definitions: inputs.agents,
            parent: Some(shared.clone()),
            tasks: handles.tasks.clone(),
            mcp: inputs.mcp_servers.clone(),
            skills: inputs.skills,
        };
        if offered(crate::subagents::tool::NAME) {
            tools.register(Arc::new(crate::subagents::AgentTool::new(kit)));
            tools.alias(
                crate::subagents::tool::OLD_NAME,
                crate::subagents::tool::NAME,
            );
        }
        // The main loop's alone: a sub-agent reports to its parent, not to the user.
        if let Some(structured) = &inputs.structured {
            tools.register(Arc::new(structured.clone()));
        }
        let mut agent = AgentLoop::new(
            inputs.model,
            tools,
            gate,
            handles.ctx.clone(),
            inputs.transcript,
            inputs.config,
        )
        .with_shared(shared)
        .with_mcp(crate::mcp::sync::ToolSync::all(inputs.mcp_servers))
        .with_history(inputs.history)
        .with_observer(Arc::new(Observers(observers)));
        if let Some(structured) = inputs.structured {
            agent = agent.with_structured_output(structured);
        }
        if let Some(events) = front.events {
            agent = agent.with_events(events);
        }
        (agent, handles)
    }
}

/// Whether the built-in `name` is among `only` (`--tools`); an MCP server's tool is no
/// built-in and always is. `Task` is the Agent tool's older name.
fn builtin_offered(only: &[String], name: &str) -> bool {
    name.starts_with("mcp__")
        || only.iter().any(|o| {
            o == name
                || (o == crate::subagents::tool::OLD_NAME && name == crate::subagents::tool::NAME)
        })
}

/// The built-in tools, plus ExitPlanMode when the session starts in plan mode or the front
/// end can enter plan mode at any time.
fn tools_for_mode(
    engine: &Arc<Engine>,
    prompter: Option<Arc<dyn PermissionPrompter>>,
    exit_plan_mode: bool,
) -> ToolRegistry {
    let tools = ToolRegistry::default_tools();
    if engine.mode() == PermissionMode::Plan || exit_plan_mode {
        tools.with_exit_plan_mode(Some(engine.clone()), prompter)
    } else {
        tools
    }
}

/// Takes in the session `start` continues from `config_dir` (an SDK session store's
/// copy) when this store does not have it.
fn import_missing(
    store: &SessionStore,
    start: &SessionStart,
    workspace: &Path,
    config_dir: &Path,
) -> Result<(), StoreError> {
    let id = match start {
        SessionStart::Resume(id) | SessionStart::Fork(id) => id,
        SessionStart::ForkAs { from, .. } | SessionStart::ForkAt { from, .. } => from,
        _ => return Ok(()),
    };
    match store.get(id) {
        Err(StoreError::NotFound(_)) => {}
        other => return other.map(drop),
    }
    let source = crate::control::mirror::store_path(config_dir, workspace, id);
    if !source.is_file() {
        return Ok(());
    }
    store.import(id, workspace, &source)?;
    tracing::info!(session = %id, from = %source.display(), "took in the session from the SDK's session store");
    Ok(())
}

/// The plugins' hooks, unless the settings run none but the operator's.
fn plugin_hooks(
    settings: &Settings,
    plugins: &[crate::plugins::Plugin],
) -> Vec<crate::hooks::HookEntry> {
    let hooks: Vec<crate::hooks::HookEntry> = plugins
        .iter()
        .flat_map(|p| p.hooks.iter().cloned())
        .collect();
    // Plugins are the user's to install: a workspace's `disableAllHooks` does not reach them.
    let disabled = settings.hooks_disabled_for(crate::settings::Source::User);
    if !hooks.is_empty() && (disabled || settings.allow_managed_hooks_only) {
        tracing::warn!(
            "the plugins' hooks do not run: the settings allow {}",
            if disabled {
                "no hooks"
            } else {
                "managed hooks only"
            }
        );
        return Vec::new();
    }
    hooks
}

/// The session's id, the conversation so far and its open transcript.
fn open_session(
    store: &SessionStore,
    start: &SessionStart,
    workspace: &Path,
    model: &str,
) -> Result<(String, Vec<Message>, Transcript), AssembleError> {
    let previous = match start {
        SessionStart::New { id } => {
            let (info, transcript) = store.create_with_id(workspace, model, id.as_deref())?;
            return Ok((info.id, Vec::new(), transcript));
        }
        SessionStart::Fork(_) | SessionStart::ForkLatest | SessionStart::ForkAs { .. } => {
            let (previous, new_id) = match start {
                SessionStart::Fork(id) => (id.clone(), None),
                SessionStart::ForkAs { from, id } => (from.clone(), Some(id.as_str())),
                _ => (store.latest_in(workspace)?.id, None),
            };
            let (info, transcript) = store.fork_with_id(&previous, new_id)?;
            let loaded = Loaded::read(&info.transcript)?;
            let (messages, _) = loaded.conversation();
            return Ok((info.id, messages, transcript));
        }
        SessionStart::ForkAt {
            from,
            id,
            at,
            drops_turn,
        } => {
            let (info, transcript) =
                store.fork_at(from, id.as_deref(), at, drops_turn.as_deref())?;
            let loaded = Loaded::read(&info.transcript)?;
            let (messages, _) = loaded.conversation();
            return Ok((info.id, messages, transcript));
        }
        SessionStart::Resume(id) => id.clone(),
        SessionStart::ContinueLatest => store.latest_in(workspace)?.id,
    };
    let (info, loaded, mut transcript) = store.resume(&previous)?;
    let (messages, closed) = loaded.conversation();
    if !closed.is_empty() {
        // Make the closing results part of the record, so the transcript itself is valid.
        let results = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| {
                m.content
                    .iter()
                    .filter(|b| matches!(b, ContentBlock::ToolResult { tool_use_id, .. } if closed.contains(tool_use_id)))
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        transcript.append(RecordBody::User {
            message: Message::user(results),
        })?;
        transcript.sync()?;
        tracing::info!(closed = ?closed, "closed tool calls that never finished");
    }
    Ok((info.id, messages, transcript))
}
