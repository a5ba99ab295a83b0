//! Grep: ripgrep's regex engine and searcher over the files beneath the search path.
//!
//! Output modes: `files_with_matches` (default; paths, newest first), `content`
//! (`path:line:text`, context lines as `path-line-text`, `--` between groups) and `count`
//! (`path:count`, counting matching lines). `head_limit` caps output lines, files or
//! counts; the output is also capped at MAX_GREP_OUTPUT_BYTES. Either cap sets
//! `truncated`; in content mode the search stops there, so `matches` and `matched_files`
//! count what was searched up to that point. Binary files (a NUL byte) are skipped.

use std::fs::File;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::types::{Types, TypesBuilder};

use super::{Base, base, mtime, newest_first, walker};
use crate::error::{AgentError, ErrorCode};
use crate::fsops::Resolver;
use crate::limits::MAX_PATTERN_BYTES;
use crate::proto::grep_request::OutputMode;
use crate::proto::{GrepRequest, GrepResponse};

use super::output::{FileSink, Output};

/// Searches the files beneath `req.path` (or `cwd`) for `req.pattern`.
pub fn grep(
    resolver: &Resolver,
    cwd: &Path,
    req: &GrepRequest,
) -> Result<GrepResponse, AgentError> {
    if req.pattern.len() > MAX_PATTERN_BYTES {
        let msg = format!("pattern is longer than {MAX_PATTERN_BYTES} bytes");
        return Err(AgentError::new(ErrorCode::TooLarge, msg));
    }
    let mode = OutputMode::try_from(req.output_mode).unwrap_or(OutputMode::FilesWithMatches);
    let matcher = build_matcher(req)?;
    let filter = build_filter(&req.glob)?;
    let types = build_types(&req.file_type)?;
    let base = base(resolver, cwd, &req.path)?;
    let files = candidates(&base, types, filter.as_ref());
    let mut searcher = build_searcher(req, mode);
    let mut out = Output::new(req.head_limit);
    let mut matched = Vec::new();
    let (mut matches, mut matched_files) = (0u64, 0u64);
    for path in files {
        let Some(file) = open_beneath(resolver, &path) else {
            continue;
        };
        let shown = path.display().to_string();
        let mut sink = FileSink::new(&shown, mode, req.line_numbers, &mut out);
        if searcher.search_file(&matcher, &file, &mut sink).is_err() {
            continue;
        }
        let count = sink.matches();
        if count == 0 {
            continue;
        }
        matches += count;
        matched_files += 1;
        match mode {
            OutputMode::Content => {}
            OutputMode::Count => {
                out.push(&format!("{shown}:{count}"));
            }
            _ => matched.push((mtime(&path), path)),
        }
        if out.truncated() && mode != OutputMode::FilesWithMatches {
            break;
        }
    }
    newest_first(&mut matched);
    for (_, path) in &matched {
        out.push(&path.display().to_string());
    }
    let truncated = out.truncated();
    Ok(GrepResponse {
        output: out.into_text(),
        matched_files,
        matches,
        truncated,
    })
}

fn build_matcher(req: &GrepRequest) -> Result<RegexMatcher, AgentError> {
    let mut builder = RegexMatcherBuilder::new();
    builder
        .case_insensitive(req.case_insensitive)
        .multi_line(true)
        .dot_matches_new_line(req.multiline);
    if !req.multiline {
        // Line-at-a-time search; a pattern that could match `\n` is refused with a hint.
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(&req.pattern).map_err(|e| {
        let hint = if req.multiline {
            ""
        } else {
            " (set multiline to match across lines)"
        };
        let msg = format!("invalid regular expression: {e}{hint}");
        AgentError::new(ErrorCode::BadPattern, msg)
    })
}

fn build_searcher(req: &GrepRequest, mode: OutputMode) -> Searcher {
    let context = mode == OutputMode::Content;
    let before = if context { req.before_context } else { 0 };
    let after = if context { req.after_context } else { 0 };
    SearcherBuilder::new()
        .line_number(true)
        .multi_line(req.multiline)
        .binary_detection(BinaryDetection::quit(0))
        .before_context(before as usize)
        .after_context(after as usize)
        .build()
}

/// The glob filter, matched against a file's name and its path below the search root.
fn build_filter(glob: &str) -> Result<Option<GlobMatcher>, AgentError> {
    if glob.is_empty() {
        return Ok(None);
    }
    let built = GlobBuilder::new(glob).literal_separator(true).build();
    let glob = built
        .map_err(|e| AgentError::new(ErrorCode::BadPattern, format!("invalid glob filter: {e}")))?;
    Ok(Some(glob.compile_matcher()))
}

fn build_types(name: &str) -> Result<Option<Types>, AgentError> {
    if name.is_empty() {
        return Ok(None);
    }
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    builder.select(name);
    builder.build().map(Some).map_err(|_| {
        let msg = format!(
            "unknown file type '{name}'; use a ripgrep type name such as rust, py, js, ts, go"
        );
        AgentError::new(ErrorCode::BadPattern, msg)
    })
}

/// The files to search: the base itself when it is a file (filters do not apply, as in
/// ripgrep), otherwise the regular files the walk yields that pass the filters.
fn candidates(base: &Base, types: Option<Types>, filter: Option<&GlobMatcher>) -> Vec<PathBuf> {
    if !base.is_dir {
        return vec![base.path.clone()];
    }
    let mut builder = walker(&base.path);
    if let Some(types) = types {
        builder.types(types);
    }
    let mut files = Vec::new();
    for entry in builder.build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(&base.path)
            .unwrap_or(entry.path());
        let name_ok = |g: &GlobMatcher| g.is_match(entry.file_name()) || g.is_match(rel);
        if filter.is_none_or(name_ok) {
            files.push(entry.into_path());
        }
    }
    files
}

/// Opens a file to search beneath its root, without blocking and only if it is a regular
/// file; anything else (gone, a link out, a FIFO) is skipped. A link that stays inside the
/// root is followed (the search path itself may be one).
fn open_beneath(resolver: &Resolver, path: &Path) -> Option<File> {
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
    let fd = resolver.open(path, flags).ok()?;
    let stat = nix::sys::stat::fstat(&fd).ok()?;
    (stat.st_mode & libc::S_IFMT == libc::S_IFREG).then(|| File::from(fd))
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;
