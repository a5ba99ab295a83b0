//! `cordon run [-p] PROMPT`: one agent task, headless. Starts (or resumes) a session, a
//! sandbox on the chosen backend, and the loop; prints the answer in the chosen format;
//! tears the sandbox down; exits non-zero when the run ended in error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use std::sync::Arc;

use cordon::agent::{AgentLoop, LoopConfig, LoopEvent, prompt};
use cordon::checkpoints::{CheckpointObserver, Checkpoints};
use cordon::hooks::{HookObserver, HookRunner, HookSet, Hooks, SessionFacts};
use cordon::interactive::{Interactive, SessionParts};
use cordon::model::{ModelClient, ModelConfig};
use cordon::output::{self, OutputFormat};
use cordon::permissions::PermissionMode;
use cordon::policy_gate::{Engine, PolicyGate};
use cordon::sandbox::{BackendKind, SandboxSpec};
use cordon::session::SessionStore;
use cordon::settings::{CliSettings, Settings, SettingsArg};
use cordon::tools::{ToolContext, ToolRegistry};
use tokio::sync::mpsc;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task. When absent: an interactive session if standard input and output are a
    /// terminal (and not -p), else read from standard input.
    pub prompt: Option<String>,
    /// Headless "print" mode, also on a terminal.
    #[arg(short = 'p', long = "print")]
    pub print: bool,
    /// The project directory (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Where tools run.
    #[arg(long, value_enum, default_value = "local")]
    pub sandbox: BackendKind,
    /// Docker image (docker backend).
    #[arg(long)]
    pub image: Option<String>,
    /// The permission mode (default: the settings' `permissions.defaultMode`, else default).
    #[arg(long, value_enum)]
    pub permission_mode: Option<PermissionMode>,
    /// Tools or rules to allow without asking, e.g. "Read Edit Bash(npm test:*)".
    #[arg(long = "allowedTools", alias = "allowed-tools", num_args = 1..)]
    pub allowed_tools: Vec<String>,
    /// Tools or rules to deny; a bare tool name removes the tool.
    #[arg(long = "disallowedTools", alias = "disallowed-tools", num_args = 1..)]
    pub disallowed_tools: Vec<String>,
    /// A settings file in Claude Code's shape, or the same JSON inline (`'{"permissions":
    /// ...}'`), above the workspace's and the user's settings (below the managed ones and
    /// the flags).
    #[arg(long)]
    pub settings: Option<String>,
    /// Trust the workspace for this run: its own settings (allow rules, modes, hooks, env)
    /// count in full, as after `cordon trust`. The managed settings may refuse it.
    #[arg(long)]
    pub trust: bool,
    /// The model (default: ANTHROPIC_MODEL, then Cordon's default).
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long)]
    pub max_turns: Option<u32>,
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: OutputFormat,
    /// Continue the session with this id.
    #[arg(long, conflicts_with = "continue_last")]
    pub resume: Option<String>,
    /// Continue the most recent session in this workspace.
    #[arg(short = 'c', long = "continue")]
    pub continue_last: bool,
    /// With --resume/--continue: continue in a new session that copies the old one.
    #[arg(long)]
    pub fork_session: bool,
    /// Print each message as it completes, also in text mode (to stderr).
    #[arg(long)]
    pub verbose: bool,
    /// `--input-format` and the other flags of the stream-json protocol.
    #[command(flatten)]
    pub stream: super::stream_input::StreamArgs,
}

pub fn main(args: RunArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cordon: cannot start the runtime: {e}");
            return ExitCode::from(super::EXIT_CORDON_FAILED);
        }
    };
    let result = runtime.block_on(run(args));
    // Do not wait for a blocked stdin reader (stream-json input) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordon: {}", output::for_terminal(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    run_with_model(args, None).await
}

