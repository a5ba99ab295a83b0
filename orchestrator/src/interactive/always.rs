//! "Allow always": which rule a call's answer becomes, and the rules added this session.
//!
//! A rule added with `a` is written to `.claude/settings.local.json` (so later sessions
//! load it like any other) and also applies at once: before asking, the prompter decides
//! the call again with the session's rules added to the engine's. That is exactly what a
//! fresh session would decide with the rule in its settings, so deny and ask rules and the
//! mode keep their precedence: an added allow rule never widens past them.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::agent::gate::ToolCallInfo;
use crate::permissions::kind::input_path;
use crate::permissions::{Decision, Engine, Rule, ScopedRule, ToolKind};

/// Characters that would make a path a pattern (or end the rule) rather than name it.
const PATTERN_CHARS: &[char] = &['*', '?', '[', ']', '{', '}', '\\', '(', ')', '!'];

/// The allow rules added this session, with the settings file they were written to.
#[derive(Debug, Default)]
pub struct SessionRules {
    rules: Mutex<Vec<String>>,
}

impl SessionRules {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn add(&self, rule: &str) {
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        if !rules.iter().any(|r| r == rule) {
            rules.push(rule.to_string());
        }
    }

    /// Removes `rule`; whether it was one of this session's.
    pub fn remove(&self, rule: &str) -> bool {
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        let before = rules.len();
        rules.retain(|r| r != rule);
        rules.len() != before
    }

    pub fn list(&self) -> Vec<String> {
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether `call` runs without asking once this session's rules are added: the
    /// engine alone asks (so the question came from the rules, not from a hook, whose ask
    /// an allow rule does not answer) and the engine with the added rules allows.
    pub fn covers(&self, engine: &Engine, call: &ToolCallInfo, source: &Path) -> bool {
        let rules = self.list();
        if rules.is_empty() {
            return false;
        }
        let alone = engine.decide_as(&call.name, call.kind, &call.input, call.read_only);
        alone.decision == Decision::Ask
            && with_rules(engine, &rules, source)
                .decide_as(&call.name, call.kind, &call.input, call.read_only)
                .decision
                == Decision::Allow
    }
}

/// `engine` with `rules` added to its allow list (rooted at the workspace, as the rules of
/// `.claude/settings.local.json` are), in its current mode.
pub fn with_rules(engine: &Engine, rules: &[String], source: &Path) -> Engine {
    let mut cfg = engine.config().clone();
    cfg.mode = engine.mode();
    let root = cfg.cwd.clone();
    cfg.allow.extend(
        rules
            .iter()
            .filter_map(|r| Rule::parse(r).ok())
            .map(|rule| ScopedRule::new(rule, source.display().to_string(), &root)),
    );
    Engine::new(cfg)
}

/// The allow rules that let `call` run without asking, narrowest first; empty when no rule
/// can say it (then "always" is only "once"). The rules are checked: with them added the
/// engine must allow this very call.
pub fn suggest(
    engine: &Engine,
    call: &ToolCallInfo,
    workspace: &Path,
    source: &Path,
) -> Vec<String> {
    // When the rules themselves do not ask (a hook asked, or a plan awaits approval), no
    // allow rule would spare the question.
    if engine
        .decide_as(&call.name, call.kind, &call.input, call.read_only)
        .decision
        != Decision::Ask
    {
        return Vec::new();
    }
    let rules = candidates(engine, call, workspace);
    if rules.is_empty() {
        return rules;
    }
    let verdict = with_rules(engine, &rules, source).decide_as(
        &call.name,
        call.kind,
        &call.input,
        call.read_only,
    );
    if verdict.decision == Decision::Allow {
        rules
    } else {
        Vec::new()
    }
}

fn candidates(engine: &Engine, call: &ToolCallInfo, workspace: &Path) -> Vec<String> {
    let str_field = |k: &str| call.input.get(k).and_then(Value::as_str).unwrap_or("");
    match (call.kind, call.name.as_str()) {
        // Each simple command the rules ask about, exactly as written.
        (ToolKind::Exec, _) => engine
            .explain_bash(str_field("command"))
            .parts
            .into_iter()
            .filter(|(_, v)| v.decision == Decision::Ask)
            .map(|(part, _)| part)
            // `*` in a rule is a wildcard: a rule written from `ls *.log` would allow every
            // `ls`. Such a call is allowed once only.
            .filter(|part| !part.contains(['(', ')', '*']) && !part.trim().is_empty())
            .map(|part| format!("Bash({})", part.trim()))
            .collect(),
        (ToolKind::Edit, _) => {
            path_rule(Path::new(input_path(&call.input).unwrap_or("")), workspace)
                .into_iter()
                .collect()
        }
        // A plan's approval is a question of its own, never a standing rule.
        (_, "ExitPlanMode") => Vec::new(),
        (ToolKind::Network, _) if !str_field("url").is_empty() => url_host(str_field("url"))
            .map(|host| format!("{}(domain:{host})", call.name))
            .into_iter()
            .collect(),
        // Other tools (MCP tools, ...): the tool itself.
        (_, name) if !name.contains(['(', ')']) => vec![name.to_string()],
        _ => Vec::new(),
    }
}

/// `Edit(/rel)` (anchored at the project root) for a file in the workspace, `Edit(//abs)`
/// elsewhere; none for a path a pattern would misread.
fn path_rule(path: &Path, workspace: &Path) -> Option<String> {
    let text = path.to_str()?;
    if !path.is_absolute() || text.contains(PATTERN_CHARS) {
        return None;
    }
    match path.strip_prefix(workspace) {
        Ok(rel) if !rel.as_os_str().is_empty() => Some(format!("Edit(/{})", rel.to_str()?)),
        _ => Some(format!("Edit(/{text})")),
    }
}

fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?.split(':').next()?;
    let ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    ok.then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::{EngineConfig, PermissionMode};
    use serde_json::json;

