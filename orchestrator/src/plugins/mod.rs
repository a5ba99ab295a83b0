//! Claude Code plugins given with `--plugin-dir DIR` (the Agent SDK's `plugins` option):
//! a directory with an optional `.claude-plugin/plugin.json` ([`manifest`]) whose
//! `commands/`, `agents/`, `skills/`, `hooks/hooks.json` and `.mcp.json` (and the paths the
//! manifest adds) join the session, named as Claude Code names them: the command
//! `/<plugin>:<command>`, the agent type and the skill `<plugin>:<name>`, the MCP server
//! `plugin:<plugin>:<server>` (its tools `mcp__plugin_<plugin>_<server>__<tool>`).
//! `${CLAUDE_PLUGIN_ROOT}` in commands, skills, hooks and server entries is the plugin's
//! directory, which hooks also get as `CLAUDE_PLUGIN_ROOT`.
//!
//! # Trust
//!
//! A plugin directory named on the command line is the user's choice, so it counts as
//! the user's own settings do: its hooks and MCP servers run whatever the workspace's
//! trust. It gets nothing the user's settings would not: its hooks run inside the
//! sandbox like the user's (only the operator's managed hooks run on the host) and
//! answer to `disableAllHooks` and `allowManagedHooksOnly`; its servers answer to the
//! managed `deniedMcpServers` and stay out under `--strict-mcp-config`; its commands are
//! prompt text that grant nothing (their `allowed-tools` is dropped as for every
//! command); its agents' definitions pick a prompt, tools and a model, not a mode.
//!
//! # Containment
//!
//! Every file is read beneath the plugin's root ([`sandbox_agent::beneath::TreeReader`]):
//! a link inside the plugin resolves while it stays inside, and one leading out (or a
//! manifest path with `..`) is refused, so a plugin cannot make Cordon read a host file
//! into a prompt. The sandbox sees the root read-only at its own path (local backend), so
//! its hooks and servers find their scripts; a root that is `/`, a home or holds one,
//! Cordon's data, a listed secret, or is writable by every user is refused.

pub mod manifest;

use std::path::{Path, PathBuf};

use sandbox_agent::beneath::{ReadError, TreeReader};
use serde_json::{Map, Value};

use crate::hooks::HookSource;
use crate::slash_commands::CustomCommand;
use crate::subagents::AgentDefinition;
use crate::tools::skill::Skill;

/// The variable that names a plugin's directory.
pub const ROOT_VAR: &str = "CLAUDE_PLUGIN_ROOT";
/// The most a plugin file may hold.
const MAX_BYTES: u64 = 256 * 1024;

/// Why a plugin directory was not loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin {dir}: {why}")]
pub struct PluginError {
    pub dir: PathBuf,
    /// Claude Code's category (`path-not-found`, `manifest-validation-error`, ...).
    pub kind: &'static str,
    pub why: String,
}

/// One loaded plugin.
#[derive(Debug, Clone)]
pub struct Plugin {
    pub name: String,
    /// The directory, canonical.
    pub root: PathBuf,
    pub version: Option<String>,
    pub commands: Vec<CustomCommand>,
    pub agents: Vec<AgentDefinition>,
    pub skills: Vec<Skill>,
    /// Its hooks (`${CLAUDE_PLUGIN_ROOT}` expanded in their commands, which also get it
    /// as a variable), to run in the sandbox as the user's hooks do.
    pub hooks: Vec<crate::hooks::HookEntry>,
    /// MCP server entries by the session's name for them (`plugin:<plugin>:<server>`),
    /// still to be expanded (with [`ROOT_VAR`] among the variables).
    pub mcp_servers: Vec<(String, Value)>,
    /// What the plugin declares that Cordon does not apply, for the load report.
    pub unsupported: Vec<String>,
}

impl Plugin {
    /// The init record's entry: `{name, path, version?}`.
    pub fn summary(&self) -> Value {
        let mut v = serde_json::json!({"name": self.name, "path": self.root.display().to_string()});
        if let Some(version) = &self.version {
            v["version"] = Value::from(version.clone());
        }
        v
    }

    /// Whether it runs anything in the sandbox (hooks, or servers started there).
    pub fn runs_programs(&self) -> bool {
        !self.hooks.is_empty()
            || self
                .mcp_servers
                .iter()
                .any(|(_, e)| e.get("url").is_none() && e.get("type").is_none_or(|t| t == "stdio"))
    }
}

/// Loads each directory; the ones that fail are reported, the others loaded.
pub fn load_all(dirs: &[PathBuf]) -> (Vec<Plugin>, Vec<PluginError>) {
    let mut plugins: Vec<Plugin> = Vec::new();
    let mut errors = Vec::new();
    for dir in dirs {
        match load(dir) {
            Ok(p) if plugins.iter().any(|q| q.name == p.name) => errors.push(PluginError {
                dir: dir.clone(),
                kind: "duplicate-name",
                why: format!("another plugin directory is already named `{}`", p.name),
            }),
            Ok(p) => plugins.push(p),
            Err(e) => errors.push(e),
        }
    }
    (plugins, errors)
}

