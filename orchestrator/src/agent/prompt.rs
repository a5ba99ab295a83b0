//! What the model is told before the conversation: our system prompt, the environment
//! (cwd, platform, date, git branch and status) and the CLAUDE.md memory files (the user's,
//! then each directory from the filesystem root down to the working directory).

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

/// The memory files that apply to `cwd`, outermost first: the user's own, then CLAUDE.md
/// and .claude/CLAUDE.md from the root down to `cwd`.
pub fn memory_files(cwd: &Path, user_home: Option<&Path>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Some(home) = user_home {
        for candidate in [
            home.join(".claude/CLAUDE.md"),
            home.join(".cordon/CLAUDE.md"),
        ] {
            if candidate.is_file() {
                found.push(candidate);
            }
        }
    }
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    for dir in dirs {
        for candidate in [dir.join("CLAUDE.md"), dir.join(".claude/CLAUDE.md")] {
            if candidate.is_file() && !found.contains(&candidate) {
                found.push(candidate);
            }
        }
    }
    found
}

/// The memory files' text as one block, each under a heading naming its path.
pub fn memory_text(files: &[PathBuf]) -> Option<String> {
    let mut out = String::new();
    for file in files {
        // A memory file larger than this is almost certainly not meant as instructions.
        const MAX: u64 = 64 * 1024;
        let Ok(meta) = std::fs::metadata(file) else {
            continue;
        };
        if meta.len() > MAX {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(file) {
            out.push_str(&format!(
                "Contents of {} (project instructions):\n\n{}\n\n",
                file.display(),
                text.trim()
            ));
        }
    }
    (!out.is_empty()).then_some(out)
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

/// The system blocks of every request: our prompt and the environment, then the memory
/// files. The last block carries a cache breakpoint: this prefix is stable across turns.
pub fn system_blocks(cwd: &Path, memory: Option<&str>, today: &str) -> Vec<SystemBlock> {
    let mut blocks = vec![
        SystemBlock::text(SYSTEM_PROMPT),
        SystemBlock::text(environment(cwd, today)),
    ];
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
    fn memory_files_are_found_outermost_first() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("a/b");
        std::fs::create_dir_all(project.join(".claude")).unwrap();
        std::fs::write(root.path().join("a/CLAUDE.md"), "outer").unwrap();
        std::fs::write(project.join("CLAUDE.md"), "inner").unwrap();
        std::fs::write(project.join(".claude/CLAUDE.md"), "inner dot").unwrap();
        let files = memory_files(&project, None);
        let names: Vec<String> = files
            .iter()
            .map(|f| f.strip_prefix(root.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            vec!["a/CLAUDE.md", "a/b/CLAUDE.md", "a/b/.claude/CLAUDE.md"]
        );
        let text = memory_text(&files).unwrap();
        assert!(text.find("outer").unwrap() < text.find("inner").unwrap());
    }

    #[test]
    fn system_prefix_ends_with_a_cache_breakpoint() {
        let blocks = system_blocks(Path::new("/nonexistent"), Some("mem"), "2026-11-29");
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
}
