//! The client's programmatic sub-agents (`initialize`'s `agents`, the Agent SDK's
//! `AgentDefinition`) as sub-agent types: every field is applied, or the definition is
//! refused with an error naming the agent and the field, so a sub-agent never runs other
//! than its caller asked.
//!
//! Applied: `description`, `prompt`, `tools`, `disallowedTools`, `model`, `maxTurns`,
//! `effort` (a level name), `permissionMode`, `skills` (their instructions open the
//! sub-agent's first message), `mcpServers` given by name (those session servers' tools
//! join its own).
//!
//! Refused: `initialPrompt` (Claude Code uses it only for an agent run as the session's
//! main agent, which Cordon has no form of), `background: true` (Cordon's sub-agents
//! run in the foreground), a numeric `effort`, inline `mcpServers` definitions (a
//! server is configured for the session and named here), `memory` (every place Claude
//! Code keeps an agent's memory is one the sandboxed sub-agent cannot write: `~/.claude`
//! lies outside the workspace, and `.claude/` in it is protected, since what is there
//! runs in the user's next session), and fields this version does not know.
//!
//! The names in `skills` and `mcpServers` are checked against the session's by
//! [`check_names`] once those are known.

use std::collections::BTreeMap;

use serde_json::Value;

use super::protocol::AgentConfig;
use crate::agent::options::EFFORT_LEVELS;
use crate::permissions::PermissionMode;
use crate::subagents::AgentDefinition;
use crate::subagents::definition::{AgentOptions, from_client};

/// The client's definitions in name order, or why one is refused.
pub fn definitions(agents: &BTreeMap<String, AgentConfig>) -> Result<Vec<AgentDefinition>, String> {
    agents
        .iter()
        .map(|(name, a)| definition(name, a).map_err(|why| format!("agent `{name}`: {why}")))
        .collect()
}

fn definition(name: &str, a: &AgentConfig) -> Result<AgentDefinition, String> {
    if let Some(field) = a.other.keys().next() {
        return Err(format!(
            "`{field}` is not a field Cordon knows, so it cannot be applied"
        ));
    }
    let mut def = from_client(
        name,
        &a.description,
        &a.prompt,
        a.tools.as_deref(),
        a.disallowed_tools.as_deref().unwrap_or_default(),
        a.model.as_deref(),
    )
    .ok_or("not a valid type name (1-64 of letters, digits, '-' and '_')")?;
    if a.initial_prompt.is_some() {
        return Err(
            "`initialPrompt` applies to an agent run as the session's main agent \
                    (Claude Code's --agent), which Cordon does not run; a sub-agent's first \
                    turn is the Agent call's prompt"
                .into(),
        );
    }
    if let Some(scope) = &a.memory {
        return Err(memory_refusal(scope));
    }
    if a.background == Some(true) {
        return Err(
            "`background: true` is not supported: Cordon runs sub-agents in the \
                    foreground, and the Agent call returns their report"
                .into(),
        );
    }
    def.options = AgentOptions {
        max_turns: max_turns(a.max_turns)?,
        effort: effort(a.effort.as_ref())?,
        permission_mode: permission_mode(a.permission_mode.as_deref())?,
        skills: a.skills.clone().unwrap_or_default(),
        mcp_servers: mcp_servers(a.mcp_servers.as_deref().unwrap_or_default())?,
    };
    Ok(def)
}

fn max_turns(n: Option<i64>) -> Result<Option<u32>, String> {
    match n {
        None => Ok(None),
        Some(n) => match u32::try_from(n) {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!(
                "`maxTurns` {n}: expected a positive number of turns"
            )),
        },
    }
}

fn effort(effort: Option<&Value>) -> Result<Option<String>, String> {
    match effort {
        None => Ok(None),
        Some(Value::String(level)) if EFFORT_LEVELS.contains(&level.as_str()) => {
            Ok(Some(level.clone()))
        }
        Some(other) => Err(format!(
            "`effort` {other}: Cordon applies the API's levels only ({})",
            EFFORT_LEVELS.join(", ")
        )),
    }
}

