//! `sandbox-agent`: serves one controller over a Unix socket, inside the sandbox.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use sandbox_agent::cgroup::slots::{ExecSlots, SLOT_COUNT};
use sandbox_agent::config::AgentConfig;
use sandbox_agent::exec::Executor;
use sandbox_agent::server::{AgentService, ControllerGate, serve_unix};

#[derive(Parser)]
#[command(name = "sandbox-agent", version, about = "Cordon's in-sandbox agent")]
struct Cli {
    /// The agent configuration as JSON (see `AgentConfig`).
    #[arg(long, conflicts_with = "config_file")]
    config: Option<String>,
    /// Read the configuration from this file instead.
    #[arg(long)]
    config_file: Option<std::path::PathBuf>,
    /// Wait for one line on this FIFO before reading the configuration: a warm-pool
    /// container starts the agent ahead of its session, so a claim pays no exec, only
    /// the configuration and confinement that need the session's workspace.
    #[arg(long, requires = "config_file")]
    start_fifo: Option<std::path::PathBuf>,
    /// Launcher mode (local backend): build the sandbox's namespaces from this
    /// `LaunchConfig` file, then serve inside them.
    #[arg(long, conflicts_with_all = ["config", "config_file"])]
    launch_config: Option<std::path::PathBuf>,
    /// Reaper mode: tear down the session whose state dir this is, its launcher (the
    /// orchestrator's own process) having died mid-run; started by that launcher's
    /// guardian.
    #[arg(long, hide = true, conflicts_with_all = ["config", "config_file", "launch_config"])]
    reap: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("CORDON_AGENT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Some(dir) = &cli.reap {
        let code = sandbox_agent::launch::state::reap(dir);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if let Some(path) = &cli.launch_config {
        // Single-threaded here: the launcher clones the sandbox's init.
        let code = sandbox_agent::launch::run_launcher(path);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandbox-agent: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    if let Some(fifo) = &cli.start_fifo {
        wait_for_start(fifo)?;
    }
    let text = match (&cli.config, &cli.config_file) {
        (Some(json), _) => json.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?,
        (None, None) => return Err("--config or --config-file is required".into()),
    };
    let config: AgentConfig =
        serde_json::from_str(&text).map_err(|e| format!("invalid config: {e}"))?;
    // Bind before confining: creating the socket needs rights the confined agent drops.
    let listener = listen_then_publish(&config.socket_path)?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    // The egress bridge and DNS stub bind now too: the confined agent may not make
    // INET sockets.
    let egress = bind_egress(&config)?;
    // And the session CA's bundle, where the backend did not make it (the confined agent
    // can write only where its commands may).
    if let Some(ca) = config.egress.as_ref().and_then(|e| e.ca.as_ref()) {
        sandbox_agent::egress::ca::install(ca)
            .map_err(|e| format!("egress: writing {}: {e}", ca.bundle.display()))?;
    }
    // Per-command cgroups are made and opened now: the confined agent cannot.
    let slots = prepare_slots(&config)?;
    // Confine while still single-threaded: every thread and child inherits it.
    let mut report = sandbox_agent::confine::confine_self(&config).map_err(|e| e.to_string())?;
    report.notes.push(match &slots {
        Some(s) => format!(
            "commands are killed through their own cgroup ({:?})",
            s.method
        ),
        None => "commands are killed by a /proc scan (no per-command cgroups)".into(),
    });
    let child_filter =
        sandbox_agent::confine::child_filter(&config, &report).map_err(|e| e.to_string())?;
    // One async thread: the agent serves one controller, its async work is short (file
    // work beyond a small Read and every fork go to the blocking pool), and a call then
    // never waits for a wake-up on another thread, which costs more here than the work.
    // This thread serves every call, and the handshake may pin it to the controller's
    // CPU (`sandbox_agent::affinity`); the threads it starts keep every CPU.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_start(sandbox_agent::affinity::unpin_current_thread)
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))?;
    runtime.block_on(async move {
        let listener = tokio::net::UnixListener::from_std(listener).map_err(|e| e.to_string())?;
        if let Some(egress) = egress {
            egress.spawn().map_err(|e| e.to_string())?;
        }
        let executor = Executor::new(&config)
            .with_child_filter(child_filter)
            .with_slots(slots);
        let require_outside_peer = config.require_outside_peer;
        let service = AgentService::new(config, report, executor).map_err(|e| e.to_string())?;
        let gate = Arc::new(ControllerGate::new(
            require_outside_peer,
            service.handshaken(),
        ));
        let shutdown = service.shutdown_signal();
        serve_unix(listener, service.into_server(), gate, shutdown)
            .await
            .map_err(|e| format!("server failed: {e}"))
    })
}

