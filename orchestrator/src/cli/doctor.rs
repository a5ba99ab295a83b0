//! `cordon doctor`.

use std::process::ExitCode;

use cordon::doctor;
use cordon::sandbox::BackendKind;

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// The backend whose ability to confine decides the exit status.
    #[arg(long, value_enum, default_value = "local")]
    backend: BackendKind,
    /// Where idmapped mounts are probed (the workspace's filesystem); default: cwd.
    #[arg(long)]
    workspace: Option<std::path::PathBuf>,
}

pub fn main(args: DoctorArgs) -> ExitCode {
    let workspace = args
        .workspace
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| "/".into());
    let report = doctor::run(args.backend, &workspace);
    print!("{}", report.render());
    if report.can_confine() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
