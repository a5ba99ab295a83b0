//! `cordon rewind [--session ID | --continue] [--to USER_MESSAGE_UUID | --list]
//! [--conversation]`: lists a session's checkpoints (one per user prompt), or restores the
//! workspace to the state before a given user message; with `--conversation`, also starts
//! a new session whose conversation stops before that message.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use cordon::checkpoints::{Checkpoints, rewind_conversation};
use cordon::interactive::commands::prompts_of;
use cordon::interactive::preview::one_line;
use cordon::output;
use cordon::session::SessionStore;

use super::EXIT_USAGE;

#[derive(Debug, Args)]
pub struct RewindArgs {
    /// The session (default with --continue: the latest in the workspace).
    #[arg(long, conflicts_with = "continue_last")]
    pub session: Option<String>,
    /// The most recent session in this workspace.
    #[arg(short = 'c', long = "continue")]
    pub continue_last: bool,
    /// The workspace, for --continue (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Restore the files to their state before this user message.
    #[arg(long, value_name = "USER_MESSAGE_UUID", conflicts_with = "list")]
    pub to: Option<String>,
    /// List the checkpoints (the default when --to is absent).
    #[arg(long)]
    pub list: bool,
    /// Also rewind the conversation: a new session that stops before the message.
    #[arg(long, requires = "to")]
    pub conversation: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: RewindArgs) -> ExitCode {
    if args.session.is_none() && !args.continue_last {
        eprintln!("cordon: name the session with --session ID, or use --continue");
        return ExitCode::from(EXIT_USAGE);
    }
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordon: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: RewindArgs) -> anyhow::Result<ExitCode> {
    let home = cordon::paths::cordon_home()?;
    let store = SessionStore::open(&home).context("opening the session store")?;
    let info = match &args.session {
        Some(id) => store.get(id)?,
        None => {
            let ws = super::workspace_or_cwd(args.workspace.as_deref())?;
            store.latest_in(&ws)?
        }
    };
    // The same budget the session had: a rewind first saves the current state.
    let budget = cordon::settings::Settings::load(&info.workspace, Default::default())
        .map_or(cordon::checkpoints::DEFAULT_BUDGET_BYTES, |s| {
            s.checkpoint_budget_bytes()
        });
    let checkpoints = Checkpoints::open(&home, &info.id, &info.workspace)
        .context("opening the session's checkpoints")?
        .with_budget(budget);
    let Some(to) = &args.to else {
        let prompts = prompts_of(&info.transcript);
        let list = checkpoints.list()?;
        if args.json {
            let rows: Vec<serde_json::Value> = list
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "user_message_uuid": c.user_message_uuid,
                        "created_at": c.created_at,
                        "prompt": prompts.iter().find(|(u, _)| *u == c.user_message_uuid).map(|(_, p)| p),
                        "skipped": c.skipped,
                    })
                })
                .collect();
            println!("{}", serde_json::Value::Array(rows));
        } else if list.is_empty() {
            println!("no checkpoints in session {}", info.id);
        } else {
            for c in &list {
                let prompt = prompts
                    .iter()
                    .find(|(u, _)| *u == c.user_message_uuid)
                    .map(|(_, p)| one_line(p, 60))
                    .unwrap_or_default();
                println!(
                    "{}  {}  {}",
                    c.user_message_uuid,
                    c.created_at,
                    output::for_terminal(&prompt)
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let report = checkpoints
        .rewind_idle(to)
        .with_context(|| format!("rewinding session {} to {to}", info.id))?;
    let forked = if args.conversation {
        Some(rewind_conversation(&store, &info.id, to).context("rewinding the conversation")?)
    } else {
        None
    };
    if args.json {
        let value = serde_json::json!({
            "session_id": info.id,
            "restored": report.restored,
            "removed": report.removed,
            "skipped": report.skipped,
            "kept": report.kept,
            "new_session_id": forked.as_ref().map(|f| f.id.clone()),
        });
        println!("{value}");
    } else {
        // File names are the sandbox's choice: shown, never sent as control sequences.
        let shown =
            |p: &std::path::Path| output::name_for_terminal(&p.display().to_string()).into_owned();
        for p in &report.restored {
            println!("restored {}", shown(p));
        }
        for p in &report.removed {
            println!("removed {}", shown(p));
        }
        for p in &report.skipped {
            println!("left as is (over 50 MiB) {}", shown(p));
        }
        for p in &report.kept {
            println!("kept (existed before the checkpoint) {}", shown(p));
        }
        println!(
            "rewound {} file(s), removed {} in {}",
            report.restored.len(),
            report.removed.len(),
            info.workspace.display()
        );
        if let Some(f) = &forked {
            println!(
                "conversation rewound: continue with `cordon run --resume {}`",
                f.id
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
