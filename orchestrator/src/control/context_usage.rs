//! The `get_context_usage` answer, in the shape of the SDK's `ContextUsageResponse`: what
//! occupies the context window by category (with a display colour each), the total
//! against the window, the model, and the MCP tools and sub-agent types that take room.
//!
//! Sizes are [`crate::agent::ContextReport`]'s estimates (characters / 4); the total is
//! the last call's measured input when that is larger. `memoryFiles` lists each CLAUDE.md
//! file read, as Claude Code does (`path`, `type` User|Project|Local, `tokens`); Cordon
//! draws no grid (`gridRows` is empty).

use serde_json::{Value, json};

use crate::agent::ContextReport;
use crate::agent::compact::CHARS_PER_TOKEN;
use crate::mcp::McpSet;
use crate::subagents::{AgentDefinition, Scope};

/// Colours Claude Code's `/context` uses for its categories, by position.
const COLORS: [&str; 8] = [
    "promptBorder",
    "inactive",
    "claude",
    "permission",
    "success",
    "warning",
    "purple_FOR_SUBAGENTS_ONLY",
    "cyan_FOR_SUBAGENTS_ONLY",
];

/// The answer for `report`; `model_override` is the client's `set_model` choice.
pub fn answer(
    report: &ContextReport,
    model_override: Option<&str>,
    mcp: Option<&McpSet>,
    agents: &[AgentDefinition],
) -> Value {
    let estimated: u64 = report.categories.iter().map(|(_, n)| n).sum();
    let total = estimated.max(report.measured_tokens);
    let window = report.context_window.max(1);
    let mut categories: Vec<Value> = report
        .categories
        .iter()
        .enumerate()
        .map(|(i, (name, tokens))| {
            json!({"name": name, "tokens": tokens, "color": COLORS[i % COLORS.len()]})
        })
        .collect();
    categories.push(json!({
        "name": "free space",
        "tokens": window.saturating_sub(total),
        "color": "promptBorder",
    }));
    json!({
        "categories": categories,
        "totalTokens": total,
        "maxTokens": report.context_window,
        "rawMaxTokens": report.context_window,
        "percentage": total as f64 * 100.0 / window as f64,
        "model": model_override.unwrap_or(&report.model),
        "isAutoCompactEnabled": true,
        "memoryFiles": report.memory_files.iter().map(|m| json!({
            "path": m.path.display().to_string(),
            "type": m.kind,
            "tokens": m.tokens,
        })).collect::<Vec<_>>(),
        "mcpTools": mcp.map(McpSet::tool_sizes).unwrap_or_default(),
        "agents": agents.iter().map(agent_entry).collect::<Vec<_>>(),
        "gridRows": [],
        "measuredTokens": report.measured_tokens,
    })
}

fn agent_entry(def: &AgentDefinition) -> Value {
    let source = match def.scope {
        Scope::Project => "projectSettings",
        Scope::User => "userSettings",
        Scope::Client => "flagSettings",
        Scope::Plugin => "plugin",
    };
    let chars = def.name.len() + def.description.len();
    json!({
        "agentType": def.name,
        "source": source,
        "tokens": chars as u64 / CHARS_PER_TOKEN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_has_the_fields_the_sdk_type_names() {
        let report = ContextReport {
            model: "claude-default".into(),
            context_window: 1000,
            measured_tokens: 150,
            categories: vec![("system prompt".into(), 100), ("user messages".into(), 20)],
            memory_files: vec![crate::agent::prompt::LoadedMemory {
                path: "/w/CLAUDE.md".into(),
                kind: "Project",
                tokens: 12,
            }],
        };
        let agents = vec![
            crate::subagents::definition::from_client(
                "reviewer",
                "Reviews code",
                "p",
                None,
                &[],
                None,
            )
            .unwrap(),
        ];
        let a = answer(&report, Some("claude-chosen"), None, &agents);
        for field in [
            "categories",
            "totalTokens",
            "maxTokens",
            "rawMaxTokens",
            "percentage",
            "model",
            "isAutoCompactEnabled",
            "memoryFiles",
            "mcpTools",
            "agents",
            "gridRows",
        ] {
            assert!(a.get(field).is_some(), "{field} missing: {a}");
        }
        assert_eq!(
            a["totalTokens"], 150,
            "the measured input wins over the estimate"
        );
        assert_eq!(a["percentage"], 15.0);
        assert_eq!(a["model"], "claude-chosen");
        assert_eq!(a["categories"][0]["name"], "system prompt");
        assert!(a["categories"][0]["color"].is_string());
        assert_eq!(
            a["categories"][2],
            json!({"name": "free space", "tokens": 850, "color": "promptBorder"})
        );
        assert_eq!(
            a["memoryFiles"],
            json!([{"path": "/w/CLAUDE.md", "type": "Project", "tokens": 12}])
        );
        assert_eq!(a["agents"][0]["agentType"], "reviewer");
        assert_eq!(a["agents"][0]["source"], "flagSettings");
        assert_eq!(answer(&report, None, None, &[])["model"], "claude-default");
    }
}