/// `run`, with the model endpoint given instead of read from the environment (the demo).
pub async fn run_with_model(
    args: RunArgs,
    model_override: Option<ModelConfig>,
) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let workspace = super::workspace_or_cwd(args.workspace.as_deref())?;
    let mut stream = super::stream_input::start(&args.stream, args.output_format)?;
    let interactive = is_interactive(&args, stream.is_some());
    let prompt_text = match &args.prompt {
        Some(p) => p.clone(),
        None if stream.is_some() || interactive => String::new(),
        None => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .context("reading the prompt from stdin")?;
            s
        }
    };
    if stream.is_none() && !interactive && prompt_text.trim().is_empty() {
        bail!("no prompt: pass it as an argument or on standard input");
    }
    // The settings' `env` reaches every command of the session (Bash, hooks in the
    // sandbox); `model` is the default for --model.
    let cli = CliSettings {
        settings: args.settings.as_deref().map(SettingsArg::parse),
        trust: args.trust,
        allowed_tools: args.allowed_tools.clone(),
        disallowed_tools: args.disallowed_tools.clone(),
        permission_mode: args.permission_mode,
        model: args.model.clone(),
    };
    let load = || Settings::load(&workspace, cli.clone());
    let mut settings = load().context("loading the settings")?;
    // At a terminal, an untrusted workspace whose settings would widen asks once, before
    // anything is built from them (and before any model call).
    let mut asked = false;
    if interactive {
        let store = cordon::trust::TrustStore::from_env().ok();
        let first = cordon::interactive::trust::first_use(settings, store.as_ref(), load)
            .await
            .context("asking whether to trust the workspace")?;
        (settings, asked) = (first.settings, first.asked);
    }
    // Said once, before anything runs: what the untrusted workspace's settings lost.
    if let Some(notice) = settings.untrusted_notice().filter(|_| !asked) {
        eprintln!("cordon: {notice}");
    }

    let mut model_config = match model_override {
        Some(config) => config,
        None => ModelConfig::from_env().context("model configuration")?,
    };
    if let Some(m) = &settings.model {
        model_config = model_config.with_model(m.clone());
    }
    let model_name = model_config.model.clone();
    let model = ModelClient::new(model_config).context("model client")?;

    let store =
        SessionStore::open(&cordon::paths::cordon_home()?).context("opening the session store")?;
    let (session_id, history, transcript) = open_session(&store, &args, &workspace, &model_name)?;
    let resumed_messages = history.len();

    let engine = Arc::new(Engine::new(settings.engine_config(&workspace)));
    let hook_set =
        Arc::new(HookSet::from_settings(&settings).context("reading hooks from the settings")?);
    let transcript_path = transcript.path().to_path_buf();
    let mut spec = SandboxSpec::new(session_id.clone(), &workspace);
    spec.image = args.image.clone();
    spec.limits = Some(settings.sandbox_limits());
    // Read/Edit deny rules also bind the kernel: the same rules, masked in the sandbox.
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let denies = cordon::sandbox::deny::resolve(
        &cordon::sandbox::deny::rules_from_settings(&settings),
        &workspace,
        user_home.as_deref(),
    );
    (spec.denied_read, spec.denied_write) = (denies.read, denies.write);
    let sandbox = cordon::sandbox::supervise(args.sandbox, &spec)
        .await
        .context("starting the sandbox")?;
    let (ctx, interrupter) = ToolContext::supervised(sandbox.clone(), &workspace);
    let ctx = ctx.with_env(settings.env.clone().into_iter().collect());
    let mode_engine = engine.clone();
    let hooks = Arc::new(Hooks::new(
        hook_set,
        HookRunner::new(Some(ctx.clone()), &workspace),
        SessionFacts {
            session_id: session_id.clone(),
            transcript_path,
            cwd: workspace.clone(),
        },
        Arc::new(move || mode_engine.mode().as_str().to_string()),
    ));
    let observer = Arc::new(HookObserver::new(hooks.clone()));
    let sdk_engine = engine.clone();
    let sdk_prompter = stream.as_mut().and_then(|s| {
        s.attach(
            interrupter.clone(),
            ctx.interrupt_signal(),
            Arc::new(move |mode| sdk_engine.set_mode(mode)),
            &hooks,
        )
    });

    let mut config = LoopConfig::new(model_name.clone(), &workspace);
    config.max_turns = args.max_turns;
    if let Some(window) = std::env::var("CORDON_CONTEXT_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.context_window = window;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    config.commands = cordon::slash_commands::load(&workspace, home.as_deref());
    config.memory = prompt::memory_text(
        &workspace,
        &prompt::memory_files(&workspace, home.as_deref()),
    );

    let checkpoints = Checkpoints::open(&cordon::paths::cordon_home()?, &session_id, &workspace)
        .context("opening the checkpoint store")?
        .with_budget(settings.checkpoint_budget_bytes());
    let mut observers: Vec<Arc<dyn cordon::agent::LoopObserver>> = Vec::new();
    if let Some(stream) = stream.as_mut() {
        // First: it tags the prompt's record with its transcript uuid (rewind_files).
        observers.extend(stream.prompt_uuids());
        stream.set_checkpoints(checkpoints.clone(), Some(sandbox.clone()));
    }
    // On a terminal, the user answers the questions (and the terminal shows the events).
    let (tui, prompter) = if interactive {
        let (tui, prompter) = Interactive::new(SessionParts {
            engine: engine.clone(),
            interrupter: interrupter.clone(),
            ctx: ctx.clone(),
            workspace: workspace.clone(),
            session_id: session_id.clone(),
            transcript: transcript.path().to_path_buf(),
            checkpoints: Some(checkpoints.clone()),
            resumed_messages,
            trust_store: cordon::trust::TrustStore::from_env().ok(),
            trusted: settings.trust().is_trusted(),
        });
        (Some(tui), Some(prompter))
    } else {
        (None, sdk_prompter)
    };
    observers.push(observer.clone());
    observers.push(Arc::new(
        CheckpointObserver::new(checkpoints).with_sandbox(sandbox.clone()),
    ));
    // MCP servers: stdio ones start inside the sandbox; their tools join the built-ins.
    let mcp = cordon::mcp::McpSet::for_session(&settings, &workspace);
    let mut tools = tools_for_mode(&engine, prompter.clone(), interactive);
    tools.register(Arc::new(cordon::tools::todo_write::TodoWriteTool::default()));
    let skills = cordon::tools::skill::load(&workspace, user_home.as_deref());
    if let Some(skill_tool) = cordon::tools::skill::SkillTool::new(skills) {
        tools.register(Arc::new(skill_tool));
    }
    mcp.connect_into(&ctx, &mut tools).await;
    if let Some(stream) = stream.as_mut() {
        stream.set_mcp(mcp.clone());
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let mut agent = AgentLoop::new(
        model,
        tools,
        Arc::new(PolicyGate::new(engine.clone(), hooks, prompter)),
        ctx.clone(),
        transcript,
        config,
    )
    .with_history(history)
    .with_observer(Arc::new(cordon::agent::gate::Observers(observers)))
    .with_events(tx);
    let tools: Vec<String> = agent
        .tool_definitions()
        .into_iter()
        .map(|d| d.name)
        .collect();
    let resumed = args.resume.is_some() || args.continue_last;
    if let Some(tui) = tui {
        observer
            .session_start(if resumed { "resume" } else { "startup" })
            .await;
        let served = tui.serve(&mut agent, rx).await;
        drop(agent);
        observer.session_end("prompt_input_exit").await;
        end_session(&store, &session_id, &sandbox, &mcp).await;
        served?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(stream) = stream {
        let init = init_record(
            &session_id,
            &workspace,
            &tools,
            &model_name,
            &engine,
            &settings,
            &mcp,
        );
        let info = cordon::control::RecordInfo {
            session_id: session_id.clone(),
            model: model_name.clone(),
        };
        let mut interrupts = ctx.interrupt_signal();
        let code = stream
            .serve(
                &mut agent,
                rx,
                &mut interrupts,
                init,
                &observer,
                resumed,
                info,
            )
            .await;
        drop(agent);
        end_session(&store, &session_id, &sandbox, &mcp).await;
        return Ok(code);
    }
    let printer = tokio::spawn(print_events(
        rx,
        args.output_format,
        args.verbose,
        session_id.clone(),
    ));
    if args.output_format == OutputFormat::StreamJson {
        let init = init_record(
            &session_id,
            &workspace,
            &tools,
            &model_name,
            &engine,
            &settings,
            &mcp,
        );
        println_json(&init);
    }

    // Ctrl-C interrupts the run (the transcript stays valid); a second one is the default.
    let on_interrupt = interrupter.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.interrupt();
        }
    });
    let mut interrupts = ctx.interrupt_signal();
    observer
        .session_start(if resumed { "resume" } else { "startup" })
        .await;
    let outcome = agent.run(&prompt_text, &mut interrupts).await;
    drop(agent);
    observer.session_end("other").await;
    let _ = printer.await;
    end_session(&store, &session_id, &sandbox, &mcp).await;

    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match args.output_format {
        OutputFormat::Text => {
            // The answer is the model's (and through it the repository's): shown, never
            // sent to the terminal as control sequences.
            if outcome.is_error {
                eprintln!("cordon: {}", output::for_terminal(&outcome.text));
            } else {
                println!("{}", output::for_terminal(&outcome.text));
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            println_json(&output::result_record(&session_id, &outcome, duration_ms));
        }
    }
    Ok(if outcome.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// No prompt and no -p, with standard input and output on a terminal: the user is there.
pub fn is_interactive(args: &RunArgs, stream_input: bool) -> bool {
    use std::io::IsTerminal;
    !stream_input
        && args.prompt.is_none()
        && !args.print
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
}

/// The stream-json init record, with the workspace's trust and what its settings lost.
fn init_record(
    session_id: &str,
    workspace: &std::path::Path,
    tools: &[String],
    model: &str,
    engine: &Engine,
    settings: &Settings,
    mcp: &cordon::mcp::McpSet,
) -> serde_json::Value {
    let mut init = output::init_record(
        session_id,
        &workspace.display().to_string(),
        tools,
        model,
        engine.mode().as_str(),
    );
    init["workspace_trust"] = settings.trust_record();
    init["mcp_servers"] = serde_json::Value::from(mcp.init_entries());
    init
}

/// The built-in tools, plus ExitPlanMode when the session starts in plan mode or is
/// interactive (where Shift-Tab can enter plan mode at any time).
fn tools_for_mode(
    engine: &Arc<Engine>,
    prompter: Option<Arc<dyn cordon::agent::gate::PermissionPrompter>>,
    interactive: bool,
) -> ToolRegistry {
    let tools = ToolRegistry::default_tools();
    if engine.mode() == PermissionMode::Plan || interactive {
        tools.with_exit_plan_mode(Some(engine.clone()), prompter)
    } else {
        tools
    }
}

fn open_session(
    store: &SessionStore,
    args: &RunArgs,
    workspace: &std::path::Path,
    model: &str,
) -> anyhow::Result<(
    String,
    Vec<cordon::model::Message>,
    cordon::session::Transcript,
)> {
    let previous = match (&args.resume, args.continue_last) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => Some(store.latest_in(workspace)?.id),
        (None, false) => None,
    };
    let Some(previous) = previous else {
        let (info, transcript) = store.create(workspace, model)?;
        return Ok((info.id, Vec::new(), transcript));
    };
    if args.fork_session {
        let (info, transcript) = store.fork(&previous)?;
        let loaded = cordon::session::Loaded::read(&info.transcript)?;
        let (messages, _) = loaded.conversation();
        return Ok((info.id, messages, transcript));
    }
    let (info, loaded, mut transcript) = store.resume(&previous)?;
    let (messages, closed) = loaded.conversation();
    if !closed.is_empty() {
        // Make the closing results part of the record, so the transcript itself is valid.
        let results = messages
            .iter()
            .rev()
            .find(|m| m.role == cordon::model::Role::User)
            .map(|m| m.content.iter().filter(|b| matches!(b, cordon::model::ContentBlock::ToolResult { tool_use_id, .. } if closed.contains(tool_use_id))).cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        transcript.append(cordon::session::RecordBody::User {
            message: cordon::model::Message::user(results),
        })?;
        transcript.sync()?;
        tracing::info!(closed = ?closed, "closed tool calls that never finished");
    }
    Ok((info.id, messages, transcript))
}

fn println_json(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, value);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

async fn print_events(
    mut rx: mpsc::UnboundedReceiver<LoopEvent>,
    format: OutputFormat,
    verbose: bool,
    session_id: String,
) {
    while let Some(event) = rx.recv().await {
        match (format, event) {
            (OutputFormat::StreamJson, LoopEvent::Assistant(m) | LoopEvent::User(m)) => {
                println_json(&output::message_record(&session_id, &m));
            }
            (OutputFormat::Text, LoopEvent::Assistant(m) | LoopEvent::User(m)) if verbose => {
                eprint!("{}", output::for_terminal(&output::human(&m)));
            }
            (_, LoopEvent::Compacted { tokens_before }) if verbose => {
                eprintln!("[compacted the conversation; it held about {tokens_before} tokens]");
            }
            _ => {}
        }
    }
}

/// Marks the session used in the index and tears its sandbox down; both are best effort
/// (the transcript is already on disk), so failures are logged, not returned.
async fn end_session(
    store: &SessionStore,
    session_id: &str,
    sandbox: &cordon::sandbox::Supervisor,
    mcp: &cordon::mcp::McpSet,
) {
    mcp.stop_all().await;
    if let Err(e) = store.touch(session_id) {
        tracing::warn!(error = %e, "could not update the session index");
    }
    if let Err(e) = sandbox.destroy().await {
        tracing::warn!(error = %e, "sandbox teardown reported an error");
    }
}
