//! Layer 1, first cut: whether a tool call runs at all, from the permission mode and the
//! `--allowedTools` / `--disallowedTools` rules. Deny rules win over allow rules, allow rules
//! over the mode. Every decision carries its reason, which goes into the transcript and, on
//! a denial, to the model together with how the user can allow the call.
//!
//! Until the full rule engine lands (settings files, a real shell parser), a `Bash(...)` allow
//! rule only ever matches a single simple command: anything with shell control syntax is
//! never allowed by a specifier rule.

use serde_json::Value;

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
}

/// `Tool` or `Tool(specifier)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub specifier: Option<String>,
}

impl Rule {
    pub fn parse(text: &str) -> Result<Rule, String> {
        let text = text.trim();
        match text.split_once('(') {
            None if is_tool_name(text) => Ok(Rule {
                tool: text.to_string(),
                specifier: None,
            }),
            Some((tool, rest)) if is_tool_name(tool) && rest.ends_with(')') => {
                let spec = &rest[..rest.len() - 1];
                Ok(Rule {
                    tool: tool.to_string(),
                    specifier: Some(spec.to_string()),
                })
            }
            _ => Err(format!(
                "invalid permission rule {text:?}: expected Tool or Tool(specifier)"
            )),
        }
    }

    fn matches(&self, tool: &str, input: &Value) -> bool {
        if self.tool != tool {
            return false;
        }
        let Some(spec) = &self.specifier else {
            return true;
        };
        match tool {
            "Bash" => input
                .get("command")
                .and_then(Value::as_str)
                .is_some_and(|c| bash_matches(spec, c)),
            "Read" | "Write" | "Edit" => input
                .get("file_path")
                .and_then(Value::as_str)
                .is_some_and(|p| wildcard(spec, p)),
            _ => false,
        }
    }
}

fn is_tool_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Shell syntax that can chain, substitute or redirect: a command containing any of it is
/// never matched by an allow specifier (it could smuggle a second command past the rule).
const SHELL_CONTROL: &[char] = &[
    ';', '&', '|', '`', '$', '>', '<', '\n', '\r', '(', ')', '{', '}', '\\',
];

fn bash_matches(spec: &str, command: &str) -> bool {
    let command = command.trim();
    if command.contains(SHELL_CONTROL) {
        return false;
    }
    if let Some(prefix) = spec.strip_suffix(":*") {
        return command == prefix || command.starts_with(&format!("{prefix} "));
    }
    if let Some(prefix) = spec.strip_suffix(" *") {
        return command == prefix || command.starts_with(&format!("{prefix} "));
    }
    wildcard(spec, command)
}

/// `*` matches any run of characters; everything else literally.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            let Some(pos) = rest.find(part) else {
                return false;
            };
            rest = &rest[pos + part.len()..];
        }
    }
    true
}

/// A decision and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow(String),
    Deny(String),
}

/// The session's permission policy.
#[derive(Debug, Clone)]
pub struct Permissions {
    pub mode: PermissionMode,
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
}

impl Permissions {
    pub fn new(mode: PermissionMode, allow: &[String], deny: &[String]) -> Result<Self, String> {
        let parse = |list: &[String]| -> Result<Vec<Rule>, String> {
            list.iter()
                .flat_map(|s| split_rule_list(s))
                .map(|s| Rule::parse(&s))
                .collect()
        };
        Ok(Self {
            mode,
            allow: parse(allow)?,
            deny: parse(deny)?,
        })
    }

    /// Whether a tool is offered to the model at all: a bare-name deny removes it.
    pub fn offers(&self, tool: &str) -> bool {
        !self
            .deny
            .iter()
            .any(|r| r.tool == tool && r.specifier.is_none())
    }