/// Loads the plugin at `dir`.
pub fn load(dir: &Path) -> Result<Plugin, PluginError> {
    let fail = |kind: &'static str, why: String| PluginError {
        dir: dir.to_path_buf(),
        kind,
        why,
    };
    let root = std::fs::canonicalize(dir)
        .map_err(|e| fail("path-not-found", format!("cannot be opened: {e}")))?;
    if !root.is_dir() {
        return Err(fail("path-not-found", "is not a directory".into()));
    }
    exposable(&root).map_err(|why| fail("refused", why))?;
    let tree = TreeReader::open(&root).map_err(|e| fail("path-not-found", e.to_string()))?;
    let manifest = match read(&tree, Path::new(manifest::MANIFEST)) {
        Some(text) => manifest::parse(&text).map_err(|why| {
            fail(
                "manifest-validation-error",
                format!("{}: {why}", manifest::MANIFEST),
            )
        })?,
        None => manifest::Manifest::default(),
    };
    let name = match &manifest.name {
        Some(name) => name.clone(),
        None => root
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string(),
    };
    if !crate::subagents::definition::valid_name(&name) {
        return Err(fail(
            "manifest-validation-error",
            format!("`{name}` is not a plugin name (1-64 of letters, digits, '-' and '_')"),
        ));
    }
    let mut plugin = Plugin {
        name,
        root: root.clone(),
        version: manifest.version.clone(),
        commands: Vec::new(),
        agents: Vec::new(),
        skills: Vec::new(),
        hooks: Vec::new(),
        mcp_servers: Vec::new(),
        unsupported: manifest.unsupported.clone(),
    };
    let with_default = |default: &str, extra: &[PathBuf]| -> Vec<PathBuf> {
        std::iter::once(PathBuf::from(default))
            .chain(extra.iter().cloned())
            .collect()
    };
    for place in with_default("commands", &manifest.commands) {
        commands(&tree, &place, &mut plugin);
    }
    for place in with_default("agents", &manifest.agents) {
        agents(&tree, &place, &mut plugin);
    }
    for place in with_default("skills", &manifest.skills) {
        skills(&tree, &place, &mut plugin);
    }
    let mut hook_sources = vec![manifest::Source::Path("hooks/hooks.json".into())];
    hook_sources.extend(manifest.hooks.iter().cloned());
    for source in hook_sources {
        hooks(&tree, source, &mut plugin).map_err(|why| fail("hooks-load-failed", why))?;
    }
    let mut server_sources = vec![manifest::Source::Path(".mcp.json".into())];
    server_sources.extend(manifest.mcp_servers.iter().cloned());
    for source in server_sources {
        servers(&tree, source, &mut plugin).map_err(|why| fail("mcp-config-invalid", why))?;
    }
    Ok(plugin)
}

