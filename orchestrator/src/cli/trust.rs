//! `cordon trust [DIR]`: trust a workspace's own settings, hooks and MCP servers as they
//! are now (bound to their content hashes); `--status` says whether it is trusted,
//! `--forget` withdraws the trust.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use cordon::trust::{self, TrustInputs, TrustStore, UntrustedReason, WorkspaceTrust};

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace (default: the current directory).
    pub dir: Option<PathBuf>,
    /// Say whether the workspace is trusted (exit 0) or not (exit 1); change nothing.
    #[arg(long, conflicts_with = "forget")]
    pub status: bool,
    /// Withdraw the trust.
    #[arg(long)]
    pub forget: bool,
}

pub fn main(args: TrustArgs) -> ExitCode {
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordon: {e:#}");
            ExitCode::from(super::EXIT_USAGE)
        }
    }
}

fn run(args: &TrustArgs) -> anyhow::Result<ExitCode> {
    let workspace = super::workspace_or_cwd(args.dir.as_deref())?;
    let store = TrustStore::from_env()?;
    if args.forget {
        let was = store.forget(&workspace)?;
        println!(
            "{} {}",
            if was {
                "no longer trusted:"
            } else {
                "was not trusted:"
            },
            workspace.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.status {
        let inputs = TrustInputs {
            store: Some(&store),
            ..TrustInputs::default()
        };
        let state = trust::decide(
            &workspace,
            || trust::current_fingerprint(&workspace),
            &inputs,
        )?;
        println!("{}: {}", workspace.display(), describe(&state));
        return Ok(if state.is_trusted() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let (workspace, fingerprint) =
        trust::trust_workspace(&store, &workspace).context("trusting the workspace")?;
    println!("trusted: {}", workspace.display());
    let mut any = false;
    for (file, digest) in fingerprint.files() {
        // The repository chose these names: shown, never sent as control sequences.
        println!("  {}  {digest}", cordon::output::name_for_terminal(file));
        any = true;
    }
    if !any {
        println!("  (no settings, hooks or MCP files yet: any that appear untrust it again)");
    } else {
        println!("a change to any of these files untrusts it again");
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(state: &WorkspaceTrust) -> String {
    match state {
        WorkspaceTrust::Trusted { .. } => "trusted".into(),
        WorkspaceTrust::Untrusted {
            reason: UntrustedReason::NeverTrusted,
        } => "not trusted".into(),
        WorkspaceTrust::Untrusted {
            reason: UntrustedReason::Changed(files),
        } => format!(
            "not trusted: changed since trusted: {}",
            cordon::output::name_for_terminal(&files.join(", "))
        ),
        WorkspaceTrust::Untrusted {
            reason: UntrustedReason::Unverifiable(why),
        } => format!(
            "not trusted: cannot check its files: {}",
            cordon::output::for_terminal(why)
        ),
    }
}
