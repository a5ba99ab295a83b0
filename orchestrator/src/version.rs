//! Cordon's version, and the Claude Code version it answers to.
//!
//! The Agent SDK drives Cordon as if it were Claude Code's CLI and checks the CLI's
//! version: older SDK releases ran `cli -v` and read the first token of its output, the
//! current ones read `claude_code_version` from the `system/init` record. Both get
//! [`CLAUDE_CODE_COMPATIBLE`], the Claude Code release whose stream-json protocol Cordon
//! speaks; everything after the first token says that this is Cordon and which one.
//!
//! The number is deliberately not newer than what Cordon implements: the SDK switches
//! features on by version (prompts sent with `client_composed` from 2.1.248 on, which
//! Cordon does not honour), and a higher number would make it believe they work.

/// Cordon's own version.
pub const CORDON: &str = env!("CARGO_PKG_VERSION");

/// The Claude Code release whose CLI protocol Cordon speaks (at least the SDK's
/// `MINIMUM_CLAUDE_CODE_VERSION`, 2.0.0, so it warns of nothing).
pub const CLAUDE_CODE_COMPATIBLE: &str = "2.1.0";

/// `cordon --version` (and `-v`, as Claude Code takes it): the compatible Claude Code
/// version first (what the SDK parses), then who is answering.
pub const LINE: &str = concat!(
    "2.1.0 (Cordon ",
    env!("CARGO_PKG_VERSION"),
    "; speaks Claude Code's CLI protocol)"
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The SDK's parse: the first whitespace-separated token, `\d+\.\d+\.\d+` at its
    /// start, compared with its minimum 2.0.0.
    fn sdk_reads(line: &str) -> Option<[u64; 3]> {
        let first = line.split_whitespace().next()?;
        let mut parts = first.split('.').map(|p| p.parse::<u64>().ok());
        Some([parts.next()??, parts.next()??, parts.next()??])
    }

    #[test]
    fn the_sdk_reads_a_supported_version_and_the_line_names_cordon() {
        let line = LINE;
        assert!(
            line.starts_with(&format!("{CLAUDE_CODE_COMPATIBLE} ")),
            "{line}"
        );
        let version = sdk_reads(line).expect("a version first");
        assert!(version >= [2, 0, 0], "{line}");
        assert!(
            version < [2, 1, 248],
            "not claiming client_composed prompts: {line}"
        );
        assert!(line.contains(&format!("Cordon {CORDON}")), "{line}");
        assert_eq!(line.lines().count(), 1);
    }
}
