//! Edit: replace an exact string in a text file. Every check (match, uniqueness, digest)
//! runs before anything is written; a failed edit writes nothing, and a successful one is
//! written atomically like Write.

use std::io::Read;
use std::path::Path;

use super::write::replace_atomically;
use super::{Resolver, check_single_link, io_err, mtime_ns, numbered, open_regular, sha256_hex};
use crate::error::{AgentError, ErrorCode};
use crate::limits::{MAX_EDIT_FILE_BYTES, MAX_EDIT_STRING_BYTES, MAX_READ_LINE_CHARS};
use crate::proto::{EditRequest, EditResponse};

/// Lines shown before and after the replaced text in the snippet.
const SNIPPET_CONTEXT: usize = 4;

/// Replaces `old_string` with `new_string` in `req.path`; writes nothing on failure.
pub fn edit(resolver: &Resolver, req: &EditRequest) -> Result<EditResponse, AgentError> {
    let path = Path::new(&req.path);
    check_strings(req)?;
    let entry = resolver.entry(path)?;
    let (file, stat) = open_regular(&entry, path)?;
    check_single_link(&stat, path)?;
    let bytes = read_bounded(file, path)?;
    if !req.expected_sha256.is_empty()
        && !sha256_hex(&bytes).eq_ignore_ascii_case(&req.expected_sha256)
    {
        let msg = format!(
            "{}: file changed since it was last read; read it again",
            req.path
        );
        return Err(AgentError::invalid(msg).with_path(req.path.clone()));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        let msg = format!(
            "{}: not UTF-8 text; Edit works on text files only",
            req.path
        );
        AgentError::invalid(msg).with_path(req.path.clone())
    })?;
    let (new_text, count, first) = replace(&text, req)?;
    if new_text.len() as u64 > MAX_EDIT_FILE_BYTES {
        let msg = format!(
            "{}: the edited file would exceed {MAX_EDIT_FILE_BYTES} bytes",
            req.path
        );
        return Err(AgentError::new(ErrorCode::TooLarge, msg).with_path(req.path.clone()));
    }
    // Why `& 0o777`: the rewritten file keeps its permissions but never setuid/setgid.
    let new_stat = replace_atomically(
        &entry,
        path,
        new_text.as_bytes(),
        Some(stat.st_mode & 0o777),
    )?;
    Ok(EditResponse {
        replacements: count as u64,
        mtime_ns: mtime_ns(&new_stat),
        sha256: sha256_hex(new_text.as_bytes()),
        snippet: snippet(&new_text, first, &req.new_string),
    })
}

fn check_strings(req: &EditRequest) -> Result<(), AgentError> {
    let with_path = |e: AgentError| e.with_path(req.path.clone());
    if req.old_string.is_empty() {
        return Err(with_path(AgentError::invalid(
            "old_string is empty; give the exact text to replace (use Write to create a file)",
        )));
    }
    let longest = req.old_string.len().max(req.new_string.len());
    if longest > MAX_EDIT_STRING_BYTES {
        let msg =
            format!("old_string and new_string may be at most {MAX_EDIT_STRING_BYTES} bytes each");
        return Err(with_path(AgentError::new(ErrorCode::TooLarge, msg)));
    }
    if req.old_string == req.new_string {
        let msg = "old_string and new_string are identical; nothing would change";
        return Err(with_path(AgentError::new(ErrorCode::EditNoChange, msg)));
    }
    Ok(())
}

fn read_bounded(file: std::fs::File, path: &Path) -> Result<Vec<u8>, AgentError> {
    let mut bytes = Vec::new();
    file.take(MAX_EDIT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(&e, path))?;
    if bytes.len() as u64 > MAX_EDIT_FILE_BYTES {
        let msg = format!(
            "{}: file is larger than {MAX_EDIT_FILE_BYTES} bytes; Edit cannot load it",
            path.display()
        );
        return Err(AgentError::new(ErrorCode::TooLarge, msg).with_path(path.display().to_string()));
    }
    Ok(bytes)
}

/// The new text, the number of replacements and the byte offset of the first one.
fn replace(text: &str, req: &EditRequest) -> Result<(String, usize, usize), AgentError> {
    let old = req.old_string.as_str();
    let count = text.matches(old).count();
    let Some(first) = text.find(old) else {
        return Err(no_match(text, req));
    };
    if count > 1 && !req.replace_all {
        let msg = format!(
            "{}: old_string matches {count} times; add surrounding lines to make it unique, \
             or set replace_all to replace every occurrence",
            req.path
        );
        return Err(AgentError::new(ErrorCode::EditAmbiguous, msg).with_path(req.path.clone()));
    }
    let new_text = if req.replace_all {
        text.replace(old, &req.new_string)
    } else {
        text.replacen(old, &req.new_string, 1)
    };
    Ok((new_text, count, first))
}

fn no_match(text: &str, req: &EditRequest) -> AgentError {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let hint = if squash(text).contains(&squash(&req.old_string)) {
        " (it would match if whitespace were ignored: check indentation, tabs versus spaces \
         and line endings)"
    } else {
        "; read the file again and copy the text exactly"
    };
    let msg = format!("{}: old_string was not found in the file{hint}", req.path);
    AgentError::new(ErrorCode::EditNoMatch, msg).with_path(req.path.clone())
}

/// Numbered lines around the replacement that starts at byte `first` of `text`.
fn snippet(text: &str, first: usize, new_string: &str) -> String {
    let line = text[..first].matches('\n').count();
    let span = new_string.trim_end_matches('\n').matches('\n').count();
    let start = line.saturating_sub(SNIPPET_CONTEXT);
    let end = line + span + SNIPPET_CONTEXT + 1;
    let mut out = String::new();
    for (i, l) in text.lines().enumerate().take(end).skip(start) {
        let cut: String = l.chars().take(MAX_READ_LINE_CHARS).collect();
        numbered(&mut out, i as u64 + 1, &cut);
    }
    out
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
