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

use cordon::agent::LoopEvent;
use cordon::interactive::{Interactive, SessionParts};
use cordon::model::ModelConfig;
use cordon::output::{self, OutputFormat};
use cordon::permissions::PermissionMode;
use cordon::sandbox::BackendKind;
use cordon::session::{FrontEnd, SessionEnv, SessionHandles, SessionStart};
use cordon::settings::{CliSettings, Settings, SettingsArg};
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
    let runtime = match cordon::runtime::for_one_session() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cordon: cannot start the runtime: {e}");
            return ExitCode::from(super::EXIT_CORDON_FAILED);
        }
    };
    let result = runtime.block_on(run(args));
    // Last-resort cleanups run; a blocked stdin reader (stream-json input) is not waited for.
    cordon::runtime::finish(runtime);
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordon: {}", output::for_terminal(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
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
        allowed_domains: Vec::new(),
        additional_directories: args.stream.add_dirs(&workspace),
        mcp_servers: args.stream.mcp_servers()?,
        strict_mcp_config: args.stream.strict_mcp_config,
        setting_sources: args.stream.setting_sources()?,
    };
    let load = || Settings::load(&workspace, cli.clone());
    let mut settings = load().context("loading the settings")?;
    // At a terminal, an untrusted workspace whose settings would widen asks once, before
    // anything is built from them (and before any model call).
    let mut asked = false;
    // The terminal's one key reader, for the question and then the session.
    let mut keys = interactive.then(cordon::interactive::keys::Keys::start);
    if let Some(keys) = keys.as_mut() {
        let store = cordon::trust::TrustStore::from_env().ok();
        let first = cordon::interactive::trust::first_use(settings, keys, store.as_ref(), load)
            .await
            .context("asking whether to trust the workspace")?;
        (settings, asked) = (first.settings, first.asked);
    }
    // Said once, before anything runs: what the untrusted workspace's settings lost.
    if let Some(notice) = settings.untrusted_notice().filter(|_| !asked) {
        eprintln!("cordon: {notice}");
    }
    let mut overrides = args.stream.overrides()?;
    let start = session_start(&args)?;
    let (plugins, plugin_errors) = args.stream.plugins(&workspace);
    for e in &plugin_errors {
        eprintln!("cordon: {}", output::for_terminal(&e.to_string()));
    }
    for p in plugins.iter().filter(|p| !p.unsupported.is_empty()) {
        eprintln!(
            "cordon: plugin {}: not applied (Cordon has no counterpart): {}",
            p.name,
            p.unsupported.join(", ")
        );
    }
    let plugin_report = plugin_report(&plugins, &plugin_errors, &args.stream.plugin_dir);
    overrides.plugins = plugins;
    let model = args
        .stream
        .configure_model(ModelConfig::from_env().context("model configuration")?)?;
    if overrides.options.max_budget_usd.is_some() {
        let name = settings.model.as_deref().unwrap_or(&model.model);
        let table = cordon::agent::budget::prices().map_err(anyhow::Error::msg)?;
        if table.for_model(name).is_none() {
            bail!(
                "--max-budget-usd: model {name} has no price in policies/model-prices.json, so \
                 the budget could not be kept"
            );
        }
    }
    let env = SessionEnv {
        workspace: workspace.clone(),
        home: cordon::paths::cordon_home()?,
        settings,
        backend: args.sandbox,
        shared_backend: None,
        image: args.image.clone(),
        tenant: None,
        model,
        start: start.clone(),
        max_turns: args.max_turns,
        context_window: std::env::var("CORDON_CONTEXT_WINDOW")
            .ok()
            .and_then(|v| v.parse().ok()),
        user_home: std::env::var_os("HOME").map(PathBuf::from),
        overrides,
    };
    let prepared = env.prepare().await?;
    let h = &prepared.handles;
    let session_id = h.session_id.clone();
    let sdk_engine = h.engine.clone();
    let sdk_prompter = stream.as_mut().and_then(|s| {
        s.attach(
            h.interrupter.clone(),
            h.ctx.interrupt_signal(),
            Arc::new(move |mode| sdk_engine.set_mode(mode)),
            &h.hooks,
        )
    });
    let mut observers: Vec<Arc<dyn cordon::agent::LoopObserver>> = Vec::new();
    if let Some(stream) = stream.as_mut() {
        if args.stream.include_hook_events {
            stream.report_hooks(&h.hooks, &session_id);
        }
        // First: it tags the prompt's record with its transcript uuid (rewind_files).
        observers.extend(stream.prompt_uuids());
        stream.set_checkpoints(h.checkpoints.clone(), Some(h.sandbox.clone()));
        stream.set_mcp(h.mcp.clone(), h.ctx.clone());
        stream.set_tasks(&h.tasks, &session_id);
        if args.stream.session_mirror {
            // A new session or a fork has a transcript of its own, mirrored whole.
            let carried_on = matches!(
                start,
                SessionStart::Resume(_) | SessionStart::ContinueLatest
            );
            stream.set_mirror(&h.transcript_path, &workspace, &session_id, !carried_on);
        }
    }
    // On a terminal, the user answers the questions (and the terminal shows the events).
    let (tui, prompter) = if interactive {
        let (tui, prompter) = Interactive::new(SessionParts {
            engine: h.engine.clone(),
            interrupter: h.interrupter.clone(),
            ctx: h.ctx.clone(),
            workspace: workspace.clone(),
            session_id: session_id.clone(),
            transcript: h.transcript_path.clone(),
            checkpoints: Some(h.checkpoints.clone()),
            sandbox: Some(h.sandbox.clone()),
            resumed_messages: h.resumed_messages,
            trust_store: cordon::trust::TrustStore::from_env().ok(),
            trusted: h.settings.trust().is_trusted(),
        });
        (Some(tui), Some(prompter))
    } else {
        (None, sdk_prompter)
    };
    // The client's initialize (its sub-agents, its in-process MCP servers) shapes the
    // loop, so it is handled before the loop is built.
    let mut prepared = prepared;
    if let Some(stream) = stream.as_mut() {
        stream.handshake(&mut prepared).await;
    }
    let skills: Vec<String> = prepared
        .skill_names()
        .into_iter()
        .map(String::from)
        .collect();
    let (tx, rx) = mpsc::unbounded_channel();
    let (mut agent, h) = prepared.into_loop(FrontEnd {
        prompter,
        observers,
        events: Some(tx),
        exit_plan_mode: interactive,
    });
    let observer = h.observer.clone();
    let tools = agent.tool_names();
    let start_source = if h.resumed { "resume" } else { "startup" };
    if let (Some(tui), Some(keys)) = (tui, keys) {
        observer.session_start(start_source).await;
        let served = tui.serve(&mut agent, rx, keys).await;
        drop(agent);
        observer.session_end("prompt_input_exit").await;
        h.end().await;
        served?;
        return Ok(ExitCode::SUCCESS);
    }
    let commands = agent.command_names();
    let init = || {
        let mut init = init_record(&h, &tools);
        init["slash_commands"] = serde_json::json!(commands);
        init["skills"] = serde_json::json!(skills);
        init["plugins"] = serde_json::Value::from(plugin_report.0.clone());
        if !plugin_report.1.is_empty() {
            init["plugin_errors"] = serde_json::Value::from(plugin_report.1.clone());
        }
        init
    };
    if let Some(stream) = stream {
        let info = cordon::control::RecordInfo {
            session_id: session_id.clone(),
            model: h.model_name.clone(),
        };
        let mut interrupts = h.ctx.interrupt_signal();
        let code = stream
            .serve(
                &mut agent,
                rx,
                &mut interrupts,
                init(),
                &observer,
                h.resumed,
                info,
            )
            .await;
        drop(agent);
        h.end().await;
        return Ok(code);
    }
    let printer = spawn_printer(rx, args.output_format, args.verbose, session_id.clone());
    if args.output_format == OutputFormat::StreamJson {
        println_json(&init());
    }

    // Ctrl-C interrupts the run (the transcript stays valid); a second one is the default.
    let on_interrupt = h.interrupter.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.interrupt();
        }
    });
    let mut interrupts = h.ctx.interrupt_signal();
    observer.session_start(start_source).await;
    let outcome = agent.run(&prompt_text, &mut interrupts).await;
    drop(agent);
    observer.session_end("other").await;
    let _ = printer.await;
    h.end().await;

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

