//! `cordon images build [minimal|dev|all]`: builds the sandbox images from `images/`, with
//! one progress line per step on stderr and a summary line per image on stdout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;

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
        /// `dev` (Debian with git, python3, a compiler), or `all`; with `--dockerfile`, the
        /// name of your own image (then used with `--image NAME`).
        #[arg(default_value = "minimal")]
        which: String,
        /// Build your project's image from this Dockerfile (its bases must be local
        /// images); the agent is added on top.
        #[arg(long)]
        dockerfile: Option<PathBuf>,
        /// The build context (default: the Dockerfile's directory).
        #[arg(long, requires = "dockerfile")]
        context: Option<PathBuf>,
    },
}

pub fn main(args: ImagesArgs) -> ExitCode {
    let ImagesCommand::Build {
        which,
        dockerfile,
        context,
    } = args.command;
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cordon: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_CORDON_FAILED);
        }
    };
    let built = match dockerfile {
        Some(file) => runtime
            .block_on(build_user(&which, &file, context.as_deref()))
            .map(|b| vec![b]),
        None => match ImageSet::from_str(&which, true) {
            Ok(set) => runtime.block_on(docker::build_images(set, |line| eprintln!("{line}"))),
            Err(_) => {
                eprintln!(
                    "cordon: {which:?} is not a built-in image (minimal, dev, all); \
                     give --dockerfile FILE to build your own"
                );
                return ExitCode::from(EXIT_CORDON_FAILED);
            }
        },
    };
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

/// `cordon images build NAME --dockerfile FILE [--context DIR]`.
async fn build_user(
    name: &str,
    file: &Path,
    context: Option<&Path>,
) -> Result<docker::images::Built, cordon::sandbox::SandboxError> {
    let read_err = |source| cordon::sandbox::SandboxError::Setup {
        step: "read the Dockerfile",
        source,
    };
    let text = std::fs::read_to_string(file).map_err(read_err)?;
    let context = context
        .map(Path::to_path_buf)
        .or_else(|| file.parent().map(Path::to_path_buf))
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    let client = docker::connect().await?;
    let recipe = docker::user_image::UserRecipe {
        dockerfile: &text,
        context: Some(&context),
        env: &[],
    };
    docker::user_image::build(&client, name, &recipe, &mut |line| eprintln!("{line}")).await
}