fn permission_mode(mode: Option<&str>) -> Result<Option<PermissionMode>, String> {
    mode.map(|m| {
        <PermissionMode as clap::ValueEnum>::from_str(m, false)
            .map_err(|_| format!("`permissionMode` {m:?} is not a permission mode"))
    })
    .transpose()
}

fn mcp_servers(entries: &[Value]) -> Result<Vec<String>, String> {
    entries
        .iter()
        .map(|entry| match entry {
            Value::String(name) => Ok(name.clone()),
            _ => Err(format!(
                "`mcpServers` entry {entry}: inline server definitions are not supported; \
                 configure the server for the session (mcp_servers) and name it here"
            )),
        })
        .collect()
}

fn memory_refusal(scope: &str) -> String {
    let place = match scope {
        "user" => "~/.claude/agent-memory/, outside the workspace",
        "project" => ".claude/agent-memory/, in the workspace's protected .claude/",
        "local" => ".claude/agent-memory-local/, in the workspace's protected .claude/",
        other => return format!("`memory` {other:?} is not a memory scope"),
    };
    format!(
        "`memory: {scope:?}` keeps the agent's notes in {place}, which a sandboxed \
         sub-agent cannot write"
    )
}

/// Checks that the skills and MCP servers the definitions name exist in the session.
pub fn check_names(
    defs: &[AgentDefinition],
    skills: &[&str],
    servers: &[&str],
) -> Result<(), String> {
    for def in defs {
        if let Some(missing) = def
            .options
            .skills
            .iter()
            .find(|s| !skills.contains(&s.as_str()))
        {
            return Err(format!(
                "agent `{}`: there is no skill `{missing}` in this session",
                def.name
            ));
        }
        if let Some(missing) = def
            .options
            .mcp_servers
            .iter()
            .find(|s| !servers.contains(&s.as_str()))
        {
            return Err(format!(
                "agent `{}`: there is no MCP server `{missing}` in this session",
                def.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agents(value: Value) -> BTreeMap<String, AgentConfig> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn every_applied_field_reaches_the_definition() {
        let defs = definitions(&agents(json!({"reviewer": {
            "description": "Reviews", "prompt": "You review.", "tools": ["Read"],
            "maxTurns": 4, "effort": "low", "permissionMode": "acceptEdits",
            "skills": ["style"], "mcpServers": ["calc"]
        }})))
        .unwrap();
        let o = &defs[0].options;
        assert_eq!(o.max_turns, Some(4));
        assert_eq!(o.effort.as_deref(), Some("low"));
        assert_eq!(o.permission_mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(o.skills, ["style"]);
        assert_eq!(o.mcp_servers, ["calc"]);
        assert!(check_names(&defs, &["style"], &["calc"]).is_ok());
        let err = check_names(&defs, &[], &["calc"]).unwrap_err();
        assert!(err.contains("reviewer") && err.contains("style"), "{err}");
        let err = check_names(&defs, &["style"], &[]).unwrap_err();
        assert!(err.contains("calc"), "{err}");
    }

    #[test]
    fn what_cannot_be_applied_is_refused_by_name() {
        for (field, value, says) in [
            ("initialPrompt", json!("go"), "initialPrompt"),
            ("background", json!(true), "background"),
            ("effort", json!(3), "effort"),
            ("effort", json!("extreme"), "effort"),
            ("maxTurns", json!(0), "maxTurns"),
            ("permissionMode", json!("yolo"), "permissionMode"),
            ("mcpServers", json!([{"x": {"command": "y"}}]), "inline"),
            ("memory", json!("user"), "outside"),
            ("memory", json!("project"), "protected"),
            ("isolation", json!("worktree"), "isolation"),
        ] {
            let mut def = json!({"description": "d", "prompt": "p"});
            def[field] = value;
            let err = definitions(&agents(json!({ "a": def }))).unwrap_err();
            assert!(
                err.contains("agent `a`") && err.contains(says),
                "{field}: {err}"
            );
        }
        assert!(definitions(&agents(json!({"a b": {"prompt": "p"}}))).is_err());
        let fine = json!({"a": {"description": "d", "prompt": "p", "background": false}});
        assert!(definitions(&agents(fine)).is_ok());
    }
}
