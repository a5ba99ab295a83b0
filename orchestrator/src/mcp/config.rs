//! Which MCP servers a session gets, and how to reach each: Claude Code's shapes, from
//! the settings' `mcpServers` (managed, `--settings`, user; the workspace's own settings
//! once it is trusted) and the workspace's `.mcp.json`.
//!
//! `.mcp.json` lists programs the repository chose. Its servers start only when the
//! workspace is trusted, or when settings the repository does not control approve them
//! (`enableAllProjectMcpServers`, `enabledMcpjsonServers`; an untrusted workspace's own
//! settings cannot, see `policies/untrusted-settings.json`). `disabledMcpjsonServers`
//! and the managed `deniedMcpServers` (`[{"serverName": ...}]`) always win.
//!
//! Entries: `{command, args?, env?}` (stdio, run inside the sandbox) or `{type: "http",
//! url, headers?}` (Streamable HTTP, reached from the orchestrator). `type: "sse"` (the
//! legacy transport) is refused with a message saying so. Strings expand `${VAR}` and
//! `${VAR:-default}` from Cordon's environment plus `CLAUDE_PROJECT_DIR` (the workspace).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::expand::expand;
use crate::settings::{Settings, Source};

/// How a refusal for unset variables starts.
const MISSING_VARS: &str = "missing environment variables: ";

/// The workspace's server list, relative to it.
pub const MCP_JSON: &str = ".mcp.json";

/// How to reach one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A program inside the sandbox speaking JSON-RPC on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// A server inside the Agent SDK client's process, reached through the control
    /// protocol (see [`super::sdk`]).
    Sdk,
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The name in the configuration (tools are `mcp__<name>__<tool>`).
    pub name: String,
    /// Where it was configured: `project` for `.mcp.json`, else the settings' source.
    pub scope: &'static str,
    pub transport: Transport,
}

/// A server that is configured but will not be started, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub name: String,
    pub scope: &'static str,
    pub why: String,
}

/// The session's servers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    pub servers: Vec<ServerConfig>,
    pub refused: Vec<Refused>,
}

/// What approves or refuses `.mcp.json` servers, merged from the settings files.
#[derive(Debug, Default)]
struct Approval {
    all: bool,
    enabled: Vec<String>,
    disabled: Vec<String>,
    denied: Vec<String>,
}

impl Approval {
    fn from_settings(settings: &Settings) -> Self {
        let mut a = Approval::default();
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        // Files are already restricted: an untrusted workspace's own files carry no
        // approval keys (the untrusted-settings policy drops them).
        for f in settings.files() {
            let v = &f.value;
            a.all |= v.get("enableAllProjectMcpServers").and_then(Value::as_bool) == Some(true);
            a.enabled.extend(strings(v.get("enabledMcpjsonServers")));
            a.disabled.extend(strings(v.get("disabledMcpjsonServers")));
            if f.source == Source::Managed {
                let denied = v.get("deniedMcpServers").and_then(Value::as_array);
                a.denied.extend(
                    denied
                        .into_iter()
                        .flatten()
                        .filter_map(|d| d.get("serverName").and_then(Value::as_str))
                        .map(str::to_string),
                );
            }
        }
        a
    }
}

/// Looks a variable up for an entry of one scope (`managed`, `user`, `cli`, `project`,
/// `plugin`, ...): `env(scope, name)`.
pub type ScopedEnv<'a> = dyn Fn(&str, &str) -> Option<String> + 'a;

