//! Custom slash commands in Claude Code's shape: `.claude/commands/NAME.md` in the
//! workspace (and `NAME.md` one folder down, `.claude/commands/frontend/NAME.md`) and
//! `~/.claude/commands/NAME.md`. `/NAME ARGS` becomes the file's body with `$ARGUMENTS`
//! replaced by ARGS (and `$1`..`$9` by its words), in headless runs, stream-json prompts
//! and the interactive session alike. A workspace command shadows the user's of the same
//! name. A leading `---` frontmatter block (description, allowed-tools, ...) is dropped:
//! a command is prompt text, and grants nothing (`allowed-tools` in a repository's file
//! would otherwise widen permissions without trust).
//!
//! Workspace files are read beneath the workspace and never through a link.

use std::path::{Path, PathBuf};

use sandbox_agent::beneath::{WorkspaceReader as Workspace, read_own_file};

/// The workspace's commands, relative to it; also the user's, relative to their home.
pub const DIR: &str = ".claude/commands";
/// The most a command file may hold.
const MAX_BYTES: u64 = 256 * 1024;

/// One command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    pub name: String,
    /// `project` or `user`.
    pub scope: &'static str,
    /// The frontmatter's `description`, else the body's first line.
    pub description: String,
    pub body: String,
}

impl CustomCommand {
    /// The prompt for `/name args`.
    pub fn expand(&self, args: &str) -> String {
        let words: Vec<&str> = args.split_whitespace().collect();
        let mut out = self.body.replace("$ARGUMENTS", args.trim());
        for i in (1..=9).rev() {
            out = out.replace(&format!("${i}"), words.get(i - 1).copied().unwrap_or(""));
        }
        out
    }
}

/// The commands of `workspace` and `home`, workspace first.
pub fn load(workspace: &Path, home: Option<&Path>) -> Vec<CustomCommand> {
    let mut out = Vec::new();
    if let Ok(ws) = Workspace::open(workspace) {
        for rel in command_files(&workspace.join(DIR), Path::new(DIR)) {
            match ws.read_text(&rel, MAX_BYTES) {
                Ok(Some(text)) => push(&mut out, &rel, "project", &text),
                Ok(None) => {}
                Err(e) => tracing::warn!("custom command skipped: {e}"),
            }
        }
    }
    if let Some(home) = home {
        for rel in command_files(&home.join(DIR), Path::new(DIR)) {
            if let Ok(Some(text)) = read_own_file(&home.join(&rel), MAX_BYTES) {
                push(&mut out, &rel, "user", &text);
            }
        }
    }
    out
}

/// `/name args` when `prompt` names one of `commands`: the expanded prompt.
pub fn expand_prompt(commands: &[CustomCommand], prompt: &str) -> Option<String> {
    let rest = prompt.trim_start().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    commands
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.expand(args))
}

fn push(out: &mut Vec<CustomCommand>, rel: &Path, scope: &'static str, text: &str) {
    let Some(name) = rel.file_stem().and_then(|s| s.to_str()) else {
        return;
    };
    if out.iter().any(|c| c.name == name) {
        return;
    }
    out.push(parse(name, scope, text));
}

/// The command `name` from a command file's text (its frontmatter dropped but for the
/// description).
pub fn parse(name: &str, scope: &'static str, text: &str) -> CustomCommand {
    let (front, body) = split_frontmatter(text);
    let description = front
        .lines()
        .find_map(|l| l.strip_prefix("description:"))
        .map(|d| d.trim().trim_matches('"').to_string())
        .unwrap_or_else(|| body.lines().next().unwrap_or("").trim().to_string());
    CustomCommand {
        name: name.to_string(),
        scope,
        description,
        body: body.trim().to_string(),
    }
}

/// (frontmatter, body): the frontmatter is the block between a first line `---` and the
/// next `---` line; empty when there is none.
pub fn split_frontmatter(text: &str) -> (&str, &str) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return ("", text);
    };
    match rest.find("\n---") {
        Some(end) => {
            let after = &rest[end + 4..];
            let body = after.split_once('\n').map_or("", |(_, b)| b);
            (&rest[..end], body)
        }
        None => ("", text),
    }
}

/// `*.md` files in `dir` and its direct subfolders, as `rel_base/...` paths, sorted.
/// Links (the folder itself, subfolders) are not followed.
fn command_files(dir: &Path, rel_base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if !is_dir(dir) {
        return out;
    }
    let entries = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        v.sort();
        v
    };
    for entry in entries(dir) {
        let name = entry.file_name().map(PathBuf::from).unwrap_or_default();
        if entry.extension().is_some_and(|e| e == "md") {
            out.push(rel_base.join(&name));
        } else if is_dir(&entry) {
            for sub in entries(&entry) {
                if sub.extension().is_some_and(|e| e == "md")
                    && let Some(file) = sub.file_name()
                {
                    out.push(rel_base.join(&name).join(file));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_expand_arguments_and_drop_frontmatter() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".claude/commands/team")).unwrap();
        std::fs::write(
            ws.join(".claude/commands/fix-issue.md"),
            "---\ndescription: Fix an issue\nallowed-tools: Bash(*)\n---\nFix issue #$ARGUMENTS, first $1.\n",
        )
        .unwrap();
        std::fs::write(
            ws.join(".claude/commands/team/review.md"),
            "Review the diff.",
        )
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".claude/commands")).unwrap();
        std::fs::write(home.path().join(".claude/commands/review.md"), "mine").unwrap();
        std::fs::write(home.path().join(".claude/commands/hello.md"), "Say hello.").unwrap();
        let cmds = load(&ws, Some(home.path()));
        let names: Vec<&str> = cmds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["fix-issue", "review", "hello"]);
        assert_eq!(cmds[0].description, "Fix an issue");
        assert_eq!(
            cmds[1].body, "Review the diff.",
            "the workspace's shadows the user's"
        );
        assert_eq!(
            expand_prompt(&cmds, "/fix-issue 42 fast").as_deref(),
            Some("Fix issue #42 fast, first 42.")
        );
        assert_eq!(
            expand_prompt(&cmds, "/hello").as_deref(),
            Some("Say hello.")
        );
        assert_eq!(expand_prompt(&cmds, "/nope x"), None);
        assert_eq!(expand_prompt(&cmds, "fix /hello"), None);
    }

    #[test]
    fn a_linked_commands_folder_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        let outside = dir.path().canonicalize().unwrap().join("outside");
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("steal.md"), "secret").unwrap();
        std::os::unix::fs::symlink(&outside, ws.join(".claude/commands")).unwrap();
        assert!(load(&ws, None).is_empty());
    }
}
