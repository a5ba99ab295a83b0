//! `cordon sandbox [--backend local|docker] [--image NAME] [--workspace DIR]
//! [--settings FILE|JSON] [--allow-domain D]... -- CMD ARGS...`: runs one command (an argv,
//! not a shell string) in a fresh sandbox, streams its output as it comes and passes its
//! exit status through (a signal N gives 128+N). The docker backend builds a missing
//! Cordon image first. With allowed domains (`--allow-domain`, or
//! `sandbox.network.allowedDomains` in any settings layer) the command gets egress through
//! the session's proxy; every refused connection is reported on stderr, and so is what an
//! untrusted workspace's own settings lost. The settings' additional directories are
//! writable beside the workspace, as in a session.
//!
//! On the local backend, where it is equivalent (no egress, no disk budget), the
//! sandbox's init runs the command itself with no agent and no RPC, under the same
//! confinement (`cordon::sandbox::local::oneshot`); otherwise the command goes to the
//! agent as an exec request.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use cordon::network::EgressSpec;
use cordon::network::proxy::record::{ConnectionLog, ConnectionRecord, TracingLog};
use cordon::sandbox::local::LocalBackend;
use cordon::sandbox::local::oneshot::{self, End};
use cordon::sandbox::{BackendKind, Sandbox, SandboxSpec};
use cordon::settings::{CliSettings, Settings, SettingsArg};
use futures::StreamExt;
use sandbox_agent::launch::oneshot::CommandEnd;
use sandbox_agent::limits::MAX_EXEC_TIMEOUT_MS;
use sandbox_agent::proto::{ExecRequest, ExitStatus, exec_event, output_chunk};
use tokio::io::AsyncWriteExt;

use super::{EXIT_CORDON_FAILED, EXIT_USAGE};

#[derive(clap::Args)]
pub struct SandboxArgs {
    /// Where the sandbox runs.
    #[arg(long, value_enum, default_value = "local")]
    backend: BackendKind,
    /// Docker image (docker backend; default cordon-minimal).
    #[arg(long, value_name = "NAME")]
    image: Option<String>,
    /// The writable workspace, visible at the same path inside (default: cwd).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Grant outbound access to a domain (`example.com`, `*.example.com`, `host:port`),
    /// through the egress proxy; repeatable.
    #[arg(long = "allow-domain", value_name = "D")]
    allow_domain: Vec<String>,
    /// Settings as a file or inline JSON (as `cordon run --settings`).
    #[arg(long, value_name = "FILE|JSON")]
    settings: Option<String>,
    /// Hide a path inside the workspace from every read (as a `Read(...)` deny rule bound
    /// in the kernel does); for tests and debugging.
    #[arg(long = "deny-read", value_name = "PATH", hide = true)]
    deny_read: Vec<PathBuf>,
    /// Make a path inside the workspace read-only (as an `Edit(...)` deny rule does).
    #[arg(long = "deny-write", value_name = "PATH", hide = true)]
    deny_write: Vec<PathBuf>,
    /// Run the command through the agent over RPC even where the one-shot path (no
    /// agent) is equivalent; for tests and comparisons.
    #[arg(long = "via-agent", hide = true)]
    via_agent: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// What `cordon sandbox` does, in its help (alone and in `cordon --help`).
pub const ABOUT: &str = "Run one command under exactly the confinement the Bash tool gets";

/// `cordon sandbox`'s arguments parsed on their own (`rest` follows the subcommand's name):
/// the same flags, help and errors as through the whole command line.
pub fn parse_alone(rest: &[std::ffi::OsString]) -> SandboxArgs {
    #[derive(clap::Parser)]
    #[command(name = "cordon sandbox", about = ABOUT)]
    struct Alone {
        #[command(flatten)]
        args: SandboxArgs,
    }
    let argv =
        std::iter::once(std::ffi::OsString::from("cordon sandbox")).chain(rest.iter().cloned());
    <Alone as clap::Parser>::parse_from(argv).args
}

pub fn main(args: SandboxArgs) -> ExitCode {
    if args.image.is_some() && args.backend != BackendKind::Docker {
        eprintln!("cordon: --image needs --backend docker");
        return ExitCode::from(EXIT_USAGE);
    }
    let planned = plan(&args);
    // The local backend's one-shot path runs here, before any runtime (the launcher
    // clones the sandbox's init from this process: it must have one thread).
    if let Ok(p) = &planned
        && args.backend == BackendKind::Local
        && !args.via_agent
        && !p.network.policy.grants_egress()
        && oneshot::equivalent(&p.spec)
    {
        return report(run_inline(p, args.command));
    }
    let runtime = match cordon::runtime::for_one_session() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cordon: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_CORDON_FAILED);
        }
    };
    let outcome = planned.and_then(|p| runtime.block_on(run(args, p)));
    cordon::runtime::finish(runtime);
    report(outcome)
}

