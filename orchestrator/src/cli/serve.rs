//! `cordon serve --listen ADDR --data DIR --workspace-root DIR`: the multi-tenant HTTP API
//! server (TLS when given a certificate and key). Prints `listening on URL` once it
//! accepts connections; SIGTERM or Ctrl-C shuts it down gracefully.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use cordon::model::ModelConfig;
use cordon::sandbox::BackendKind;
use cordon::server::listener::{CappedTcp, CappedTls, tls_acceptor};
use cordon::server::store::SqliteStore;
use cordon::server::{Limits, ServerState, serve};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8420")]
    pub listen: SocketAddr,
    /// The server's data directory (database, transcripts, checkpoints).
    #[arg(long)]
    pub data: PathBuf,
    /// Workspaces live beneath DIR/<tenant>/.
    #[arg(long)]
    pub workspace_root: PathBuf,
    /// The backend of sessions that do not name one.
    #[arg(long, value_enum, default_value = "docker")]
    pub backend: BackendKind,
    /// PEM certificate chain: serve HTTPS (with --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key (with --tls-cert).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Most open connections at once.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Seconds a request may take to be answered.
    #[arg(long, default_value_t = 300)]
    pub request_timeout: u64,
}

pub fn main(args: ServeArgs) -> ExitCode {
    if let Err(e) = cordon::paths::private_dir(&args.data) {
        eprintln!("cordon serve: creating {}: {e}", args.data.display());
        return ExitCode::from(super::EXIT_CORDON_FAILED);
    }
    // The data directory is Cordon's home for everything the server starts: the
    // backends' run state, the workspace location checks, transcripts and checkpoints.
    if let Ok(data) = args.data.canonicalize() {
        // SAFETY: no other thread exists yet (the runtime is made below), so nothing
        // reads the environment while it changes.
        unsafe { std::env::set_var(cordon::paths::HOME_ENV, data) };
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cordon: cannot start the runtime: {e}");
            return ExitCode::from(super::EXIT_CORDON_FAILED);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cordon serve: {e:#}");
            ExitCode::from(super::EXIT_CORDON_FAILED)
        }
    }
}

async fn run(args: ServeArgs) -> anyhow::Result<()> {
    cordon::paths::private_dir(&args.data)
        .with_context(|| format!("creating {}", args.data.display()))?;
    std::fs::create_dir_all(&args.workspace_root)
        .with_context(|| format!("creating {}", args.workspace_root.display()))?;
    let data = args.data.canonicalize().context("resolving --data")?;
    let root = args
        .workspace_root
        .canonicalize()
        .context("resolving --workspace-root")?;
    // A workspace may not contain Cordon's data: keep the two trees apart.
    if data.starts_with(&root) || root.starts_with(&data) {
        bail!("--data and --workspace-root must not contain one another");
    }
    let store = Arc::new(SqliteStore::open(&data).context("opening the database")?);
    let model = ModelConfig::from_env().context("model configuration")?;
    let ops = cordon::server::ops::Ops::open(&data).context("opening the audit log and metrics")?;
    // Sessions on the default backend share one kept for the server's life (Docker: its
    // warm pool); without it (an engine down at start) each session makes its own.
    let sandboxes = match cordon::sandbox::long_lived(args.backend).await {
        Ok(backend) => backend,
        Err(e) => {
            eprintln!("cordon serve: no warm pool, sessions start cold: {e}");
            None
        }
    };
    let state = Arc::new(
        ServerState::new(store, data, root, model, args.backend)
            .with_ops(ops)
            .with_sandboxes(sandboxes),
    );
    let restored = state.restore().context("reading the stored sessions")?;
    let limits = Limits {
        request_timeout: Duration::from_secs(args.request_timeout.max(1)),
        ..Limits::default()
    };
    let tcp = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = tcp.local_addr()?;
    let shutdown = async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    };
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let acceptor = tls_acceptor(cert, key)?;
        let listener = CappedTls::new(tcp, args.max_connections, acceptor)?;
        announce("https", addr, restored);
        serve(listener, state, limits, shutdown).await?;
    } else {
        let listener = CappedTcp::new(tcp, args.max_connections);
        announce("http", addr, restored);
        serve(listener, state, limits, shutdown).await?;
    }
    Ok(())
}

fn announce(scheme: &str, addr: SocketAddr, restored: usize) {
    if restored > 0 {
        eprintln!("cordon serve: {restored} stored sessions listed again");
    }
    println!("listening on {scheme}://{addr}");
}