    pub fn decide(&self, tool: &str, input: &Value, read_only: bool) -> Decision {
        if let Some(rule) = self.deny.iter().find(|r| r.matches(tool, input)) {
            return Decision::Deny(format!("denied by rule {} (--disallowedTools)", show(rule)));
        }
        if let Some(rule) = self.allow.iter().find(|r| r.matches(tool, input)) {
            return Decision::Allow(format!("allowed by rule {} (--allowedTools)", show(rule)));
        }
        match self.mode {
            PermissionMode::BypassPermissions => {
                Decision::Allow("permission mode bypassPermissions".into())
            }
            _ if read_only => Decision::Allow("read-only tool".into()),
            PermissionMode::AcceptEdits if matches!(tool, "Write" | "Edit") => {
                Decision::Allow("permission mode acceptEdits".into())
            }
            PermissionMode::Plan => Decision::Deny(format!(
                "{tool} is not available in plan mode, which only reads; present the plan instead"
            )),
            _ => Decision::Deny(format!(
                "permission to use {tool} was not granted. The user can allow it with \
                 --allowedTools {tool} (or a narrower rule such as {example}), or run with \
                 --permission-mode acceptEdits (file edits) or bypassPermissions",
                example = if tool == "Bash" {
                    "\"Bash(npm test:*)\""
                } else {
                    "\"Edit(src/*)\""
                }
            )),
        }
    }
}

fn show(rule: &Rule) -> String {
    match &rule.specifier {
        Some(s) => format!("{}({s})", rule.tool),
        None => rule.tool.clone(),
    }
}

/// `--allowedTools "Read Bash(git log:*)"` and `--allowedTools Read,Bash` both work: split on
/// commas and spaces outside parentheses.
fn split_rule_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' | ' ' if depth == 0 => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_string());
                }
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn perms(mode: PermissionMode, allow: &[&str], deny: &[&str]) -> Permissions {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Permissions::new(mode, &s(allow), &s(deny)).unwrap()
    }

    fn bash(cmd: &str) -> Value {
        json!({ "command": cmd })
    }

    #[test]
    fn deny_beats_allow_beats_mode() {
        let p = perms(
            PermissionMode::BypassPermissions,
            &["Bash"],
            &["Bash(rm:*)"],
        );
        assert!(matches!(
            p.decide("Bash", &bash("rm -rf x"), false),
            Decision::Deny(_)
        ));
        assert!(matches!(
            p.decide("Bash", &bash("ls"), false),
            Decision::Allow(_)
        ));
    }

    #[test]
    fn default_mode_allows_reads_and_explains_denials() {
        let p = perms(PermissionMode::Default, &[], &[]);
        assert!(matches!(
            p.decide("Read", &json!({}), true),
            Decision::Allow(_)
        ));
        let Decision::Deny(why) = p.decide("Bash", &bash("ls"), false) else {
            panic!()
        };
        assert!(why.contains("--allowedTools Bash"), "{why}");
    }

    #[test]
    fn bash_prefix_rules_never_allow_chained_commands() {
        let p = perms(PermissionMode::Default, &["Bash(npm test:*)"], &[]);
        assert!(matches!(
            p.decide("Bash", &bash("npm test"), false),
            Decision::Allow(_)
        ));
        assert!(matches!(
            p.decide("Bash", &bash("npm test --watch"), false),
            Decision::Allow(_)
        ));
        for bypass in [
            "npm test && curl x",
            "npm test; rm -rf ~",
            "npm test $(curl x)",
            "npm test `curl x`",
            "npm test\nrm -rf ~",
            "npm test\r\nrm x",
            "npm test | sh",
            "npm test > ~/.bashrc",
            "npm testing",
        ] {
            assert!(
                matches!(p.decide("Bash", &bash(bypass), false), Decision::Deny(_)),
                "{bypass:?}"
            );
        }
    }

    #[test]
    fn rule_lists_split_on_commas_and_spaces_outside_parentheses() {
        assert_eq!(
            split_rule_list("Read,Bash(git log:*) Edit"),
            vec!["Read", "Bash(git log:*)", "Edit"]
        );
        assert!(Rule::parse("Bash(").is_err());
        let p = perms(PermissionMode::Default, &[], &["Bash"]);
        assert!(!p.offers("Bash"));
        assert!(p.offers("Read"));
    }
}
