//! Layer 1: whether a tool call runs at all. Rules come from the settings files and the
//! command line; the [`Engine`] evaluates deny rules, then ask rules, then allow rules, then
//! the permission mode, and every [`Verdict`] says which rule from which file decided.
//!
//! # Layout
//!
//! - [`rules`]: the rule grammar (`Tool`, `Tool(specifier)`).
//! - [`shell`]: a shell parser that splits a command into the simple commands it runs.
//! - [`bash_rules`]: `Bash(...)` specifiers against those commands, wrappers looked through.
//! - [`wrappers`]: commands that run other commands (`timeout`, `env`, `find -exec`, `eval`).
//! - [`options`]: options read the way getopt_long reads them (abbreviations included).
//! - [`read_only`]: commands that never need permission.
//! - [`paths`]: gitignore-style path patterns for Read / Edit / Write.
//! - [`kind`]: [`ToolKind`], what a tool does as far as rules care; the engine routes on it.
//! - [`engine`]: the [`Engine`] (`decide`, `offers`, `set_mode`, `explain_bash`).
//!
//! # Example
//!
//! ```
//! use cordon::permissions::{Decision, Engine, PermissionMode};
//! let engine = Engine::from_lists(
//!     PermissionMode::Default,
//!     &["Bash(npm test *)".to_string()],
//!     &[],
//!     std::path::Path::new("/work"),
//! )
//! .unwrap();
//! let cmd = |c: &str| serde_json::json!({ "command": c });
//! assert_eq!(engine.decide("Bash", &cmd("npm test -w"), false).decision, Decision::Allow);
//! assert_eq!(engine.decide("Bash", &cmd("npm test && curl x"), false).decision, Decision::Ask);
//! ```

pub mod bash_rules;
pub mod engine;
pub mod kind;
pub mod options;
#[doc(hidden)]
pub mod parser_oracle;
pub mod paths;
pub mod read_only;
#[doc(hidden)]
pub mod rule_table;
pub mod rules;
pub mod shell;
pub mod wrappers;

pub use engine::{
    BashExplanation, Decision, Engine, EngineConfig, ModeError, RuleOrigin, ScopedRule, Verdict,
};
pub use kind::ToolKind;
pub use rules::{Rule, RuleError, split_rule_list};

/// How permission prompts are resolved in a headless run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    /// Read-only tools run; others need an allow rule.
    #[value(name = "default")]
    Default,
    /// Also allows file edits (Write, Edit).
    #[value(name = "acceptEdits")]
    AcceptEdits,
    /// Read-only tools only.
    #[value(name = "plan")]
    Plan,
    /// Denies whatever no rule allows (same as default in a headless run).
    #[value(name = "dontAsk")]
    DontAsk,
    /// No permission checks; the sandbox still holds.
    #[value(name = "bypassPermissions")]
    BypassPermissions,
}

impl PermissionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Plan => "plan",
            Self::DontAsk => "dontAsk",
            Self::BypassPermissions => "bypassPermissions",
        }
    }

    /// Parses Claude Code's spelling (`acceptEdits`, ...).
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Default,
            Self::AcceptEdits,
            Self::Plan,
            Self::DontAsk,
            Self::BypassPermissions,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

#[cfg(test)]
mod table_tests;
