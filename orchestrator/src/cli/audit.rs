//! `cordon audit verify --data DIR`: walks every tenant's audit chain and reports each
//! edit, deletion or reordering; exit 0 when every chain holds, 1 when one does not.

use std::path::PathBuf;
use std::process::ExitCode;

use cordon::server::audit::verify::verify_data_dir;

use super::EXIT_CORDON_FAILED;

#[derive(clap::Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(clap::Subcommand)]
enum AuditCommand {
    /// Check every tenant's hash chain; print each chain's length and head hash.
    Verify {
        /// The server's data directory (`cordon serve --data`).
        #[arg(long, value_name = "DIR")]
        data: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Exit code when a chain does not verify.
const EXIT_TAMPERED: u8 = 1;

pub fn main(args: AuditArgs) -> ExitCode {
    let AuditCommand::Verify { data, json } = args.command;
    let report = match verify_data_dir(&data) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cordon: {e}");
            return ExitCode::from(EXIT_CORDON_FAILED);
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("cordon: {e}"),
        }
    } else {
        for chain in &report.chains {
            println!(
                "tenant {}: {} records, head {}",
                chain.tenant, chain.records, chain.head
            );
        }
        for problem in &report.problems {
            println!("TAMPERED {problem}");
        }
        if report.ok() {
            println!("audit: {} chains verify", report.chains.len());
        }
    }
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TAMPERED)
    }
}
