//! Skills in Claude Code's shape: `.claude/skills/NAME/SKILL.md` in the workspace and
//! `~/.claude/skills/NAME/SKILL.md`, each with frontmatter `name` and `description`. The
//! descriptions go in the Skill tool's description (so the model knows what exists); the
//! body, with the list of the other files in the skill's folder, comes back when the model
//! calls `Skill{skill}`. A workspace skill shadows the user's of the same name.
//!
//! Workspace files are read beneath the workspace and never through a link; the skill's
//! other files are in the workspace, where the model reads them with Read.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, str_field};
use crate::slash_commands::split_frontmatter;
use sandbox_agent::beneath::{WorkspaceReader as Workspace, read_own_file};

/// The skills folder, relative to the workspace or the user's home.
pub const DIR: &str = ".claude/skills";
const MAX_BYTES: u64 = 256 * 1024;

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub body: String,
    /// Its folder (absolute).
    pub dir: PathBuf,
    /// The other files in its folder, by name.
    pub files: Vec<String>,
}

/// The skills of `workspace` and `home`, workspace first.
pub fn load(workspace: &Path, home: Option<&Path>) -> Vec<Skill> {
    let mut out: Vec<Skill> = Vec::new();
    let ws = Workspace::open(workspace).ok();
    let roots = [Some(workspace), home];
    for (i, root) in roots.iter().enumerate() {
        let Some(root) = root else { continue };
        for dir in skill_dirs(&root.join(DIR)) {
            let file = dir.join("SKILL.md");
            let text = match (i, &ws) {
                (0, Some(ws)) => ws
                    .relative(&file)
                    .and_then(|rel| ws.read_text(rel, MAX_BYTES).ok().flatten()),
                (0, None) => None,
                _ => read_own_file(&file, MAX_BYTES).ok().flatten(),
            };
            if let Some(skill) = text.and_then(|t| parse(&dir, &t))
                && !out.iter().any(|s| s.name == skill.name)
            {
                out.push(skill);
            }
        }
    }
    out
}

/// A skill from its SKILL.md text; `dir` is its folder (the other files are listed from
/// it, not through links).
pub fn parse(dir: &Path, text: &str) -> Option<Skill> {
    let (front, body) = split_frontmatter(text);
    let field = |key: &str| {
        front.lines().find_map(|l| {
            l.strip_prefix(key)
                .and_then(|r| r.strip_prefix(':'))
                .map(|v| v.trim().trim_matches('"').to_string())
        })
    };
    let name = field("name").or_else(|| dir.file_name()?.to_str().map(str::to_string))?;
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n != "SKILL.md")
        .collect();
    files.sort();
    Some(Skill {
        name,
        description: field("description").unwrap_or_default(),
        body: body.trim().to_string(),
        dir: dir.to_path_buf(),
        files,
    })
}

/// Folders of `root` (not followed through links) that hold a SKILL.md, sorted.
fn skill_dirs(root: &Path) -> Vec<PathBuf> {
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if !is_dir(root) {
        return Vec::new();
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_dir(p) && std::fs::symlink_metadata(p.join("SKILL.md")).is_ok())
        .collect();
    dirs.sort();
    dirs
}

/// The Skill tool over a session's skills.
pub struct SkillTool {
    skills: Vec<Skill>,
    description: String,
}

impl SkillTool {
    /// `None` when there are no skills (the tool is then not offered).
    pub fn new(skills: Vec<Skill>) -> Option<Self> {
        if skills.is_empty() {
            return None;
        }
        let mut description = String::from(
            "Loads a skill: instructions (and the files beside them) for a kind of task. \
             When a task matches a skill's description, call this first with `skill` set \
             to its name and follow what it returns. Available skills:\n",
        );
        for s in &skills {
            description.push_str(&format!("- {}: {}\n", s.name, s.description));
        }
        Some(Self {
            skills,
            description,
        })
    }
}

#[tonic::async_trait]
impl Tool for SkillTool {
    fn name(&self) -> &str {
        "Skill"
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "skill": {"type": "string", "minLength": 1, "description": "The skill's name"}
            },
            "required": ["skill"],
            "additionalProperties": false
        })
    }

    /// It only returns text the session already holds.
    fn is_read_only(&self) -> bool {
        true
    }

    fn uses_sandbox(&self) -> bool {
        false
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> ToolOutput {
        let name = str_field(&input, "skill").trim_start_matches('/');
        let Some(skill) = self.skills.iter().find(|s| s.name == name) else {
            let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
            return ToolOutput::error(format!(
                "Skill: no skill named `{name}`; available: {}",
                names.join(", ")
            ));
        };
        let mut text = format!(
            "Skill `{}` (base directory: {})\n\n{}",
            skill.name,
            skill.dir.display(),
            skill.body
        );
        if !skill.files.is_empty() {
            text.push_str(&format!(
                "\n\nFiles in the skill's directory (read them when the instructions name them): {}",
                skill.files.join(", ")
            ));
        }
        ToolOutput::ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_load_with_their_frontmatter_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let pdf = ws.join(".claude/skills/pdf");
        std::fs::create_dir_all(&pdf).unwrap();
        std::fs::write(
            pdf.join("SKILL.md"),
            "---\nname: pdf-tools\ndescription: Work with PDF files\n---\nUse forms.md for forms.\n",
        )
        .unwrap();
        std::fs::write(pdf.join("forms.md"), "fill them").unwrap();
        std::fs::create_dir_all(ws.join(".claude/skills/empty")).unwrap();
        let skills = load(&ws, None);
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].name, "pdf-tools");
        assert_eq!(skills[0].description, "Work with PDF files");
        assert_eq!(skills[0].files, ["forms.md"]);
        let tool = SkillTool::new(skills).unwrap();
        assert!(
            tool.description()
                .contains("- pdf-tools: Work with PDF files")
        );
        assert!(SkillTool::new(Vec::new()).is_none());
    }
}
