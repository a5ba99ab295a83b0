//! Sub-agent definitions in Claude Code's shape: `NAME.md` files with a frontmatter
//! (`name`, `description`, `tools` as a comma-separated list, `model`) whose body is the
//! sub-agent's system prompt, in the workspace's `.claude/agents/` and the user's
//! `~/.claude/agents/` and `~/.cordon/agents/`.
//!
//! A repository's definitions count only where its other settings do (a trusted
//! workspace): a definition picks the tools and the instructions a sub-agent runs with, as
//! a settings file picks rules and hooks. Workspace files are read beneath the workspace
//! and never through a link; a workspace definition shadows the user's of the same name.

use std::path::{Path, PathBuf};

use sandbox_agent::beneath::{WorkspaceReader, read_own_file};

use crate::slash_commands::split_frontmatter;

/// The agents folder, relative to the workspace or the user's home.
pub const DIR: &str = ".claude/agents";
/// The user's Cordon-only agents folder, relative to the home.
pub const CORDON_DIR: &str = ".cordon/agents";
const MAX_BYTES: u64 = 256 * 1024;

/// Where a definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Project,
    User,
    /// From the Agent SDK client's `initialize` (its `agents` option): the caller's own
    /// choice, so it shadows a file definition of the same name.
    Client,
    /// From a plugin given on the command line (`--plugin-dir`), named `<plugin>:<name>`.
    Plugin,
}

/// One sub-agent type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    /// The `subagent_type` the model names it by.
    pub name: String,
    pub description: String,
    /// The tools it may use; `None`: all of the parent's (the Agent tool aside).
    pub tools: Option<Vec<String>>,
    /// Tools it may not use, even when `tools` names them or is `None`.
    pub disallowed_tools: Vec<String>,
    /// `None` or `inherit`: the parent's model; an alias (`sonnet`, `opus`, `haiku`) or a
    /// model id otherwise.
    pub model: Option<String>,
    /// Its system prompt (the file's body).
    pub prompt: String,
    pub scope: Scope,
    /// What else the definition sets (the SDK client's `AgentDefinition` fields).
    pub options: AgentOptions,
}

/// A sub-agent type's settings beyond its prompt, tools and model, as the Agent SDK's
/// `AgentDefinition` names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentOptions {
    /// `maxTurns`: most model calls of one run.
    pub max_turns: Option<u32>,
    /// `effort`: the API's effort level for its calls.
    pub effort: Option<String>,
    /// `permissionMode`: the mode its calls are judged in (the session's bypassPermissions
    /// still wins, as in Claude Code).
    pub permission_mode: Option<crate::permissions::PermissionMode>,
    /// `skills`: skills whose instructions open its first message.
    pub skills: Vec<String>,
    /// `mcpServers`: session servers whose tools it gets beside `tools`.
    pub mcp_servers: Vec<String>,
}

/// The definitions that apply: the workspace's (when `trusted`) first, then the user's.
pub fn load(workspace: &Path, user_home: Option<&Path>, trusted: bool) -> Vec<AgentDefinition> {
    let mut out: Vec<AgentDefinition> = Vec::new();
    let mut add = |def: Option<AgentDefinition>| {
        if let Some(def) = def
            && !out.iter().any(|d| d.name == def.name)
        {
            out.push(def);
        }
    };
    if trusted && let Ok(ws) = WorkspaceReader::open(workspace) {
        for file in md_files(&workspace.join(DIR)) {
            let text = ws
                .relative(&file)
                .and_then(|rel| match ws.read_text(rel, MAX_BYTES) {
                    Ok(text) => text,
                    Err(e) => {
                        tracing::warn!("sub-agent definition skipped: {e}");
                        None
                    }
                });
            add(text.and_then(|t| parse(&file, &t, Scope::Project)));
        }
    }
    if let Some(home) = user_home {
        for dir in [DIR, CORDON_DIR] {
            for file in md_files(&home.join(dir)) {
                let text = read_own_file(&file, MAX_BYTES).ok().flatten();
                add(text.and_then(|t| parse(&file, &t, Scope::User)));
            }
        }
    }
    out
}

/// A definition from a file's text; `None` when it names no usable type.
pub fn parse(file: &Path, text: &str, scope: Scope) -> Option<AgentDefinition> {
    let (front, body) = split_frontmatter(text);
    let field = |key: &str| {
        front.lines().find_map(|l| {
            let value = l.strip_prefix(key)?.strip_prefix(':')?.trim();
            let value = value.trim_matches('"').trim_matches('\'').trim();
            (!value.is_empty()).then(|| value.to_string())
        })
    };
    let name = field("name").or_else(|| file.file_stem()?.to_str().map(str::to_string))?;
    if !valid_name(&name) {
        tracing::warn!(file = %file.display(), "sub-agent definition skipped: bad name `{name}`");
        return None;
    }
    let tools = field("tools").map(|list| {
        list.trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(|t| t.trim().trim_matches('"').trim_matches('\'').to_string())
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
    });
    Some(AgentDefinition {
        name,
        description: field("description").unwrap_or_default(),
        tools,
        disallowed_tools: Vec::new(),
        model: field("model"),
        prompt: body.trim().to_string(),
        scope,
        options: AgentOptions::default(),
    })
}

