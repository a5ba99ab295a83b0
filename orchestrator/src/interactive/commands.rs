//! Slash commands typed at the prompt, parsed into [`Command`], and the listings they
//! show (`/rewind`'s checkpoints, `/permissions`' rules). The session loop runs them.

use std::path::Path;

use super::always::SessionRules;
use crate::checkpoints::{CheckpointError, Checkpoints};
use crate::permissions::Engine;
use crate::session::{Loaded, RecordBody};
use crate::settings::RuleList;

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Summarise the conversation now (the loop runs it).
    Compact,
    /// What fills the context window (the loop runs it).
    Context,
    /// List the checkpoints and restore the files to one.
    Rewind,
    /// List the rules with their source; remove a local one.
    Permissions,
    Trust,
    Exit,
    Help,
    Unknown(String),
}

/// The command `line` names; `None` when it is not a slash command (a prompt).
pub fn parse(line: &str) -> Option<Command> {
    let word = line.trim().strip_prefix('/')?.split_whitespace().next()?;
    Some(match word {
        "compact" => Command::Compact,
        "context" => Command::Context,
        "rewind" => Command::Rewind,
        "permissions" | "allowed-tools" => Command::Permissions,
        "trust" => Command::Trust,
        "exit" | "quit" => Command::Exit,
        "help" => Command::Help,
        other => Command::Unknown(other.to_string()),
    })
}

pub const HELP: &str = "\
/compact      summarise the conversation now, to free the context window
/context      what fills the context window
/rewind       list the checkpoints and restore the files to one of them
/permissions  list the permission rules and where they come from; remove a local one
/trust        trust this workspace's own settings, hooks and MCP servers
/exit         end the session (also Ctrl-D, or Ctrl-C twice at an empty prompt)
/help         this list
Keys: Enter sends; Up/Down recall earlier lines; Shift-Tab changes the permission mode;
Ctrl-C interrupts the running turn. A question reads one key: y (allow once),
a (allow always: a rule in .claude/settings.local.json), n (deny, then say why).";

/// One checkpoint as `/rewind` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindChoice {
    pub user_message_uuid: String,
    pub created_at: String,
    /// The prompt the checkpoint precedes (its first line).
    pub prompt: String,
}

/// The checkpoints of the session, oldest first, with their prompts.
pub fn rewind_choices(
    checkpoints: &Checkpoints,
    transcript: &Path,
) -> Result<Vec<RewindChoice>, CheckpointError> {
    let prompts = prompts_of(transcript);
    Ok(checkpoints
        .list()?
        .into_iter()
        .map(|c| RewindChoice {
            prompt: prompts
                .iter()
                .find(|(u, _)| *u == c.user_message_uuid)
                .map(|(_, p)| super::preview::one_line(p, 60))
                .unwrap_or_default(),
            user_message_uuid: c.user_message_uuid,
            created_at: c.created_at,
        })
        .collect())
}

/// The prompts of a transcript: (user message uuid, text), for user records with text.
pub fn prompts_of(transcript: &Path) -> Vec<(String, String)> {
    let Ok(loaded) = Loaded::read(transcript) else {
        return Vec::new();
    };
    loaded
        .records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::User { message } if !r.is_sidechain => {
                let text = crate::session::transcript::text_of(message);
                (!text.is_empty()).then(|| (r.uuid.clone(), text))
            }
            _ => None,
        })
        .collect()
}

/// One rule as `/permissions` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRule {
    pub list: RuleList,
    pub rule: String,
    /// The settings file, or `cli`.
    pub source: String,
    /// In the workspace's `.claude/settings.local.json` (removable here).
    pub local: bool,
    /// Added with "allow always" in this session.
    pub this_session: bool,
}

/// Every rule the session runs with, deny first, then ask, then allow.
pub fn permission_rules(engine: &Engine, session: &SessionRules, local: &Path) -> Vec<ListedRule> {
    let local = local.display().to_string();
    let cfg = engine.config();
    let mut out = Vec::new();
    for (list, rules) in [
        (RuleList::Deny, &cfg.deny),
        (RuleList::Ask, &cfg.ask),
        (RuleList::Allow, &cfg.allow),
    ] {
        out.extend(rules.iter().map(|r| ListedRule {
            list,
            rule: r.origin.rule.clone(),
            local: r.origin.source == local,
            source: r.origin.source.clone(),
            this_session: false,
        }));
    }
    for rule in session.list() {
        if !out
            .iter()
            .any(|r| r.list == RuleList::Allow && r.local && r.rule == rule)
        {
            out.push(ListedRule {
                list: RuleList::Allow,
                rule,
                source: local.clone(),
                local: true,
                this_session: true,
            });
        }
    }
    out
}

/// The listing's line for `rule`, numbered `n`.
pub fn rule_line(n: usize, rule: &ListedRule) -> String {
    let note = if rule.this_session {
        " (added this session)"
    } else {
        ""
    };
    format!(
        "{n:>3}. {:<5} {}  from {}{note}",
        rule.list.key(),
        rule.rule,
        rule.source
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::{EngineConfig, PermissionMode, Rule, ScopedRule};

    #[test]
    fn slash_commands_parse_and_prompts_do_not() {
        assert_eq!(parse("/compact"), Some(Command::Compact));
        assert_eq!(parse("  /rewind now"), Some(Command::Rewind));
        assert_eq!(parse("/quit"), Some(Command::Exit));
        assert_eq!(
            parse("/frobnicate"),
            Some(Command::Unknown("frobnicate".into()))
        );
        assert_eq!(parse("fix /etc/hosts"), None);
        assert_eq!(parse("/"), None);
    }

    #[test]
    fn rules_are_listed_with_their_source_and_local_ones_marked() {
        let local = Path::new("/w/.claude/settings.local.json");
        let mut cfg = EngineConfig::new(PermissionMode::Default, "/w");
        cfg.deny.push(ScopedRule::new(
            Rule::parse("Bash(rm *)").unwrap(),
            "/w/.claude/settings.json",
            "/w",
        ));
        cfg.allow.push(ScopedRule::new(
            Rule::parse("Read").unwrap(),
            local.display().to_string(),
            "/w",
        ));
        let engine = Engine::new(cfg);
        let session = SessionRules::default();
        session.add("Bash(make)");
        session.add("Read");
        let rules = permission_rules(&engine, &session, local);
        let shown: Vec<(RuleList, &str, bool, bool)> = rules
            .iter()
            .map(|r| (r.list, r.rule.as_str(), r.local, r.this_session))
            .collect();
        assert_eq!(
            shown,
            vec![
                (RuleList::Deny, "Bash(rm *)", false, false),
                (RuleList::Allow, "Read", true, false),
                (RuleList::Allow, "Bash(make)", true, true),
            ]
        );
        assert!(rule_line(3, &rules[2]).contains("added this session"));
    }
}
