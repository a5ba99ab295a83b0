//! A hostile repository and a hostile model, end to end: `cordon run` with the scripted
//! model, then the host checked the way a user would find it (owners, modes, files outside
//! the workspace, what the host's tools would run, what reached the model), and what a
//! repository's own files try to widen. One submodule per class of attack, under
//! `hostile_repo/` (a crate root looks for modules beside itself, hence the paths).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hostile_repo/additional_dirs.rs"]
mod additional_dirs;
#[path = "hostile_repo/git.rs"]
mod git;
#[path = "hostile_repo/host_executed.rs"]
mod host_executed;
#[path = "hostile_repo/host_reads.rs"]
mod host_reads;
#[path = "hostile_repo/interactive.rs"]
mod interactive;
#[path = "hostile_repo/limits.rs"]
mod limits;
#[path = "hostile_repo/modes.rs"]
mod modes;
#[path = "hostile_repo/parser.rs"]
mod parser;
#[path = "hostile_repo/privilege.rs"]
mod privilege;
#[path = "hostile_repo/rewind.rs"]
mod rewind;
#[path = "hostile_repo/trust.rs"]
mod trust;
#[path = "hostile_repo/workspace_choice.rs"]
mod workspace_choice;
