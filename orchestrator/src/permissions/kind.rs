//! [`ToolKind`]: what a tool does, as far as the permission rules care. The engine routes a
//! call on its kind, so a tool named at run time (an MCP server's, a sub-agent's) gets the
//! same treatment as a built-in of the same kind without the engine knowing its name.
//!
//! - `Read(...)` path rules cover every [`ToolKind::Read`] tool (Read, Glob, Grep).
//! - `Edit(...)` and `Write(...)` path rules cover every [`ToolKind::Edit`] tool.
//! - `Bash(...)` command rules apply to the [`ToolKind::Exec`] tool, whose `command` is
//!   parsed part by part.
//! - A tool of kind [`ToolKind::Other`] or [`ToolKind::Network`] is matched by its own name
//!   (`mcp__server__tool`, `WebFetch(domain:...)`).

use serde_json::Value;

/// The permission kind of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    /// Reads files (its path field is checked against `Read(...)` rules).
    Read,
    /// Changes files (its path field is checked against `Edit(...)`/`Write(...)` rules).
    Edit,
    /// Runs shell commands (its `command` is checked against `Bash(...)` rules).
    Exec,
    /// Reaches the network from the orchestrator.
    Network,
    /// Anything else: MCP tools, task lists, sub-agents; matched by name only.
    Other,
}

impl ToolKind {
    /// The kind of a Claude Code tool known by name, for callers that have a name and no
    /// registry (the `cordon permissions` explainer, rule files, tests). Tools in a
    /// registry report their own kind.
    pub fn of_builtin(name: &str) -> Option<Self> {
        Some(match name {
            "Read" | "Glob" | "Grep" | "NotebookRead" | "LS" => Self::Read,
            "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => Self::Edit,
            "Bash" => Self::Exec,
            "WebFetch" | "WebSearch" => Self::Network,
            _ => return None,
        })
    }

    /// The kind for `name` when only the name is known: a built-in's, else `Other`.
    pub fn of_name(name: &str) -> Self {
        Self::of_builtin(name).unwrap_or(Self::Other)
    }

    /// The tool kinds a path rule written for `rule_tool` covers (`Read` covers reading
    /// tools, `Edit`/`Write` every editing tool); `None` when `rule_tool` is no path rule.
    pub fn path_rule_kind(rule_tool: &str) -> Option<Self> {
        match rule_tool {
            "Read" => Some(Self::Read),
            "Edit" | "Write" => Some(Self::Edit),
            _ => match Self::of_builtin(rule_tool) {
                Some(k @ (Self::Read | Self::Edit)) => Some(k),
                _ => None,
            },
        }
    }

    /// Whether path rules apply to this kind.
    pub fn has_path(self) -> bool {
        matches!(self, Self::Read | Self::Edit)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Edit => "edit",
            Self::Exec => "exec",
            Self::Network => "network",
            Self::Other => "other",
        }
    }
}

/// The path a Read or Edit kind call touches, as written: `file_path`, `notebook_path`
/// or `path` (the first present and non-empty).
pub fn input_path(input: &Value) -> Option<&str> {
    ["file_path", "notebook_path", "path"]
        .iter()
        .filter_map(|f| input.get(*f).and_then(Value::as_str))
        .find(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn built_ins_have_their_kinds_and_others_are_other() {
        assert_eq!(ToolKind::of_name("Glob"), ToolKind::Read);
        assert_eq!(ToolKind::of_name("MultiEdit"), ToolKind::Edit);
        assert_eq!(ToolKind::of_name("Bash"), ToolKind::Exec);
        assert_eq!(ToolKind::of_name("mcp__time__now"), ToolKind::Other);
    }

    #[test]
    fn path_rules_name_a_kind() {
        assert_eq!(ToolKind::path_rule_kind("Write"), Some(ToolKind::Edit));
        assert_eq!(ToolKind::path_rule_kind("Read"), Some(ToolKind::Read));
        assert_eq!(ToolKind::path_rule_kind("Bash"), None);
        assert_eq!(ToolKind::path_rule_kind("mcp__a"), None);
    }

    #[test]
    fn the_path_field_is_the_first_present() {
        assert_eq!(input_path(&json!({"file_path": "/a"})), Some("/a"));
        assert_eq!(
            input_path(&json!({"path": "/d", "pattern": "x"})),
            Some("/d")
        );
        assert_eq!(input_path(&json!({"file_path": ""})), None);
    }
}