/// Binds and listens under a temporary name beside `path`, then renames it into place.
/// `bind` makes the file before `listen` runs, so a controller polling for the path could
/// see it and be refused in that window; a rename publishes a socket that already listens.
/// The socket is made connectable by any uid (0666): its directory is the gate (private to
/// the controller on the host), and a controller that is neither root nor this uid (a
/// non-root server on the docker backend) must be able to connect.
fn listen_then_publish(path: &std::path::Path) -> Result<std::os::unix::net::UnixListener, String> {
    use std::os::unix::fs::PermissionsExt;
    let cannot = |e: std::io::Error| format!("cannot listen on {}: {e}", path.display());
    let mut staging = path.as_os_str().to_owned();
    staging.push(format!(".{}.tmp", std::process::id()));
    let staging = std::path::PathBuf::from(staging);
    let _ = std::fs::remove_file(&staging);
    let listener = std::os::unix::net::UnixListener::bind(&staging).map_err(cannot)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o666)).map_err(|e| {
        let _ = std::fs::remove_file(&staging);
        cannot(e)
    })?;
    std::fs::rename(&staging, path).map_err(|e| {
        let _ = std::fs::remove_file(&staging);
        cannot(e)
    })?;
    Ok(listener)
}

/// Binds the egress bridge (and the DNS stub) when the session has a way out.
fn bind_egress(config: &AgentConfig) -> Result<Option<sandbox_agent::egress::Bound>, String> {
    config
        .egress
        .as_ref()
        .map(|e| sandbox_agent::egress::Bound::bind(e).map_err(|e| format!("egress: {e}")))
        .transpose()
}

/// Makes the per-command cgroups the backend delegated, if any. A failure refuses to start
/// unless the configuration is best effort (the /proc scan kill is then reported).
fn prepare_slots(config: &AgentConfig) -> Result<Option<Arc<ExecSlots>>, String> {
    let Some(cfg) = &config.exec_cgroup else {
        return Ok(None);
    };
    match ExecSlots::prepare(cfg, cfg.slots.clamp(1, SLOT_COUNT)) {
        Ok(slots) => Ok(Some(Arc::new(slots))),
        Err(e) if config.best_effort => {
            tracing::warn!("no per-command cgroups: {e}");
            Ok(None)
        }
        Err(e) => Err(format!("cannot make the per-command cgroups: {e}")),
    }
}

/// Blocks until a line arrives on `fifo` (opening it blocks until the host opens it for
/// writing; the host's write is the session's start signal).
fn wait_for_start(fifo: &std::path::Path) -> Result<(), String> {
    use std::io::BufRead;
    let file = std::fs::File::open(fifo)
        .map_err(|e| format!("cannot open start fifo {}: {e}", fifo.display()))?;
    let mut line = String::new();
    std::io::BufReader::new(file)
        .read_line(&mut line)
        .map_err(|e| format!("reading start fifo {}: {e}", fifo.display()))?;
    if line.is_empty() {
        return Err(format!(
            "start fifo {} closed without a start signal",
            fifo.display()
        ));
    }
    Ok(())
}
