//! Glob: regular files whose path, relative to the search directory, matches a glob
//! pattern (globset syntax; `*` stops at `/`, `**` crosses directories). An absolute
//! pattern is allowed when its literal leading directories are beneath a root: they become
//! the search directory. Results are absolute paths, most recently modified first.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

use super::{base, mtime, newest_first, walker};
use crate::error::{AgentError, ErrorCode};
use crate::fsops::Resolver;
use crate::limits::{DEFAULT_GLOB_LIMIT, MAX_PATH_BYTES};
use crate::proto::{GlobRequest, GlobResponse};

/// Regular files matching `req.pattern`, newest first, at most `req.limit`.
pub fn glob(
    resolver: &Resolver,
    cwd: &Path,
    req: &GlobRequest,
) -> Result<GlobResponse, AgentError> {
    if req.pattern.is_empty() {
        return Err(AgentError::invalid("pattern is empty; e.g. \"**/*.rs\""));
    }
    if req.pattern.len() > MAX_PATH_BYTES {
        let msg = format!("pattern is longer than {MAX_PATH_BYTES} bytes");
        return Err(AgentError::new(ErrorCode::TooLarge, msg));
    }
    let (dir, pattern) = split_pattern(&req.pattern, &req.path);
    let base = base(resolver, cwd, &dir)?;
    if !base.is_dir {
        let msg = format!("{} is not a directory", base.path.display());
        return Err(AgentError::invalid(msg).with_path(base.path.display().to_string()));
    }
    let matcher = compile(&pattern)?;
    let mut found = Vec::new();
    for entry in walker(&base.path).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(&base.path)
            .unwrap_or(entry.path());
        if matcher.is_match(rel) {
            found.push((mtime(entry.path()), entry.into_path()));
        }
    }
    newest_first(&mut found);
    let limit = if req.limit == 0 {
        DEFAULT_GLOB_LIMIT
    } else {
        req.limit
    } as usize;
    let truncated = found.len() > limit;
    let paths = found
        .into_iter()
        .take(limit)
        .map(|(_, p)| p.display().to_string())
        .collect();
    Ok(GlobResponse { paths, truncated })
}

fn compile(pattern: &str) -> Result<GlobMatcher, AgentError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| AgentError::new(ErrorCode::BadPattern, format!("invalid glob pattern: {e}")))
}

/// Splits an absolute pattern into its literal leading directories (the search directory)
/// and the rest; a relative pattern searches `path` (empty: the working directory).
fn split_pattern(pattern: &str, path: &str) -> (String, String) {
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    if !pattern.starts_with('/') {
        return (path.to_string(), pattern.to_string());
    }
    let components: Vec<Component> = Path::new(pattern).components().collect();
    let literal = components
        .iter()
        .take_while(|c| !has_meta(c.as_os_str().to_string_lossy().as_ref()))
        .count();
    // A fully literal pattern names one file: search its directory for its name.
    let literal = literal.min(components.len().saturating_sub(1));
    let dir: PathBuf = components[..literal].iter().collect();
    let rest: PathBuf = components[literal..].iter().collect();
    (dir.display().to_string(), rest.display().to_string())
}

fn has_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

#[cfg(test)]
#[path = "glob_tests.rs"]
mod tests;
