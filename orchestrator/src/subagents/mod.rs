//! Sub-agents: the Agent tool runs a child agent loop with its own conversation, inside
//! the session's sandbox and under its permission gate and hooks.
//!
//! # Layout
//!
//! - [`definition`]: agent types from `.claude/agents/*.md` (trusted workspaces only) and
//!   the user's `~/.claude/agents`, `~/.cordon/agents`.
//! - [`tool`]: [`AgentTool`] (also offered as `Task`), which runs one sub-agent per call
//!   on [`crate::agent::AgentLoop`] and returns its final report.
//! - [`observer`]: SubagentStop hooks at the end of a sub-agent's turn.
//! - [`tasks`]: the running sub-agents by task id (announced to a client, stopped by
//!   its `stop_task`).
//!
//! A sub-agent's records join the session's transcript as a sidechain (`isSidechain`, with
//! the parent's `tool_use` id); its events reach the parent's channel as
//! [`crate::agent::LoopEvent::Subagent`], which stream-json prints with
//! `parent_tool_use_id`.

pub mod definition;
mod observer;
pub mod tasks;
pub mod tool;

pub use definition::{AgentDefinition, Scope};
pub use observer::SubagentObserver;
pub use tasks::{TaskEvent, TaskStatus, Tasks};
pub use tool::{AgentTool, SubagentKit};
