//! What the model is told before the conversation: our system prompt, the environment
//! (cwd, platform, date, git branch and status) and the CLAUDE.md memory files (the user's,
//! then the workspace's, read beneath it and never through a link).

use std::path::{Path, PathBuf};

use crate::model::{CacheControl, SystemBlock};

/// Cordon's own system prompt.
pub const SYSTEM_PROMPT: &str = "\
You are a coding agent working in a user's project through tools. Every tool runs inside a \
sandbox: files outside the project and the sandbox's temporary directory cannot be written, \
and there is no network unless the operator granted it. Work step by step: look before you \
change, read a file before you edit it, keep edits small and exact, run the project's tests \
or a quick check after a change, and report what you did plainly. When a tool returns an \
error, read it: it says what went wrong and usually what to do instead. Do not guess file \
contents; read them. Prefer the dedicated file tools over shell commands for reading, \
searching and editing files.";

/// One memory file, and where it lives (which decides how it may be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryFile {
    /// The user's own (`~/.claude/CLAUDE.md`, `~/.cordon/CLAUDE.md`), outside the
    /// workspace: the user's home is theirs, so links are followed.
    User(PathBuf),
    /// A file of the workspace, relative to it. The repository and the sandbox write
    /// there, so it is read beneath the workspace and never through a link
    /// ([`sandbox_agent::beneath::read`]).
    Workspace(PathBuf),
}

impl MemoryFile {
    /// The setting source it belongs to (`--setting-sources` chooses which are read):
    /// the user's, the project's, or `CLAUDE.local.md`, the local one.
    /// How Claude Code names its kind (`memoryFiles[].type`).
    pub fn kind(&self) -> &'static str {
        use crate::settings::Source;
        match self.source() {
            Source::User => "User",
            Source::Local => "Local",
            _ => "Project",
        }
    }

    pub fn source(&self) -> crate::settings::Source {
        use crate::settings::Source;
        match self {
            Self::User(_) => Source::User,
            Self::Workspace(rel) if rel == Path::new("CLAUDE.local.md") => Source::Local,
            Self::Workspace(_) => Source::Project,
        }
    }
}

/// The workspace's own memory files, in the order they are read.
const WORKSPACE_MEMORY: [&str; 3] = ["CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md"];

/// A memory file larger than this is almost certainly not meant as instructions.
const MEMORY_MAX: u64 = 64 * 1024;

/// The memory files that apply to `workspace` (canonical), outermost first: the user's
/// own, then the workspace's CLAUDE.md, .claude/CLAUDE.md and CLAUDE.local.md.
///
/// Directories above the workspace are not read: another local user may write
/// `/tmp/CLAUDE.md` or `/home/CLAUDE.md`, and what they say must not become the model's
/// instructions. Entries are listed when anything (a link included) is there; what may
/// be read is decided by [`memory_text`], which warns about what it refuses.
pub fn memory_files(workspace: &Path, user_home: Option<&Path>) -> Vec<MemoryFile> {
    let mut found = Vec::new();
    if let Some(home) = user_home {
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        for candidate in [
            home.join(".claude/CLAUDE.md"),
            home.join(".cordon/CLAUDE.md"),
        ] {
            // A user file inside the workspace (a workspace of `~/.claude`) is the
            // workspace's: the sandbox could have replaced it with a link.
            let file = match candidate.strip_prefix(workspace) {
                Ok(rel) => MemoryFile::Workspace(rel.to_path_buf()),
                Err(_) => MemoryFile::User(candidate.clone()),
            };
            if std::fs::symlink_metadata(&candidate).is_ok() && !found.contains(&file) {
                found.push(file);
            }
        }
    }
    for rel in WORKSPACE_MEMORY {
        let file = MemoryFile::Workspace(PathBuf::from(rel));
        if std::fs::symlink_metadata(workspace.join(rel)).is_ok() && !found.contains(&file) {
            found.push(file);
        }
    }
    found
}

/// The memory files' text as one block, each under a heading naming its path. A file
/// that may not be read (a link, a FIFO, too large) is left out with a warning naming it.
pub fn memory_text(workspace: &Path, files: &[MemoryFile]) -> Option<String> {
    load_memory(workspace, files).text
}

/// The memory a session starts with: the text the model is given, and each file that
/// went into it (what `get_context_usage` lists as `memoryFiles`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    pub text: Option<String>,
    pub files: Vec<LoadedMemory>,
}

