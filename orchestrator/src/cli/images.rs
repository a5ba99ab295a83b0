//! `cordon images build [minimal|dev|all]`: builds the sandbox images from `images/`, with
//! one progress line per step on stderr and a summary line per image on stdout.

use std::process::ExitCode;

use cordon::sandbox::docker::{self, ImageSet};

use super::EXIT_CORDON_FAILED;

#[derive(clap::Args)]
pub struct ImagesArgs {
    #[command(subcommand)]
    command: ImagesCommand,
}

#[derive(clap::Subcommand)]
enum ImagesCommand {
    /// Build (or rebuild when the agent changed) the sandbox images; offline, from local
    /// files only. `minimal` takes seconds, `dev` minutes the first time (debootstrap).
    Build {
        /// Which images: the default `minimal` (what sessions use unless told otherwise),
        /// `dev` (Debian with git, python3, a compiler), or `all`.
        #[arg(value_enum, default_value = "minimal")]
        which: ImageSet,
    },
}

pub fn main(args: ImagesArgs) -> ExitCode {
    let ImagesCommand::Build { which } = args.command;
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cordon: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_CORDON_FAILED);
        }
    };
    let built = runtime.block_on(docker::build_images(which, |line| eprintln!("{line}")));
    match built {
        Ok(images) => {
            for image in images {
                let what = if image.rebuilt { "built" } else { "up to date" };
                println!("{}: {what}", image.image);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cordon: building the images failed: {e}");
            ExitCode::from(EXIT_CORDON_FAILED)
        }
    }
}
