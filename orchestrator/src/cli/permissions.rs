//! `cordon permissions explain TOOL 'INPUT-JSON'`: what the permission rules decide about
//! one call, which rule decided and from which file, and for Bash each part of the command.
//! Exit code: 0 allow, 1 deny, 3 ask.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use cordon::permissions::{Decision, Engine, PermissionMode, Verdict};
use cordon::settings::{CliSettings, Settings, SettingsArg};

#[derive(Debug, Args)]
pub struct PermissionsArgs {
    #[command(subcommand)]
    command: PermissionsCommand,
}

#[derive(Debug, Subcommand)]
enum PermissionsCommand {
    /// Explain the decision on one tool call.
    Explain(ExplainArgs),
}

#[derive(Debug, Args)]
struct ExplainArgs {
    /// The tool, e.g. Bash, Read, Edit, WebFetch, mcp__server__tool.
    tool: String,
    /// The tool input as JSON, e.g. '{"command": "npm test"}'.
    input: String,
    /// The project directory (default: the current directory).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// A settings file or inline JSON, as `cordon run --settings` takes it.
    #[arg(long)]
    settings: Option<String>,
    /// Explain as in a run with `--trust` (the workspace's own settings count in full).
    #[arg(long)]
    trust: bool,
    #[arg(long, value_enum)]
    permission_mode: Option<PermissionMode>,
    #[arg(long = "allowedTools", alias = "allowed-tools", num_args = 1..)]
    allowed_tools: Vec<String>,
    #[arg(long = "disallowedTools", alias = "disallowed-tools", num_args = 1..)]
    disallowed_tools: Vec<String>,
}

/// Exit code when the call would be asked about.
pub const EXIT_ASK: u8 = 3;

pub fn main(args: PermissionsArgs) -> ExitCode {
    let PermissionsCommand::Explain(args) = args.command;
    match explain(&args) {
        Ok((text, decision)) => {
            print!("{text}");
            ExitCode::from(match decision {
                Decision::Allow => 0,
                Decision::Deny => 1,
                Decision::Ask => EXIT_ASK,
            })
        }
        Err(e) => {
            eprintln!("cordon: {e:#}");
            ExitCode::from(super::EXIT_USAGE)
        }
    }
}

fn explain(args: &ExplainArgs) -> anyhow::Result<(String, Decision)> {
    use anyhow::Context;
    let workspace = super::workspace_or_cwd(args.workspace.as_deref())?;
    let input: serde_json::Value =
        serde_json::from_str(&args.input).context("the input is not valid JSON")?;
    let settings = Settings::load(
        &workspace,
        CliSettings {
            settings: args.settings.as_deref().map(SettingsArg::parse),
            trust: args.trust,
            allowed_tools: args.allowed_tools.clone(),
            disallowed_tools: args.disallowed_tools.clone(),
            permission_mode: args.permission_mode,
            model: None,
            ..CliSettings::default()
        },
    )
    .context("loading the settings")?;
    let engine = Engine::new(settings.engine_config(&workspace));
    Ok(render(&engine, &args.tool, &input, &settings))
}

/// The explanation text and the decision.
pub fn render(
    engine: &Engine,
    tool: &str,
    input: &serde_json::Value,
    settings: &Settings,
) -> (String, Decision) {
    let mut out = String::new();
    let read_only = matches!(
        tool,
        "Read" | "Glob" | "Grep" | "LS" | "NotebookRead" | "ExitPlanMode" | "TodoWrite"
    );
    let verdict = engine.decide(tool, input, read_only);
    let _ = writeln!(out, "decision: {}", verdict.decision.as_str());
    let _ = writeln!(out, "reason: {}", verdict.reason);
    let _ = writeln!(out, "{}", rule_line(&verdict));
    let _ = writeln!(out, "mode: {}", engine.mode().as_str());
    if !engine.offers(tool) {
        let _ = writeln!(
            out,
            "offered: no (a bare-name deny rule removes {tool} from the model's tools)"
        );
    }
    if tool == "Bash" {
        let command = input.get("command").and_then(|c| c.as_str()).unwrap_or("");
        let e = engine.explain_bash(command);
        if let Some(why) = &e.unparseable {
            let _ = writeln!(out, "parts: none (cannot parse: {why})");
        } else {
            let _ = writeln!(out, "parts:");
            for (i, (text, v)) in e.parts.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "  {}. {text}\n     -> {}: {}",
                    i + 1,
                    v.decision.as_str(),
                    v.reason
                );
            }
        }
    }
    for w in settings.warnings() {
        let _ = writeln!(out, "warning: {w}");
    }
    if let Some(notice) = settings.untrusted_notice() {
        let _ = writeln!(out, "{notice}");
    }
    (out, verdict.decision)
}

fn rule_line(v: &Verdict) -> String {
    match &v.rule {
        Some(origin) => format!("rule: {} (from {})", origin.rule, origin.source),
        None => "rule: none (the permission mode or a built-in check decided)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn explains_bash_parts_and_the_rule_file() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join(".claude")).unwrap();
        std::fs::write(
            ws.join(".claude/settings.json"),
            r#"{"permissions": {"allow": ["Bash(npm test *)"], "deny": ["Bash(curl *)"]},
                "sandbox": {"autoAllowBashIfSandboxed": false}}"#,
        )
        .unwrap();
        let sources = cordon::settings::SettingsSources {
            managed: ws.join("no-managed.json"),
            user: None,
            home: None,
            trust_store: None,
        };
        let trusted = CliSettings {
            trust: true,
            ..CliSettings::default()
        };
        let settings = Settings::load_from(&ws, trusted, &sources).unwrap();
        let engine = Engine::new(settings.engine_config(&ws));
        let (text, d) = render(
            &engine,
            "Bash",
            &json!({"command": "npm test && curl x"}),
            &settings,
        );
        assert_eq!(d, Decision::Deny);
        assert!(text.contains("decision: deny"), "{text}");
        assert!(
            text.contains(&format!(
                "rule: Bash(curl *) (from {})",
                ws.join(".claude/settings.json").display()
            )),
            "{text}"
        );
        assert!(text.contains("1. npm test\n     -> allow"), "{text}");
        assert!(text.contains("2. curl x\n     -> deny"), "{text}");
        let (_, d) = render(&engine, "Bash", &json!({"command": "rm x"}), &settings);
        assert_eq!(d, Decision::Ask);
        // Untrusted, the allow rule is ignored and said so; the deny rule holds.
        let settings = Settings::load_from(&ws, CliSettings::default(), &sources).unwrap();
        let engine = Engine::new(settings.engine_config(&ws));
        let (text, d) = render(&engine, "Bash", &json!({"command": "curl x"}), &settings);
        assert_eq!(d, Decision::Deny);
        assert!(text.contains("permissions.allow"), "{text}");
        assert!(text.contains("is not trusted"), "{text}");
    }
}