/// One memory file that was read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoadedMemory {
    pub path: PathBuf,
    /// Claude Code's name for where it comes from: `User`, `Project` or `Local`.
    pub kind: &'static str,
    /// Its size in the context, estimated (characters / 4).
    pub tokens: u64,
}

/// [`memory_text`], with the files it read.
pub fn load_memory(workspace: &Path, files: &[MemoryFile]) -> Memory {
    let beneath = match sandbox_agent::beneath::WorkspaceReader::open(workspace) {
        Ok(ws) => Some(ws),
        Err(e) => {
            tracing::warn!("memory files of the workspace not read: {e}");
            None
        }
    };
    let mut out = String::new();
    let mut loaded = Vec::new();
    for file in files {
        let (shown, text) = match file {
            MemoryFile::User(path) => (
                path.clone(),
                sandbox_agent::beneath::read_own_file(path, MEMORY_MAX),
            ),
            MemoryFile::Workspace(rel) => match &beneath {
                Some(ws) => (workspace.join(rel), ws.read_text(rel, MEMORY_MAX)),
                None => continue,
            },
        };
        match text {
            Ok(Some(text)) => {
                let block = format!(
                    "Contents of {} (project instructions):\n\n{}\n\n",
                    shown.display(),
                    text.trim()
                );
                loaded.push(LoadedMemory {
                    path: shown,
                    kind: file.kind(),
                    tokens: block.len() as u64 / crate::agent::compact::CHARS_PER_TOKEN,
                });
                out.push_str(&block);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("memory file not read: {e}"),
        }
    }
    Memory {
        text: (!out.is_empty()).then_some(out),
        files: loaded,
    }
}

/// Environment facts the model needs to act sensibly.
pub fn environment(cwd: &Path, today: &str) -> String {
    let git = git_summary(cwd);
    let mut env = format!(
        "<env>\nWorking directory: {}\nPlatform: {}\nToday's date: {}\nIs a git repository: {}\n",
        cwd.display(),
        std::env::consts::OS,
        today,
        git.is_some()
    );
    if let Some((branch, status)) = git {
        env.push_str(&format!("Git branch: {branch}\nGit status:\n{status}\n"));
    }
    env.push_str("</env>");
    env
}

fn git_summary(cwd: &Path) -> Option<(String, String)> {
    // Git on a large tree may work a while: on every CPU, not the session thread's pin.
    sandbox_agent::affinity::with_every_cpu(|| git_summary_of(cwd))
}

fn git_summary_of(cwd: &Path) -> Option<(String, String)> {
    // The repository is untrusted (a session or a downloaded archive may have written its
    // control files): read it only through the hardened helper, which never lets git see
    // the repository's own configuration, hooks or attributes.
    let repo = crate::hostgit::WorkspaceRepo::open(cwd)
        .map_err(|e| tracing::debug!(error = %e, "no git summary"))
        .ok()?;
    let branch = repo.output(cwd, &["rev-parse", "--abbrev-ref", "HEAD"])?;
    let mut status = repo
        .output(cwd, &["status", "--short", "--ignore-submodules=all"])
        .unwrap_or_default();
    if status.len() > 2000 {
        status.truncate(status.char_indices().take_while(|(i, _)| *i < 2000).count());
        status.push_str("\n... (truncated)");
    }
    Some((
        branch,
        if status.is_empty() {
            "(clean)".to_string()
        } else {
            status
        },
    ))
}

/// The system blocks of every request: our prompt and the environment, the caller's
/// addition, then the memory files. The last block carries a cache breakpoint: this
/// prefix is stable across turns.
///
/// As with Claude Code driven by the Agent SDK: a caller's prompt replaces ours and the
/// environment (only what it gives is sent); an empty one (the SDK's "none set") is the
/// minimal prompt, the environment alone; no `--system-prompt` at all (the SDK's preset)
/// is ours.
pub fn system_blocks(
    cwd: &Path,
    memory: Option<&str>,
    today: &str,
    options: &crate::agent::LoopOptions,
) -> Vec<SystemBlock> {
    let mut blocks = match &options.system_prompt {
        Some(minimal) if minimal.is_empty() => vec![SystemBlock::text(environment(cwd, today))],
        Some(replacement) => vec![SystemBlock::text(replacement.clone())],
        None => vec![
            SystemBlock::text(SYSTEM_PROMPT),
            SystemBlock::text(environment(cwd, today)),
        ],
    };
    if let Some(extra) = &options.append_system_prompt {
        blocks.push(SystemBlock::text(extra.clone()));
    }
    if options.json_schema.is_some() {
        blocks.push(SystemBlock::text(crate::agent::structured::INSTRUCTION));
    }
    if let Some(memory) = memory {
        blocks.push(SystemBlock::text(memory));
    }
    if let Some(SystemBlock::Text { cache_control, .. }) = blocks.last_mut() {
        *cache_control = Some(CacheControl::ephemeral());
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_files_are_the_users_then_the_workspaces() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let home = root.join("home");
        let project = root.join("a/b");
        std::fs::create_dir_all(project.join(".claude")).unwrap();
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::write(home.join(".claude/CLAUDE.md"), "mine").unwrap();
        std::fs::write(root.join("a/CLAUDE.md"), "outer, someone else's").unwrap();
        std::fs::write(project.join("CLAUDE.md"), "inner").unwrap();
        std::fs::write(project.join(".claude/CLAUDE.md"), "inner dot").unwrap();
        std::fs::write(project.join("CLAUDE.local.md"), "local").unwrap();
        let files = memory_files(&project, Some(&home));
        assert_eq!(
            files,
            vec![
                MemoryFile::User(home.join(".claude/CLAUDE.md")),
                MemoryFile::Workspace("CLAUDE.md".into()),
                MemoryFile::Workspace(".claude/CLAUDE.md".into()),
                MemoryFile::Workspace("CLAUDE.local.md".into()),
            ]
        );
        let text = memory_text(&project, &files).unwrap();
        assert!(
            !text.contains("outer"),
            "directories above the workspace are not read"
        );
        let order: Vec<usize> = ["mine", "inner", "inner dot", "local"]
            .iter()
            .map(|t| text.find(t).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    }

    #[test]
    fn linked_memory_files_are_left_out() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let project = root.join("ws");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(root.join("secret"), "SECRET-KEY").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), project.join("CLAUDE.md")).unwrap();
        std::os::unix::fs::symlink("/proc/self/environ", project.join("CLAUDE.local.md")).unwrap();
        std::os::unix::fs::symlink(&root, project.join(".claude")).unwrap();
        std::fs::write(root.join("CLAUDE.md"), "SECRET-KEY").unwrap();
        let files = memory_files(&project, None);
        assert_eq!(files.len(), 3, "links are listed, to be refused: {files:?}");
        assert_eq!(memory_text(&project, &files), None);
    }

    #[test]
    fn a_user_file_inside_the_workspace_is_read_as_the_workspaces() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let project = home.join(".claude");
        std::fs::create_dir_all(&project).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", project.join("CLAUDE.md")).unwrap();
        let files = memory_files(&project, Some(&home));
        assert_eq!(files, vec![MemoryFile::Workspace("CLAUDE.md".into())]);
        assert_eq!(memory_text(&project, &files), None);
    }

    #[test]
    fn system_prefix_ends_with_a_cache_breakpoint() {
        let none = crate::agent::LoopOptions::default();
        let blocks = system_blocks(Path::new("/nonexistent"), Some("mem"), "2026-11-29", &none);
        assert_eq!(blocks.len(), 3);
        let SystemBlock::Text {
            cache_control,
            text,
        } = &blocks[2];
        assert!(cache_control.is_some());
        assert_eq!(text, "mem");
        let SystemBlock::Text { text, .. } = &blocks[1];
        assert!(text.contains("Today's date: 2026-11-29"));
    }

    #[test]
    fn the_callers_prompt_replaces_ours_and_its_addition_follows() {
        let texts = |options: &crate::agent::LoopOptions| -> Vec<String> {
            system_blocks(
                Path::new("/nonexistent"),
                Some("mem"),
                "2026-11-29",
                options,
            )
            .into_iter()
            .map(|SystemBlock::Text { text, .. }| text)
            .collect()
        };
        let mut options = crate::agent::LoopOptions {
            append_system_prompt: Some("Answer in French.".into()),
            ..Default::default()
        };
        let appended = texts(&options);
        assert_eq!(appended[0], SYSTEM_PROMPT);
        assert_eq!(appended[2], "Answer in French.");
        assert_eq!(appended[3], "mem");
        options.system_prompt = Some("You are a pirate.".into());
        assert_eq!(
            texts(&options),
            ["You are a pirate.", "Answer in French.", "mem"]
        );
        // The SDK passes `--system-prompt ""` for "none given": the minimal prompt.
        options.system_prompt = Some(String::new());
        options.append_system_prompt = None;
        let minimal = texts(&options);
        assert_eq!(minimal.len(), 2);
        assert!(minimal[0].starts_with("<env>"), "{minimal:?}");
    }
}