/// Why the sandbox may not see `root` (canonical) read-only, if it may not: it must not
/// be `/`, a home or an ancestor of one, hold or lie in Cordon's data, be writable by
/// every user, or be, hold or lie in a secret of `policies/toolchains.json`.
fn exposable(root: &Path) -> Result<(), String> {
    let forbidden = crate::workspace_location::Forbidden::from_env();
    forbidden.check(root).map_err(|e| e.reason())?;
    match crate::sandbox::additional::secret(root, &forbidden.homes) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// The text at `rel`, or `None` (with a warning when it exists but may not be read).
fn read(tree: &TreeReader, rel: &Path) -> Option<String> {
    match tree.read_text(rel, MAX_BYTES) {
        Ok(text) => text,
        Err(e) => {
            warn_skipped(&e);
            None
        }
    }
}

fn warn_skipped(e: &ReadError) {
    tracing::warn!("plugin file skipped: {e}");
}

/// `${CLAUDE_PLUGIN_ROOT}` replaced by `root`.
pub fn expand_root(text: &str, root: &Path) -> String {
    text.replace(&format!("${{{ROOT_VAR}}}"), &root.display().to_string())
}

fn names(tree: &TreeReader, dir: &Path) -> Vec<String> {
    match tree.list(dir) {
        Ok(names) => names
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .collect(),
        Err(e) => {
            warn_skipped(&e);
            Vec::new()
        }
    }
}

/// `*.md` in `place` and its direct subfolders, or `place` itself when it is a file.
fn markdown_files(tree: &TreeReader, place: &Path) -> Vec<PathBuf> {
    if place.extension().is_some_and(|e| e == "md") {
        return vec![place.to_path_buf()];
    }
    let mut out = Vec::new();
    for name in names(tree, place) {
        let rel = place.join(&name);
        if name.ends_with(".md") {
            out.push(rel);
        } else {
            out.extend(
                names(tree, &rel)
                    .into_iter()
                    .filter(|n| n.ends_with(".md"))
                    .map(|n| rel.join(n)),
            );
        }
    }
    out
}

fn stem(rel: &Path) -> Option<&str> {
    rel.file_stem().and_then(|s| s.to_str())
}

fn commands(tree: &TreeReader, place: &Path, plugin: &mut Plugin) {
    for rel in markdown_files(tree, place) {
        let (Some(stem), Some(text)) = (stem(&rel), read(tree, &rel)) else {
            continue;
        };
        let name = format!("{}:{stem}", plugin.name);
        if plugin.commands.iter().any(|c| c.name == name) {
            continue;
        }
        let mut command = crate::slash_commands::parse(&name, "plugin", &text);
        command.body = expand_root(&command.body, tree.root());
        plugin.commands.push(command);
    }
}

fn agents(tree: &TreeReader, place: &Path, plugin: &mut Plugin) {
    use crate::subagents::definition::{Scope, parse};
    for rel in markdown_files(tree, place) {
        let Some(text) = read(tree, &rel) else {
            continue;
        };
        let Some(mut def) = parse(&tree.root().join(&rel), &text, Scope::Plugin) else {
            continue;
        };
        def.name = format!("{}:{}", plugin.name, def.name);
        def.prompt = expand_root(&def.prompt, tree.root());
        if !plugin.agents.iter().any(|d| d.name == def.name) {
            plugin.agents.push(def);
        }
    }
}

fn skills(tree: &TreeReader, place: &Path, plugin: &mut Plugin) {
    for name in names(tree, place) {
        let dir = place.join(&name);
        let Some(text) = read(tree, &dir.join("SKILL.md")) else {
            continue;
        };
        let Some(mut skill) = crate::tools::skill::parse(&tree.root().join(&dir), &text) else {
            continue;
        };
        skill.name = format!("{}:{}", plugin.name, skill.name);
        skill.body = expand_root(&skill.body, tree.root());
        if !plugin.skills.iter().any(|s| s.name == skill.name) {
            plugin.skills.push(skill);
        }
    }
}

/// The JSON a component field names and where it is (the file, or the manifest for an
/// inline object); `None` when the file is not there.
fn json_source(
    tree: &TreeReader,
    source: manifest::Source,
) -> Result<Option<(String, Value)>, String> {
    Ok(match source {
        manifest::Source::Path(rel) => {
            let Some(text) = read(tree, &rel) else {
                return Ok(None);
            };
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| format!("{}: invalid JSON: {e}", rel.display()))?;
            Some((tree.root().join(rel).display().to_string(), value))
        }
        manifest::Source::Inline(map) => Some((
            tree.root().join(manifest::MANIFEST).display().to_string(),
            Value::Object(map),
        )),
    })
}

/// A hooks file is `{"description"?, "hooks": {...}}`; an inline manifest entry is the
/// same object.
fn hooks(tree: &TreeReader, source: manifest::Source, plugin: &mut Plugin) -> Result<(), String> {
    let Some((origin, value)) = json_source(tree, source)? else {
        return Ok(());
    };
    let events = match value.get("hooks") {
        Some(events) => events.clone(),
        None if value.is_object() => without_description(&value),
        None => return Err(format!("{origin}: expected an object with \"hooks\"")),
    };
    let events = expand_commands(events, tree.root());
    let mut entries = crate::hooks::parse_hooks(&events, HookSource::Plugin, &origin)
        .map_err(|e| e.to_string())?;
    for entry in &mut entries {
        entry
            .env
            .push((ROOT_VAR.to_string(), tree.root().display().to_string()));
    }
    plugin.hooks.extend(entries);
    Ok(())
}

/// An inline hooks object may carry a `description` beside its events.
fn without_description(value: &Value) -> Value {
    let mut v = value.clone();
    if let Some(map) = v.as_object_mut() {
        map.remove("description");
    }
    v
}

/// Every hook `command` with `${CLAUDE_PLUGIN_ROOT}` replaced.
fn expand_commands(mut hooks: Value, root: &Path) -> Value {
    fn walk(v: &mut Value, root: &Path) {
        match v {
            Value::Object(map) => {
                for (k, item) in map.iter_mut() {
                    match item {
                        Value::String(s) if k == "command" => *s = expand_root(s, root),
                        other => walk(other, root),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, root)),
            _ => {}
        }
    }
    walk(&mut hooks, root);
    hooks
}

/// An `.mcp.json`-shaped file or object: `{"mcpServers": {name: entry}}` (or the map
/// itself, as Claude Code also accepts).
fn servers(tree: &TreeReader, source: manifest::Source, plugin: &mut Plugin) -> Result<(), String> {
    let Some((shown, value)) = json_source(tree, source)? else {
        return Ok(());
    };
    let map: &Map<String, Value> = match value.get("mcpServers") {
        Some(Value::Object(m)) => m,
        Some(_) => return Err(format!("{shown}: \"mcpServers\" must be an object")),
        None => value
            .as_object()
            .ok_or_else(|| format!("{shown}: expected an object of servers"))?,
    };
    for (name, entry) in map {
        if !entry.is_object() {
            return Err(format!("{shown}: server `{name}` must be an object"));
        }
        let full = format!("plugin:{}:{name}", plugin.name);
        if !plugin.mcp_servers.iter().any(|(n, _)| *n == full) {
            plugin.mcp_servers.push((full, entry.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