/// The servers for a session in `workspace`, with `env` looking up variables for
/// expansion by the scope of the entry (Cordon's environment, as far as that scope may
/// read it; `CLAUDE_PROJECT_DIR` is added here).
pub fn load(settings: &Settings, workspace: &Path, env: &ScopedEnv) -> McpConfig {
    let project_dir = workspace.display().to_string();
    let lookup_in = |scope: &'static str| {
        let project_dir = project_dir.clone();
        move |name: &str| {
            if name == "CLAUDE_PROJECT_DIR" {
                Some(project_dir.clone())
            } else {
                env(scope, name)
            }
        }
    };
    let approval = Approval::from_settings(settings);
    let mut out = McpConfig::default();
    // `--strict-mcp-config`: the command line's own servers (its flags layer) alone.
    let strict = settings.strict_mcp_config;
    for f in settings.files() {
        if strict && !(f.source == Source::Cli && f.origin == "cli") {
            continue;
        }
        if let Some(map) = f.value.get("mcpServers").and_then(Value::as_object) {
            let lookup = lookup_in(f.source.as_str());
            for (name, entry) in map {
                add(&mut out, name, f.source.as_str(), entry, &lookup, &approval);
            }
        }
    }
    let project_wanted = settings
        .setting_sources
        .as_ref()
        .is_none_or(|only| only.contains(&Source::Project));
    if strict || !project_wanted {
        return out;
    }
    let mut warnings = Vec::new();
    let text =
        crate::settings::repository_file(workspace, &workspace.join(MCP_JSON), &mut warnings);
    for w in warnings {
        tracing::warn!("mcp: {w}");
    }
    let project = match text {
        Ok(Some(text)) if !text.trim().is_empty() => serde_json::from_str::<Value>(&text)
            .map_err(|e| format!("{MCP_JSON}: invalid JSON: {e}")),
        Ok(_) => Ok(Value::Null),
        Err(e) => Err(e.to_string()),
    };
    match project {
        Ok(v) => {
            let trusted = settings.trust().is_trusted();
            for (name, entry) in v
                .get("mcpServers")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                if !(trusted || approval.all || approval.enabled.iter().any(|n| n == name)) {
                    out.refused.push(Refused {
                        name: name.clone(),
                        scope: "project",
                        why: format!(
                            "{MCP_JSON} servers run only in a trusted workspace (`cordon trust`) \
                             or when approved in the user's settings (enabledMcpjsonServers)"
                        ),
                    });
                    continue;
                }
                if trusted {
                    add(
                        &mut out,
                        name,
                        "project",
                        entry,
                        &lookup_in("project"),
                        &approval,
                    );
                } else {
                    add_approved_by_name(&mut out, name, entry, &project_dir, &approval);
                }
            }
        }
        Err(why) => tracing::warn!("mcp: {why}"),
    }
    out
}

/// Adds a `.mcp.json` entry of an untrusted workspace that the user's or the managed
/// settings approved by name (`enabledMcpjsonServers`, `enableAllProjectMcpServers`).
///
/// Why it reads nothing of Cordon's environment: the approval names a server, but the
/// entry's text is still the repository's, and any repository may call its server by a
/// name the user approved for another one (`github`). Expanded, `"env": {"X":
/// "${AWS_SECRET_ACCESS_KEY}"}` would hand a host secret to a program the repository
/// chose, inside the session, and so to the model. Only `CLAUDE_PROJECT_DIR` and an
/// entry's own defaults expand; a reference to anything else refuses the server, naming
/// the variables and the two ways to allow it (trust the workspace, or configure the
/// server in settings the repository does not write).
fn add_approved_by_name(
    out: &mut McpConfig,
    name: &str,
    entry: &Value,
    project_dir: &str,
    approval: &Approval,
) {
    let asked = std::cell::RefCell::new(Vec::<String>::new());
    let lookup = |var: &str| {
        if var == "CLAUDE_PROJECT_DIR" {
            return Some(project_dir.to_string());
        }
        asked.borrow_mut().push(var.to_string());
        None
    };
    add(out, name, "project", entry, &lookup, approval);
    let asked = asked.into_inner();
    if let Some(refused) = out
        .refused
        .last_mut()
        .filter(|r| r.name == name && r.scope == "project" && !asked.is_empty())
        && refused.why.starts_with(MISSING_VARS)
    {
        let mut vars: Vec<String> = asked.iter().map(|v| format!("${{{v}}}")).collect();
        vars.sort();
        vars.dedup();
        refused.why = format!(
            "it reads {} from Cordon's environment, and a {MCP_JSON} server of an untrusted \
             workspace, approved by name only, may not (the repository wrote the entry); \
             trust the workspace (`cordon trust`) or configure the server in your own \
             settings' mcpServers",
            vars.join(", ")
        );
    }
}

/// Adds the servers of `plugins` (named `plugin:<plugin>:<server>`, scope `plugin`), each
/// expanded with its plugin's directory as `CLAUDE_PLUGIN_ROOT` beside `env` and
/// `CLAUDE_PROJECT_DIR`. A plugin is the user's choice, so its servers count as the
/// user's settings' do: the managed `deniedMcpServers` refuses them by name, a name the
/// settings already configured keeps its settings' entry, and `--strict-mcp-config`
/// (the command line's servers alone) leaves them out.
pub fn add_plugin_servers(
    out: &mut McpConfig,
    settings: &Settings,
    workspace: &Path,
    plugins: &[crate::plugins::Plugin],
    env: &ScopedEnv,
) {
    if settings.strict_mcp_config {
        return;
    }
    let approval = Approval::from_settings(settings);
    let project_dir = workspace.display().to_string();
    for plugin in plugins {
        let root = plugin.root.display().to_string();
        let lookup = |name: &str| match name {
            "CLAUDE_PROJECT_DIR" => Some(project_dir.clone()),
            crate::plugins::ROOT_VAR => Some(root.clone()),
            other => env("plugin", other),
        };
        for (name, entry) in &plugin.mcp_servers {
            add(out, name, "plugin", entry, &lookup, &approval);
        }
    }
}