/// Which session the flags ask for: new, resumed, the latest, or a fork of one of those;
/// `--session-id` names a new session or a fork, never a session carried on.
fn session_start(args: &RunArgs) -> anyhow::Result<SessionStart> {
    let id = args.stream.session_id()?;
    let drops_turn = args.stream.resume_drops_turn.clone();
    if let Some(at) = args.stream.resume_session_at.clone() {
        // Cordon's transcripts are one line of records, not a tree: the session resumed
        // at an earlier message is a fork, which leaves the original whole.
        let (Some(from), true) = (&args.resume, args.fork_session) else {
            bail!(
                "--resume-session-at needs --resume and --fork-session (Cordon continues an \
                 earlier point of a session as a fork of it)"
            );
        };
        return Ok(SessionStart::ForkAt {
            from: from.clone(),
            id,
            at,
            drops_turn,
        });
    }
    if drops_turn.is_some() {
        bail!("--resume-drops-turn needs --resume-session-at");
    }
    Ok(
        match (&args.resume, args.continue_last, args.fork_session, id) {
            (Some(from), _, true, Some(id)) => SessionStart::ForkAs {
                from: from.clone(),
                id,
            },
            (Some(_) | None, true, false, Some(_)) | (Some(_), _, false, Some(_)) => bail!(
                "--session-id names a new session: with --resume or --continue it needs --fork-session"
            ),
            (None, true, true, Some(_)) => {
                bail!("--session-id with --continue --fork-session: name the session with --resume")
            }
            (Some(from), _, false, None) => SessionStart::Resume(from.clone()),
            (Some(from), _, true, None) => SessionStart::Fork(from.clone()),
            (None, true, false, None) => SessionStart::ContinueLatest,
            (None, true, true, None) => SessionStart::ForkLatest,
            (None, false, _, id) => SessionStart::New { id },
        },
    )
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

/// The init record's `plugins` (`{name, path, version?}`) and `plugin_errors` (`{plugin,
/// type, message, path}`, the plugin named by its place among the flags as Claude Code
/// names one that failed before it had a name: `inline[i]`).
fn plugin_report(
    plugins: &[cordon::plugins::Plugin],
    errors: &[cordon::plugins::PluginError],
    flags: &[String],
) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let loaded = plugins
        .iter()
        .map(cordon::plugins::Plugin::summary)
        .collect();
    // What a loaded plugin declares that Cordon has no counterpart for is said, not dropped.
    let unsupported = plugins.iter().flat_map(|p| {
        p.unsupported.iter().map(move |field| {
            serde_json::json!({
                "plugin": p.name,
                "type": "unsupported-component",
                "message": format!("`{field}` is not applied: Cordon has no counterpart for it"),
                "path": p.root.display().to_string(),
            })
        })
    });
    let failed = errors
        .iter()
        .map(|e| {
            let at = flags
                .iter()
                .position(|f| e.dir.ends_with(f))
                .unwrap_or_default();
            serde_json::json!({
                "plugin": format!("inline[{at}]"),
                "type": e.kind,
                "message": e.why,
                "path": e.dir.display().to_string(),
            })
        })
        .chain(unsupported)
        .collect();
    (loaded, failed)
}

