//! The `cordon` command line: one module per subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod admin;
mod audit;
mod demo;
mod doctor;
mod images;
mod permissions;
mod rewind;
mod run;
mod sandbox;
mod serve;
mod stream_input;
mod trust;

#[derive(Parser)]
#[command(
    name = "cordon",
    disable_version_flag = true,
    about = "Run AI coding agents in a kernel-enforced sandbox",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand, `cordon [-p] PROMPT` and `cordon --input-format stream-json
    /// --output-format stream-json` are `cordon run` (as the Agent SDK invokes its CLI).
    #[command(flatten)]
    run: run::RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// A real sandboxed session on a scripted model, offline: watch it fix a small project.
    Demo(demo::DemoArgs),
    /// Run one agent task headless: a prompt in, tool calls in the sandbox, an answer out.
    Run(Box<run::RunArgs>),
    /// List a session's checkpoints, or restore the workspace to before a user message.
    Rewind(rewind::RewindArgs),
    #[command(about = sandbox::ABOUT)]
    Sandbox(sandbox::SandboxArgs),
    /// What this host supports, and whether the chosen backend can confine.
    Doctor(doctor::DoctorArgs),
    /// Build the sandbox images (docker backend) from `images/`.
    Images(images::ImagesArgs),
    /// Explain what the permission rules decide about a tool call (exit 0 allow, 1 deny, 3 ask).
    Permissions(permissions::PermissionsArgs),
    /// Trust a workspace's own settings, hooks and MCP servers as they are now.
    Trust(trust::TrustArgs),
    /// The multi-tenant HTTP API server: sessions, exec, files and approvals per tenant.
    Serve(Box<serve::ServeArgs>),
    /// Operate a server's data directory: tenants and API keys.
    Admin(admin::AdminArgs),
    /// Check a server's audit trail: every tenant's hash chain.
    Audit(audit::AuditArgs),
}

/// Exit code for usage errors and unsupported requests.
pub const EXIT_USAGE: u8 = 2;
/// Exit code when Cordon itself failed (the sandbox could not start, the agent broke).
pub const EXIT_CORDON_FAILED: u8 = 125;

pub fn main() -> ExitCode {
    init_tracing();
    // Not clap's version flag, which would print "cordon " first: the Agent SDK reads
    // the first token as the version (see `cordon::version`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let [only] = args.as_slice()
        && (only == "--version" || only == "-v")
    {
        println!("{}", cordon::version::LINE);
        return ExitCode::SUCCESS;
    }
    // `cordon sandbox` alone is parsed alone: building the whole command line's
    // definition (every subcommand's flags) is a tenth of a one-command sandbox's start.
    if args.first().is_some_and(|a| a == "sandbox") {
        return sandbox::main(sandbox::parse_alone(&args[1..]));
    }
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        let stream = cli.run.stream.input_format == stream_input::InputFormat::StreamJson;
        let no_prompt = cli.run.prompt.is_none() && !run::is_interactive(&cli.run, stream);
        if !cli.run.print && !stream && no_prompt {
            // No subcommand, no prompt, no -p, no terminal: nothing to run; say what
            // there is. (On a terminal it is an interactive session.)
            let _ = <Cli as clap::CommandFactory>::command().print_help();
            return ExitCode::from(EXIT_USAGE);
        }
        return run::main(cli.run);
    };
    match command {
        Command::Demo(args) => demo::main(args),
        Command::Run(args) => run::main(*args),
        Command::Rewind(args) => rewind::main(args),
        Command::Sandbox(args) => sandbox::main(args),
        Command::Doctor(args) => doctor::main(args),
        Command::Images(args) => images::main(args),
        Command::Permissions(args) => permissions::main(args),
        Command::Trust(args) => trust::main(args),
        Command::Serve(args) => serve::main(*args),
        Command::Admin(args) => admin::main(args),
        Command::Audit(args) => audit::main(args),
    }
}

/// The `--workspace` a command was given, else the current directory, canonical (what
/// every command that works on a workspace resolves the same way), refused when it may not
/// be a workspace (`/`, a home directory or an ancestor of one, around or inside
/// `CORDON_HOME`, a directory every user may write: see [`cordon::workspace_location`]).
fn workspace_or_cwd(given: Option<&std::path::Path>) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    let workspace = match given {
        Some(w) => w.to_path_buf(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let workspace = workspace
        .canonicalize()
        .with_context(|| format!("workspace {} does not exist", workspace.display()))?;
    cordon::workspace_location::Forbidden::from_env().check(&workspace)?;
    Ok(workspace)
}

/// Logs to stderr, filtered by `CORDON_LOG` (else `RUST_LOG`, else warnings only).
fn init_tracing() {
    let filter = std::env::var("CORDON_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
}