/// The exit code for what happened; Cordon's own failure said on stderr.
fn report(outcome: anyhow::Result<ExitCode>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(e) => {
            // The error may quote the launcher's log, which names workspace paths a
            // session chose (control characters and all): escaped for the terminal.
            eprintln!(
                "cordon: {}",
                cordon::output::for_terminal(&format!("{e:#}"))
            );
            ExitCode::from(EXIT_CORDON_FAILED)
        }
    }
}

/// What the command runs in, before any backend starts: the sandbox's spec from the
/// settings (limits, additional directories, toolchains), the network policy and the
/// working directory. No runtime is needed (nor started) for this.
struct Plan {
    spec: SandboxSpec,
    settings: Settings,
    network: cordon::network::layers::Resolved,
    cwd: PathBuf,
}

fn plan(args: &SandboxArgs) -> anyhow::Result<Plan> {
    let workspace = super::workspace_or_cwd(args.workspace.as_deref())?;
    let session = format!("sandbox-{}", uuid::Uuid::new_v4().simple());
    let mut spec = SandboxSpec::new(session, &workspace);
    // Relative paths are taken from the workspace; the launcher refuses anything outside.
    spec.denied_read = args.deny_read.iter().map(|p| workspace.join(p)).collect();
    spec.denied_write = args.deny_write.iter().map(|p| workspace.join(p)).collect();
    spec.image = args.image.clone();
    // One command: one per-command cgroup to make and remove, not a session's worth.
    spec.concurrent_commands = 1;
    let settings = Settings::load(
        &workspace,
        CliSettings {
            settings: args.settings.as_deref().map(SettingsArg::parse),
            allowed_domains: args.allow_domain.clone(),
            ..CliSettings::default()
        },
    )
    .context("reading the settings")?;
    // What an untrusted workspace's own settings lost (network domains, say), as a run says.
    if let Some(notice) = settings.untrusted_notice() {
        eprintln!("cordon: {notice}");
    }
    // The same limits and additional directories a session of `cordon run` gets.
    spec.limits = Some(settings.sandbox_limits());
    spec.additional_dirs = settings.additional_directories();
    // The same toolchains too: `cordon sandbox -- cargo test` runs the user's cargo.
    spec.toolchains =
        cordon::toolchains::for_session(&settings, &cordon::paths::cordon_home()?, &workspace);
    let network = cordon::network::layers::from_settings(&settings)
        .context("reading the network settings")?;
    for w in &network.warnings {
        eprintln!("cordon: {w}");
    }
    // The working directory carries in when it lies inside the workspace.
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .filter(|d| d.starts_with(&workspace))
        .unwrap_or(workspace);
    Ok(Plan {
        spec,
        settings,
        network,
        cwd,
    })
}

/// The one-shot path with this process as the launcher (no runtime, no launcher process:
/// see `LocalBackend::run_oneshot_inline`).
fn run_inline(plan: &Plan, argv: Vec<String>) -> anyhow::Result<ExitCode> {
    let command = oneshot::Command {
        argv,
        cwd: plan.cwd.clone(),
    };
    let timeout = std::time::Duration::from_millis(MAX_EXEC_TIMEOUT_MS);
    let ended = LocalBackend::from_env()
        .and_then(|b| b.run_oneshot_inline(&plan.spec, &command, timeout))
        .context("running the command")?;
    ended_code(ended)
}

