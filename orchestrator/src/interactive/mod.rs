//! The interactive terminal session: `cordon` (or `cordon run`) with no prompt on a
//! terminal. Answers and tool calls stream as they happen; a permission question shows the
//! call (a diff for Edit and Write, the command for Bash) and reads one key; Shift-Tab
//! cycles the permission mode; Ctrl-C interrupts the turn; slash commands act on the
//! session.
//!
//! # Layout
//!
//! - [`session`]: [`Interactive`], the loop that owns the screen and the keys.
//! - [`prompter`]: [`TerminalPrompter`], the gate's ask path into that loop.
//! - [`keys`] and [`editor`]: terminal events as keys, and the input line with history.
//! - [`render`]: the screen (crossterm commands only).
//! - [`preview`]: what a question shows of a call.
//! - [`commands`]: slash commands and their listings; `slash`: the ones that ask back.
//! - [`trust`]: the first-use question in an untrusted workspace, and `/trust`.
//! - [`always`]: "allow always" as a rule (written by [`crate::settings::local_rules`],
//!   which edits `.claude/settings.local.json` without following planted links and keeps a
//!   trusted workspace trusted).
//!
//! The session is assembled by the same code as a headless run (the CLI's `run`); this
//! module only replaces who answers questions and who shows the events.

pub mod always;
pub mod commands;
pub mod editor;
pub mod keys;
pub mod preview;
pub mod prompter;
pub mod render;
pub mod session;
mod slash;
pub mod trust;

pub use prompter::TerminalPrompter;
pub use session::{Interactive, InteractiveError, SessionParts};
