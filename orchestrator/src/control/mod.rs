//! The stream-json control protocol: how a client such as the Claude Agent SDK drives a
//! session through stdin and stdout (`cordon --input-format stream-json
//! --output-format stream-json`).
//!
//! - [`protocol`]: the wire shapes and the parser of the client's lines.
//! - [`channel`]: [`Controller`], the single writer (records never interleave) and the
//!   correlation of our requests with the client's answers.
//! - [`prompter`]: [`SdkPrompter`], the ask path answered by the client's `can_use_tool`.
//! - [`sdk_hooks`]: [`SdkHookCallbacks`], the client's hook functions (`hook_callback`),
//!   and the registration of its matchers from `initialize`.
//! - [`session`]: the reader, the answers to the client's requests (initialize,
//!   interrupt, set_permission_mode, rewind_files, set_model, mcp_status, mcp_toggle,
//!   mcp_reconnect, mcp_message, get_context_usage, stop_task; any other gets an error
//!   naming it) and the serve loop.
//! - [`records`]: the session records with the fields the SDK's parser requires.
//! - [`sdk_mcp`]: the client's in-process MCP servers, reached with `mcp_message`.
//! - [`agents`]: the client's programmatic sub-agents, every field applied or refused.
//! - [`mirror`]: `--session-mirror`, the transcript mirrored to the client's session store.
//! - [`context_usage`]: the `get_context_usage` answer.
//!
//! The client is whoever started Cordon (the user's own program): it may allow calls the
//! rules would ask about and rewrite their input, but what it answers never widens a deny
//! rule (the gate asks only after the rules said "ask") nor the sandbox.

pub mod agents;
pub mod channel;
pub mod context_usage;
pub mod hook_events;
pub mod mirror;
pub mod prompter;
pub mod protocol;
pub mod records;
pub mod sdk_hooks;
pub mod sdk_mcp;
pub mod session;

pub use channel::{ControlError, Controller, write_lines};
pub use prompter::SdkPrompter;
pub use sdk_hooks::SdkHookCallbacks;
pub use session::{
    Event, InterruptFn, McpControl, ModeSetter, PromptUuids, RecordInfo, Rewinder, SessionControls,
    read_lines, serve,
};

#[cfg(test)]
mod tests;
