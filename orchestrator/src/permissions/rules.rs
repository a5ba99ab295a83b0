//! The rule grammar: `Tool` or `Tool(specifier)`.
//!
//! - `Bash(npm test)`, `Bash(npm test *)`, `Bash(npm test:*)`, `Bash(git * main)`
//! - `Read(./.env)`, `Edit(/src/**)`, `Read(~/.ssh/**)`, `Read(//etc/passwd)`
//! - `WebFetch(domain:example.com)`
//! - `mcp__server`, `mcp__server__*`, `mcp__server__tool`
//!
//! A rule list given on the command line (`--allowedTools "Read Bash(git log:*)"`) is split
//! on commas and spaces outside parentheses by [`split_rule_list`].

use std::fmt;

/// `Tool` or `Tool(specifier)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub specifier: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid permission rule {text:?}: {problem}")]
pub struct RuleError {
    pub text: String,
    pub problem: String,
}

impl Rule {
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let text = text.trim();
        let bad = |problem: &str| RuleError {
            text: text.to_string(),
            problem: problem.to_string(),
        };
        let (tool, specifier) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => {
                let Some(spec) = rest.strip_suffix(')') else {
                    return Err(bad("expected Tool or Tool(specifier)"));
                };
                (tool, Some(spec.to_string()))
            }
        };
        if !is_tool_name(tool) {
            return Err(bad("expected Tool or Tool(specifier)"));
        }
        if let Some(spec) = &specifier {
            if spec.trim().is_empty() {
                return Err(bad("an empty specifier; write the bare tool name instead"));
            }
            if tool.starts_with("mcp__") {
                return Err(bad("mcp rules take no specifier: use mcp__server__tool"));
            }
        }
        // `mcp__server__*` is the same as `mcp__server`.
        let tool = tool.strip_suffix("__*").unwrap_or(tool);
        Ok(Rule {
            tool: tool.to_string(),
            specifier,
        })
    }

    /// Whether this rule names `tool` (ignoring the specifier). `mcp__server` names every
    /// tool of that server.
    pub fn names_tool(&self, tool: &str) -> bool {
        if self.tool == tool {
            return true;
        }
        self.tool.starts_with("mcp__")
            && self.tool.matches("__").count() == 1
            && tool
                .strip_prefix(self.tool.as_str())
                .is_some_and(|rest| rest.starts_with("__") && rest.len() > 2)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.specifier {
            Some(s) => write!(f, "{}({s})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

fn is_tool_name(s: &str) -> bool {
    let body = s.strip_suffix("__*").unwrap_or(s);
    !body.is_empty()
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `--allowedTools "Read Bash(git log:*)"` and `--allowedTools Read,Bash` both work: split on
/// commas and spaces outside parentheses.
pub fn split_rule_list(s: &str) -> Vec<String> {
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

/// `*` matches any run of characters (also none); everything else literally.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    wildcard_chars(&p, &t)
}

/// Iterative matcher with backtracking to the last `*` (linear in practice, no recursion).
pub(crate) fn wildcard_chars(p: &[char], t: &[char]) -> bool {
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rules() {
        assert_eq!(
            Rule::parse("Bash(npm test:*)").unwrap(),
            Rule {
                tool: "Bash".into(),
                specifier: Some("npm test:*".into())
            }
        );
        assert_eq!(Rule::parse("Read").unwrap().specifier, None);
        assert_eq!(Rule::parse("mcp__github__*").unwrap().tool, "mcp__github");
        for bad in ["Bash(", "Bash()", "", "Ba sh", "mcp__x(y)", "(x)"] {
            assert!(Rule::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            Rule::parse("Bash(echo (x))").unwrap().specifier.as_deref(),
            Some("echo (x)")
        );
    }

    #[test]
    fn mcp_server_rules_name_every_tool_of_the_server() {
        let server = Rule::parse("mcp__github").unwrap();
        assert!(server.names_tool("mcp__github__create_issue"));
        assert!(server.names_tool("mcp__github"));
        assert!(!server.names_tool("mcp__githubx__a"));
        assert!(!server.names_tool("mcp__other__a"));
        let tool = Rule::parse("mcp__github__create_issue").unwrap();
        assert!(tool.names_tool("mcp__github__create_issue"));
        assert!(!tool.names_tool("mcp__github__create_issue_x"));
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("a*c", "abbbc"));
        assert!(wildcard("*", ""));
        assert!(wildcard("a*b*c", "a_b_b_c"));
        assert!(!wildcard("a*c", "abcd"));
        assert!(!wildcard("abc", "abcd"));
    }

    #[test]
    fn rule_lists_split_on_commas_and_spaces_outside_parentheses() {
        assert_eq!(
            split_rule_list("Read,Bash(git log:*) Edit"),
            vec!["Read", "Bash(git log:*)", "Edit"]
        );
    }
}
