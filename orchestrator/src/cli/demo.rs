//! `cordon demo`: a real sandboxed session on a scripted model, offline. It writes a small
//! buggy project, starts the scripted Messages API server in-process, and runs exactly what
//! `cordon run` runs against it, printing each step.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser};
use cordon::model::{Credentials, ModelConfig};
use cordon::scripted::ScriptedModel;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to write the demo project (default: a new private directory under the system's
    /// temp dir, kept afterwards).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
}

/// Parses `run`'s flags, so the demo follows whatever `run` accepts.
#[derive(Parser)]
struct RunFlags {
    #[command(flatten)]
    run: super::run::RunArgs,
}

pub fn main(args: DemoArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cordon: cannot start the runtime: {e}");
            return ExitCode::from(super::EXIT_CORDON_FAILED);
        }
    };
    match runtime.block_on(demo(args)) {
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
    let argv = [
        "cordon-run".into(),
        "--workspace".into(),
        dir.display().to_string(),
        "--permission-mode".into(),
        "bypassPermissions".into(),
        "--verbose".into(),
        cordon::demo::PROMPT.into(),
    ];
    let flags = RunFlags::try_parse_from(argv).context("demo flags")?;
    let code = super::run::run_with_model(flags.run, Some(config)).await;
    model.shutdown().await;
    eprintln!(
        "\ncordon demo: greet.py now reads:\n{}",
        std::fs::read_to_string(dir.join("greet.py")).unwrap_or_default()
    );
    code
}