fn add(
    out: &mut McpConfig,
    name: &str,
    scope: &'static str,
    entry: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
    approval: &Approval,
) {
    if out.servers.iter().any(|s| s.name == name) {
        // A higher source already configured this name.
        return;
    }
    let refuse = |why: String| Refused {
        name: name.to_string(),
        scope,
        why,
    };
    // Security: rules and hook matchers name a server's tools `mcp__<server>__<tool>`, with
    // the server's name made safe. Two names made the same (`my.db`, `my_db`) would give a
    // repository's server the tool names, and so the allow rules, of the user's; a name
    // holding `__` (`github__x`) would have its tools matched by rules written for another
    // server (`mcp__github`). The first of two alike keeps the name; `__` is refused.
    let part = super::tool::name_part(name);
    // A name ending (or starting) in `_` makes `__` with the separator: `github_`'s tools
    // are `mcp__github___x`, which a rule for `github` matches.
    if part.contains("__") || part.starts_with('_') || part.ends_with('_') {
        out.refused.push(refuse(format!(
            "a server name may not contain `__`, nor start or end with `_`, once made safe for tool names ({part}): rules written for another server would match its tools"
        )));
        return;
    }
    if let Some(first) = out
        .servers
        .iter()
        .find(|s| super::tool::name_part(&s.name) == part)
    {
        out.refused.push(refuse(format!(
            "its tools would be named as those of server {:?} ({}, mcp__{part}__...), which comes first",
            first.name, first.scope
        )));
        return;
    }
    if approval.denied.iter().any(|n| n == name) {
        out.refused.push(refuse(
            "denied by the managed settings (deniedMcpServers)".into(),
        ));
        return;
    }
    if scope == "project" && approval.disabled.iter().any(|n| n == name) {
        out.refused
            .push(refuse("disabled by disabledMcpjsonServers".into()));
        return;
    }
    match parse_entry(entry, lookup) {
        Ok(transport) => out.servers.push(ServerConfig {
            name: name.to_string(),
            scope,
            transport,
        }),
        Err(why) => out.refused.push(refuse(why)),
    }
}

/// One `mcpServers` entry, expanded.
pub fn parse_entry(
    entry: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Transport, String> {
    let kind = entry
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or(if entry.get("url").is_some() {
            "http"
        } else {
            "stdio"
        });
    let x = |s: &str| {
        expand(s, lookup).map_err(|missing| format!("{MISSING_VARS}{}", missing.join(", ")))
    };
    let map = |key: &str| -> Result<BTreeMap<String, String>, String> {
        let mut m = BTreeMap::new();
        for (k, v) in entry
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let v = v.as_str().ok_or(format!("`{key}.{k}` must be a string"))?;
            m.insert(k.clone(), x(v)?);
        }
        Ok(m)
    };
    let str_field = |key: &str| entry.get(key).and_then(Value::as_str);
    match kind {
        "stdio" => {
            let command = str_field("command").ok_or("a stdio server needs `command`")?;
            let mut args = Vec::new();
            for a in entry
                .get("args")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                args.push(x(a.as_str().ok_or("`args` must hold strings")?)?);
            }
            Ok(Transport::Stdio {
                command: x(command)?,
                args,
                env: map("env")?,
            })
        }
        "http" | "streamable-http" | "streamableHttp" => {
            let url = str_field("url").ok_or("an http server needs `url`")?;
            Ok(Transport::Http {
                url: x(url)?,
                headers: map("headers")?,
            })
        }
        "sse" => Err(
            "legacy SSE servers are not supported: only stdio and Streamable HTTP \
                      (`\"type\": \"http\"`) servers are; most SSE servers also serve Streamable \
                      HTTP, often at `/mcp`"
                .into(),
        ),
        other => Err(format!(
            "unknown server type `{other}` (expected stdio or http)"
        )),
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