/// A definition the SDK client sent in `initialize` (`agents`, name -> AgentDefinition);
/// `None` when the name is not a usable type name.
pub fn from_client(
    name: &str,
    description: &str,
    prompt: &str,
    tools: Option<&[String]>,
    disallowed_tools: &[String],
    model: Option<&str>,
) -> Option<AgentDefinition> {
    if !valid_name(name) {
        tracing::warn!("the client's sub-agent `{name}` is skipped: not a valid type name");
        return None;
    }
    Some(AgentDefinition {
        name: name.to_string(),
        description: description.to_string(),
        tools: tools.map(<[String]>::to_vec),
        disallowed_tools: disallowed_tools.to_vec(),
        model: model.filter(|m| !m.is_empty()).map(str::to_string),
        prompt: prompt.to_string(),
        scope: Scope::Client,
        options: AgentOptions::default(),
    })
}

/// `first` (the client's) with the definitions of `rest` whose names it does not take.
pub fn shadowing(first: Vec<AgentDefinition>, rest: Vec<AgentDefinition>) -> Vec<AgentDefinition> {
    let mut out = first;
    for def in rest {
        if !out.iter().any(|d| d.name == def.name) {
            out.push(def);
        }
    }
    out
}

/// The model id for a definition's `model` given the parent's model.
pub fn model_for(def_model: Option<&str>, parent: &str) -> String {
    match def_model {
        None | Some("inherit") => parent.to_string(),
        Some("sonnet") => "claude-sonnet-4-5".into(),
        Some("opus") => "claude-opus-4-1".into(),
        Some("haiku") => "claude-haiku-4-5".into(),
        Some(id) => id.to_string(),
    }
}

/// A name that can stand in a tool's or type's name: 1-64 of ASCII letters, digits, `-`
/// and `_` (also a plugin's name, the prefix of what it brings).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `*.md` files directly in `dir` (not followed through a link), sorted.
fn md_files(dir: &Path) -> Vec<PathBuf> {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_definition_has_its_frontmatter_and_body() {
        let def = parse(
            Path::new("/x/reviewer.md"),
            "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep\nmodel: haiku\n---\nYou review.\n",
            Scope::Project,
        )
        .unwrap();
        assert_eq!(def.name, "reviewer");
        assert_eq!(def.description, "Reviews code");
        assert_eq!(def.tools, Some(vec!["Read".into(), "Grep".into()]));
        assert_eq!(def.model.as_deref(), Some("haiku"));
        assert_eq!(def.prompt, "You review.");
        let bare = parse(Path::new("/x/helper.md"), "Just help.", Scope::User).unwrap();
        assert_eq!((bare.name.as_str(), bare.tools), ("helper", None));
        assert!(parse(Path::new("/x/a.md"), "---\nname: a b\n---\n", Scope::User).is_none());
        assert_eq!(model_for(Some("inherit"), "m"), "m");
        assert_eq!(model_for(None, "m"), "m");
        assert_eq!(model_for(Some("claude-x"), "m"), "claude-x");
    }

    #[test]
    fn client_definitions_shadow_file_ones_and_need_a_valid_name() {
        let file = parse(Path::new("/x/reviewer.md"), "From a file.", Scope::Project).unwrap();
        let client = from_client(
            "reviewer",
            "Reviews",
            "You review.",
            Some(&["Read".into()]),
            &["Bash".into()],
            Some("haiku"),
        )
        .unwrap();
        assert_eq!(client.scope, Scope::Client);
        assert_eq!(client.disallowed_tools, ["Bash"]);
        let other = parse(Path::new("/x/tester.md"), "Tests.", Scope::User).unwrap();
        let merged = shadowing(vec![client], vec![file, other]);
        let names: Vec<(&str, Scope)> = merged.iter().map(|d| (d.name.as_str(), d.scope)).collect();
        assert_eq!(
            names,
            [("reviewer", Scope::Client), ("tester", Scope::User)]
        );
        assert!(from_client("../x", "", "", None, &[], None).is_none());
        assert_eq!(
            from_client("a", "", "", None, &[], Some("")).unwrap().model,
            None
        );
    }

    #[test]
    fn workspace_definitions_count_only_when_trusted_and_shadow_the_users() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let home = tempfile::tempdir().unwrap();
        write(
            &ws,
            ".claude/agents/reviewer.md",
            "---\ndescription: project\n---\nP",
        );
        write(
            home.path(),
            ".claude/agents/reviewer.md",
            "---\ndescription: user\n---\nU",
        );
        write(
            home.path(),
            ".cordon/agents/tester.md",
            "---\ndescription: tests\n---\nT",
        );
        let trusted = load(&ws, Some(home.path()), true);
        let names: Vec<(&str, &str)> = trusted
            .iter()
            .map(|d| (d.name.as_str(), d.description.as_str()))
            .collect();
        assert_eq!(names, [("reviewer", "project"), ("tester", "tests")]);
        let untrusted = load(&ws, Some(home.path()), false);
        assert_eq!(untrusted[0].description, "user");
        assert_eq!(untrusted[0].scope, Scope::User);
    }

    #[test]
    fn a_workspace_definition_behind_a_link_is_not_read() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "secret.md", "---\nname: leak\n---\nsecret");
        std::fs::create_dir_all(ws.join(DIR)).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.md"),
            ws.join(DIR).join("leak.md"),
        )
        .unwrap();
        assert!(load(&ws, None, true).is_empty());
    }
}