    fn engine(ws: &Path) -> Engine {
        Engine::new(EngineConfig::new(PermissionMode::Default, ws))
    }

    fn call(name: &str, input: Value) -> ToolCallInfo {
        ToolCallInfo {
            tool_use_id: "t".into(),
            name: name.into(),
            input,
            read_only: false,
            kind: crate::permissions::ToolKind::of_name(name),
        }
    }

    const SOURCE: &str = "/w/.claude/settings.local.json";

    #[test]
    fn a_bash_rule_names_the_asked_parts_and_is_checked() {
        let ws = Path::new("/w");
        let e = engine(ws);
        let c = call("Bash", json!({"command": "make build && ls"}));
        let rules = suggest(&e, &c, ws, Path::new(SOURCE));
        assert_eq!(rules, vec!["Bash(make build)".to_string()]);
        // With the rule added the call no longer asks; another command still does.
        let session = SessionRules::default();
        session.add(&rules[0]);
        assert!(session.covers(&e, &c, Path::new(SOURCE)));
        let other = call("Bash", json!({"command": "make clean"}));
        assert!(!session.covers(&e, &other, Path::new(SOURCE)));
    }

    #[test]
    fn a_command_with_a_star_gets_no_rule_that_would_widen() {
        let ws = Path::new("/w");
        let c = call("Bash", json!({"command": "rm -f build/*"}));
        assert!(suggest(&engine(ws), &c, ws, Path::new(SOURCE)).is_empty());
    }

    #[test]
    fn an_edit_rule_is_anchored_at_the_project_root() {
        let ws = Path::new("/w");
        let e = engine(ws);
        let c = call(
            "Edit",
            json!({"file_path": "/w/src/a.rs", "old_string": "a", "new_string": "b"}),
        );
        assert_eq!(
            suggest(&e, &c, ws, Path::new(SOURCE)),
            vec!["Edit(/src/a.rs)"]
        );
        let odd = call(
            "Write",
            json!({"file_path": "/w/src/[x].rs", "content": ""}),
        );
        assert!(suggest(&e, &odd, ws, Path::new(SOURCE)).is_empty());
    }

    #[test]
    fn a_deny_or_ask_rule_still_wins_over_an_added_allow() {
        let ws = Path::new("/w");
        let mut cfg = EngineConfig::new(PermissionMode::Default, ws);
        cfg.ask.push(ScopedRule::new(
            Rule::parse("Bash(git push *)").unwrap(),
            "cli",
            ws,
        ));
        let e = Engine::new(cfg);
        let c = call("Bash", json!({"command": "git push origin main"}));
        // The asked part is covered by an ask rule: no allow rule can stop the question.
        assert!(suggest(&e, &c, ws, Path::new(SOURCE)).is_empty());
        let session = SessionRules::default();
        session.add("Bash(git push origin main)");
        assert!(!session.covers(&e, &c, Path::new(SOURCE)));
    }

    #[test]
    fn no_rule_when_the_rules_do_not_ask() {
        let ws = Path::new("/w");
        let e = engine(ws);
        let mut read = call("Read", json!({"file_path": "/w/a"}));
        read.read_only = true;
        assert!(suggest(&e, &read, ws, Path::new(SOURCE)).is_empty());
        let mut plan = call("ExitPlanMode", json!({"plan": "p"}));
        plan.read_only = true;
        assert!(suggest(&e, &plan, ws, Path::new(SOURCE)).is_empty());
    }

    #[test]
    fn web_fetch_rules_name_the_host() {
        assert_eq!(
            url_host("https://user@Docs.rs:443/x?y").as_deref(),
            Some("docs.rs")
        );
        assert_eq!(url_host("not a url"), None);
    }
}
