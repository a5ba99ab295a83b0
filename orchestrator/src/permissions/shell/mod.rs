//! A shell parser for permission checks: it splits a Bash command into the simple commands
//! it would run, wherever they hide (after `&&`, `||`, `;`, `|`, `&`, newlines, inside
//! subshells, brace groups, `$(...)`, backticks and process substitutions), and reports each
//! one's words after quote removal, its assignments and its redirections.
//!
//! It does not run anything and does not expand anything: a word whose value depends on an
//! expansion (`$VAR`, `$(...)`, `${...}`) is marked `dynamic`; a word that the shell could
//! turn into other words (unquoted globs or braces) is marked `glob`. Whatever it does not
//! understand (control flow, function definitions, arithmetic with substitutions, unbalanced
//! quotes, raw control characters) is [`Unparseable`]: the permission engine asks about such
//! a command and never allows it by a rule.
//!
//! # Example
//!
//! ```
//! use cordon::permissions::shell::parse;
//! let script = parse("npm test && echo \"$(curl x)\" > out.txt").unwrap();
//! let names: Vec<_> = script.commands.iter().map(|c| c.words[0].value.clone()).collect();
//! assert_eq!(names, ["npm", "curl", "echo"]);
//! ```

mod expansion;
mod heredoc;
mod parser;

pub use parser::parse;
pub(crate) use parser::parse_at_depth as parser_at_depth;

/// Nesting limit (substitutions inside substitutions, `bash -c` inside `bash -c`).
pub const MAX_DEPTH: usize = 24;
/// Longest command the parser accepts (characters).
pub const MAX_LEN: usize = 256 * 1024;

/// Why a command could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse the command: {reason}")]
pub struct Unparseable {
    pub reason: String,
}

impl Unparseable {
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

/// One shell word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    /// The value, with quotes and escapes removed; expansions are kept as written.
    pub value: String,
    /// Some of it was quoted or escaped.
    pub quoted: bool,
    /// Its value depends on an expansion: `$VAR`, `${...}`, `$(...)`, backticks, `<(...)`.
    pub dynamic: bool,
    /// It contains unquoted glob or brace characters the shell may expand into other words.
    pub glob: bool,
}

impl Word {
    /// The value when it is known exactly (no expansion can change it).
    pub fn literal(&self) -> Option<&str> {
        (!self.dynamic && !self.glob).then_some(self.value.as_str())
    }
}

/// `NAME=value` before a command (or alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub name: String,
    pub value: Word,
}

/// What a redirection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `>`, `>|`, `&>`, `>& file`: the target file is written.
    Write,
    /// `>>`, `&>>`: the target file is appended to.
    Append,
    /// `<`: the target file is read.
    Read,
    /// `<>`: opened for reading and writing.
    ReadWrite,
    /// `2>&1`, `<&0`, `>&-`: file descriptors only, no file.
    Duplicate,
    /// `<<DELIM` with its body (data).
    HereDoc,
    /// `<<< word` (data).
    HereString,
}

impl RedirectKind {
    /// The target is a file that gets written.
    pub fn writes(self) -> bool {
        matches!(self, Self::Write | Self::Append | Self::ReadWrite)
    }

    /// The target is a file that gets read.
    pub fn reads(self) -> bool {
        matches!(self, Self::Read | Self::ReadWrite)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub kind: RedirectKind,
    /// The file (or here-string word / here-document delimiter).
    pub target: Word,
}

/// One simple command: what the shell would execute as one program or builtin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleCommand {
    pub assignments: Vec<Assignment>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// The source text of the command, for explanations.
    pub text: String,
}

/// Every simple command of a script, in the order the parser met them (commands found inside
/// a substitution come before the command that contains it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    pub commands: Vec<SimpleCommand>,
}

#[cfg(test)]
mod tests;