/// The stream-json init record, with the workspace's trust and what its settings lost.
fn init_record(h: &SessionHandles, tools: &[String]) -> serde_json::Value {
    let mut init = output::init_record(
        &h.session_id,
        &h.workspace.display().to_string(),
        tools,
        &h.model_name,
        h.engine.mode().as_str(),
    );
    init["workspace_trust"] = h.settings.trust_record();
    // The session's network as its settings resolve (the policy its proxy enforces).
    init["network"] = match cordon::network::layers::from_settings(&h.settings) {
        Ok(network) => network.summary(),
        Err(e) => serde_json::json!({"egress": "none", "error": e.to_string()}),
    };
    init["mcp_servers"] = serde_json::Value::from(h.mcp.init_entries());
    init["confinement"] = confinement(h);
    init
}

/// How the session's tools are confined, for the init record: the backend, and whether
/// the sandbox has any way out (only through the egress proxy, under the domain policy).
fn confinement(h: &SessionHandles) -> serde_json::Value {
    let spec = h.sandbox.spec();
    serde_json::json!({
        "backend": h.sandbox.kind(),
        "network": if spec.egress.is_some() { "egress proxy" } else { "none" },
        "kernel_denied_paths": spec.denied_read.len() + spec.denied_write.len(),
    })
}

fn println_json(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, value);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Starts [`print_events`] on the blocking pool: its writes to stdout are synchronous, so
/// a reader that stops reading (a paused pager, a full pipe) holds up that thread alone,
/// never the session's one async thread (see `cordon::runtime`).
pub(super) fn spawn_printer(
    rx: mpsc::UnboundedReceiver<LoopEvent>,
    format: OutputFormat,
    verbose: bool,
    session_id: String,
) -> tokio::task::JoinHandle<()> {
    let runtime = tokio::runtime::Handle::current();
    let printing = print_events(rx, format, verbose, session_id);
    tokio::task::spawn_blocking(move || runtime.block_on(printing))
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
            (
                OutputFormat::StreamJson,
                LoopEvent::Subagent {
                    parent_tool_use_id,
                    event,
                },
            ) => {
                if let LoopEvent::Assistant(m) | LoopEvent::User(m) = *event {
                    let mut record = output::message_record(&session_id, &m);
                    record["parent_tool_use_id"] = serde_json::Value::from(parent_tool_use_id);
                    println_json(&record);
                }
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