async fn run(args: SandboxArgs, plan: Plan) -> anyhow::Result<ExitCode> {
    let Plan {
        mut spec,
        settings,
        network,
        cwd,
    } = plan;
    let workspace = spec.workspace.clone();
    if spec.image.is_none() && args.backend == BackendKind::Docker {
        spec.image = cordon::sandbox::docker::devcontainer::image_for_session(
            &workspace,
            settings.trust().is_trusted(),
            &mut |line| eprintln!("cordon: {line}"),
        )
        .await
        .context("the workspace's devcontainer")?;
    }
    if network.policy.grants_egress() {
        let mut egress = EgressSpec::for_session(&spec.session_id, &network)?;
        egress.log = Arc::new(StderrRefusals);
        spec = spec.with_egress(egress);
    }
    let sandbox = cordon::sandbox::start(args.backend, &spec)
        .await
        .context("starting the sandbox")?;
    let outcome = exec(&sandbox, args.command, cwd).await;
    let teardown = sandbox.destroy().await;
    let status = outcome?;
    teardown.context("tearing the sandbox down")?;
    Ok(exit_code(&status))
}

/// The exit code of a one-shot run, as `exit_code` gives it for the agent's.
fn ended_code(ended: End) -> anyhow::Result<ExitCode> {
    let status = match ended {
        End::Command(CommandEnd::Exited(code)) => ExitStatus {
            code: Some(code),
            ..Default::default()
        },
        End::Command(CommandEnd::Signaled(signal)) => ExitStatus {
            signal: Some(signal),
            ..Default::default()
        },
        End::TimedOut => ExitStatus {
            timed_out: true,
            ..Default::default()
        },
        End::Interrupted => bail!("interrupted"),
    };
    Ok(exit_code(&status))
}

async fn exec(sandbox: &Sandbox, argv: Vec<String>, cwd: PathBuf) -> anyhow::Result<ExitStatus> {
    let mut client = sandbox.client.clone();
    let exec_id = uuid::Uuid::new_v4().simple().to_string();
    let req = ExecRequest {
        exec_id: exec_id.clone(),
        argv,
        timeout_ms: MAX_EXEC_TIMEOUT_MS,
        cwd: cwd.to_string_lossy().into_owned(),
        ..Default::default()
    };
    let mut stream = Box::pin(client.exec(req).await.context("starting the command")?);
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    loop {
        let event = tokio::select! {
            event = stream.next() => event,
            _ = tokio::signal::ctrl_c() => {
                // Interrupt: kill the command's whole process group, then tear down.
                let _ = sandbox.client.clone().cancel(&exec_id).await;
                bail!("interrupted");
            }
        };
        let Some(event) = event else {
            bail!("the command's output stream ended without an exit status");
        };
        match event.context("running the command")?.event {
            Some(exec_event::Event::Output(chunk)) => {
                let out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send) =
                    if chunk.stream == output_chunk::Stream::Stderr as i32 {
                        &mut stderr
                    } else {
                        &mut stdout
                    };
                out.write_all(&chunk.data).await.context("writing output")?;
                out.flush().await.context("writing output")?;
            }
            Some(exec_event::Event::Exit(status)) => return Ok(status),
            None => {}
        }
    }
}

/// Says on stderr which connections the proxy refused (and logs every one).
struct StderrRefusals;

impl ConnectionLog for StderrRefusals {
    fn record(&self, r: ConnectionRecord) {
        if !r.allowed && !r.host.is_empty() {
            // The host is what the sandboxed command asked for: escaped, so a refused
            // "name" cannot carry terminal control sequences onto the user's screen.
            eprintln!(
                "cordon: egress refused {}:{} ({})",
                cordon::output::for_terminal(&r.host.replace('\n', "\\n")),
                r.port,
                cordon::output::for_terminal(&r.rule)
            );
        }
        TracingLog.record(r);
    }
}

/// The shell's convention: the exit code, or 128+N for signal N; a timeout gives 124.
fn exit_code(status: &ExitStatus) -> ExitCode {
    if status.timed_out {
        eprintln!("cordon: the command timed out");
        return ExitCode::from(124);
    }
    let code = match (status.code, status.signal) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => i32::from(EXIT_CORDON_FAILED),
    };
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(EXIT_CORDON_FAILED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_to_128_plus_n() {
        let st = ExitStatus {
            signal: Some(9),
            ..Default::default()
        };
        assert_eq!(exit_code(&st), ExitCode::from(137));
        let st = ExitStatus {
            code: Some(3),
            ..Default::default()
        };
        assert_eq!(exit_code(&st), ExitCode::from(3));
    }
}
