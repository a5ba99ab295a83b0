//! `cordon demo`: a real sandboxed session on a scripted model, offline. It writes a small
//! buggy project, starts the scripted Messages API server in-process, and builds the session
//! through the same library builder `cordon run` uses, printing each step.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use cordon::model::{Credentials, ModelConfig};
use cordon::output::{self, OutputFormat};
use cordon::permissions::PermissionMode;
use cordon::sandbox::BackendKind;
use cordon::scripted::ScriptedModel;
use cordon::session::{FrontEnd, SessionEnv, SessionStart};
use cordon::settings::{CliSettings, Settings};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to write the demo project (default: a new private directory under the system's
    /// temp dir, kept afterwards).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
}

pub fn main(args: DemoArgs) -> ExitCode {
    let runtime = match cordon::runtime::for_one_session() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cordon: cannot start the runtime: {e}");
            return ExitCode::from(super::EXIT_CORDON_FAILED);
        }
    };
    let result = runtime.block_on(demo(args));
    cordon::runtime::finish(runtime);
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordon demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let dir = match args.workspace {
        Some(dir) => dir,
        // A fresh private directory (0700) under the system's temp dir, kept afterwards so
        // the user can look at it. Not under $CORDON_HOME: Cordon refuses a workspace
        // inside its own data directory.
        None => tempfile::Builder::new()
            .prefix("cordon-demo-")
            .tempdir()
            .context("creating the demo project's directory")?
            .keep(),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    cordon::demo::write_project(&dir).context("writing the demo project")?;
    eprintln!("cordon demo: project in {}", dir.display());
    eprintln!(
        "cordon demo: the model is scripted (offline); tools run for real in the local sandbox\n"
    );

    let model = ScriptedModel::start(cordon::demo::turns(&dir))
        .await
        .context("starting the scripted model")?;
    let config = ModelConfig::new(model.base_url(), Credentials::ApiKey("demo".into()))
        .with_model("cordon-demo");
    let code = run_session(&dir, config).await;
    model.shutdown().await;
    eprintln!(
        "\ncordon demo: greet.py now reads:\n{}",
        std::fs::read_to_string(dir.join("greet.py")).unwrap_or_default()
    );
    code
}

/// One headless session in bypassPermissions mode on the local backend, each message
/// printed as it completes (what `cordon run --verbose` shows).
async fn run_session(dir: &std::path::Path, model: ModelConfig) -> anyhow::Result<ExitCode> {
    let cli = CliSettings {
        permission_mode: Some(PermissionMode::BypassPermissions),
        ..CliSettings::default()
    };
    let env = SessionEnv {
        workspace: dir.to_path_buf(),
        home: cordon::paths::cordon_home()?,
        settings: Settings::load(dir, cli).context("loading the settings")?,
        backend: BackendKind::Local,
        shared_backend: None,
        image: None,
        tenant: None,
        model,
        start: SessionStart::New { id: None },
        max_turns: None,
        context_window: None,
        user_home: std::env::var_os("HOME").map(std::path::PathBuf::from),
        overrides: Default::default(),
    };
    let prepared = env.prepare().await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (mut agent, handles) = prepared.into_loop(FrontEnd {
        events: Some(tx),
        ..FrontEnd::default()
    });
    let printer =
        super::run::spawn_printer(rx, OutputFormat::Text, true, handles.session_id.clone());
    let mut interrupts = handles.ctx.interrupt_signal();
    handles.observer.session_start("startup").await;
    let outcome = agent.run(cordon::demo::PROMPT, &mut interrupts).await;
    drop(agent);
    handles.observer.session_end("other").await;
    let _ = printer.await;
    handles.end().await;
    if outcome.is_error {
        eprintln!("cordon: {}", output::for_terminal(&outcome.text));
        return Ok(ExitCode::FAILURE);
    }
    println!("{}", output::for_terminal(&outcome.text));
    Ok(ExitCode::SUCCESS)
}
