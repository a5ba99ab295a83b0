//! A plugin's manifest, `.claude-plugin/plugin.json`, in Claude Code's shape: `name`
//! (else the directory's name), `version`, metadata, and component paths that add to the
//! default layout (`commands`, `agents`, `skills`: a path or a list of them; `hooks`,
//! `mcpServers`: a path, an inline object, or a list of either).
//!
//! Every path is relative to the plugin root and starts with `./`; one with `..`, `.`
//! or an absolute form is refused with the manifest, so nothing a manifest names can lie
//! outside the plugin (links are resolved beneath the root when read, see
//! [`sandbox_agent::beneath::TreeReader`]).

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

/// Where the manifest is, relative to the plugin root.
pub const MANIFEST: &str = ".claude-plugin/plugin.json";

/// Fields that only describe the plugin.
const METADATA: &[&str] = &[
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "$schema",
];

/// Component fields of Claude Code's that Cordon has no counterpart for.
const UNSUPPORTED: &[&str] = &["outputStyles", "lspServers", "userConfig", "channels"];

/// A file or an inline object a component field names.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Path(PathBuf),
    Inline(Map<String, Value>),
}

/// What the manifest says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    pub name: Option<String>,
    pub version: Option<String>,
    pub commands: Vec<PathBuf>,
    pub agents: Vec<PathBuf>,
    pub skills: Vec<PathBuf>,
    pub hooks: Vec<Source>,
    pub mcp_servers: Vec<Source>,
    /// Fields Cordon does not apply (named in the plugin's load report).
    pub unsupported: Vec<String>,
}

/// Parses the manifest's text; the error says which field is wrong.
pub fn parse(text: &str) -> Result<Manifest, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let Some(fields) = value.as_object() else {
        return Err("expected a JSON object".into());
    };
    let string = |key: &str| -> Result<Option<String>, String> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{key}` must be a string")),
        }
    };
    let mut m = Manifest {
        name: string("name")?,
        version: string("version")?,
        commands: paths(fields, "commands")?,
        agents: paths(fields, "agents")?,
        skills: paths(fields, "skills")?,
        hooks: sources(fields, "hooks")?,
        mcp_servers: sources(fields, "mcpServers")?,
        unsupported: Vec::new(),
    };
    for key in fields.keys() {
        let known = METADATA.contains(&key.as_str())
            || ["commands", "agents", "skills", "hooks", "mcpServers"].contains(&key.as_str());
        if UNSUPPORTED.contains(&key.as_str()) {
            m.unsupported.push(key.clone());
        } else if !known {
            tracing::warn!(field = %key, "plugin manifest field not known; ignored");
        }
    }
    Ok(m)
}

fn paths(fields: &Map<String, Value>, key: &str) -> Result<Vec<PathBuf>, String> {
    let list = match fields.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().ok_or(format!("`{key}` must hold path strings")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("`{key}` must be a path or a list of paths")),
    };
    list.into_iter().map(|p| relative(key, p)).collect()
}

fn sources(fields: &Map<String, Value>, key: &str) -> Result<Vec<Source>, String> {
    let one = |v: &Value| match v {
        Value::String(p) => relative(key, p).map(Source::Path),
        Value::Object(map) => Ok(Source::Inline(map.clone())),
        _ => Err(format!(
            "`{key}` must be a path, an object, or a list of those"
        )),
    };
    match fields.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(one).collect(),
        Some(v) => Ok(vec![one(v)?]),
    }
}

/// `./a/b` as `a/b`: relative, written with `./`, plain components only.
pub fn relative(key: &str, path: &str) -> Result<PathBuf, String> {
    let Some(rest) = path.strip_prefix("./") else {
        return Err(format!(
            "`{key}` path {path:?} must be relative to the plugin root and start with ./"
        ));
    };
    let rel = Path::new(rest.trim_end_matches('/'));
    let plain = rel.components().next().is_some()
        && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return Err(format!(
            "`{key}` path {path:?} must stay inside the plugin (no `..`, `.` or empty parts)"
        ));
    }
    Ok(rel.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_fields_take_paths_objects_and_lists() {
        let m = parse(
            r#"{"name": "kit", "version": "1.2.0", "author": {"name": "x"},
                "commands": ["./extra/cmds", "./one.md"], "agents": "./more-agents/",
                "hooks": [{"PreToolUse": []}, "./config/hooks.json"],
                "mcpServers": "./servers.json", "outputStyles": "./styles"}"#,
        )
        .unwrap();
        assert_eq!(m.name.as_deref(), Some("kit"));
        assert_eq!(m.version.as_deref(), Some("1.2.0"));
        assert_eq!(
            m.commands,
            [PathBuf::from("extra/cmds"), PathBuf::from("one.md")]
        );
        assert_eq!(m.agents, [PathBuf::from("more-agents")]);
        assert!(matches!(&m.hooks[0], Source::Inline(map) if map.contains_key("PreToolUse")));
        assert_eq!(m.hooks[1], Source::Path("config/hooks.json".into()));
        assert_eq!(m.mcp_servers, [Source::Path("servers.json".into())]);
        assert_eq!(m.unsupported, ["outputStyles"]);
    }

    #[test]
    fn paths_out_of_the_plugin_are_refused() {
        for bad in [
            r#"{"commands": "../outside"}"#,
            r#"{"commands": "./a/../../b"}"#,
            r#"{"agents": "/etc"}"#,
            r#"{"hooks": "hooks.json"}"#,
            r#"{"skills": "./"}"#,
            r#"{"name": 3}"#,
            r#"["not an object"]"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
