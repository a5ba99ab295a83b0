//! Path rules for Read / Edit / Write: gitignore-style patterns with anchors.
//!
//! | specifier        | base directory                                        |
//! |------------------|-------------------------------------------------------|
//! | `//abs/path`     | the filesystem root                                   |
//! | `~/path`         | the home directory                                    |
//! | `/path`          | the project root of the settings file with the rule   |
//! | `./path`, `path` | the working directory                                 |
//!
//! Within the base, `*` matches within one path segment, `?` one character, `[...]` a class,
//! `**` any number of segments. A pattern without a slash (`*.env`, bare) matches at any
//! depth, like gitignore; `./x` is anchored at the working directory. A pattern that matches
//! a directory matches everything beneath it; a trailing `/` matches directories' contents
//! only.
//!
//! Symlinks: [`candidates`] gives the path as written (lexically cleaned) and, when it
//! differs, where it really leads on the host (`canonicalize` of the deepest existing
//! ancestor). The engine denies when any candidate matches a deny rule and allows only when
//! every candidate matches an allow rule.

use std::path::{Component, Path, PathBuf};

/// Where relative anchors resolve.
#[derive(Debug, Clone)]
pub struct Anchors {
    /// The working directory (`./` and bare patterns).
    pub cwd: PathBuf,
    /// The home directory (`~/`); `None` when unknown (such rules then never match).
    pub home: Option<PathBuf>,
    /// The project root of the settings file that defined the rule (`/`).
    pub root: PathBuf,
}

/// A compiled path pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    /// Absolute directory the pattern is relative to.
    pub base: PathBuf,
    /// Segments of the pattern relative to `base` (a leading `**` when unanchored).
    pub segments: Vec<String>,
    /// The specifier as written.
    pub text: String,
}

impl PathPattern {
    /// Compiles `spec`; `None` when it needs a home directory that is unknown.
    pub fn compile(spec: &str, anchors: &Anchors) -> Option<PathPattern> {
        let (base, rest, anchored) = if let Some(rest) = spec.strip_prefix("//") {
            (PathBuf::from("/"), rest, true)
        } else if let Some(rest) = spec.strip_prefix("~/") {
            (anchors.home.clone()?, rest, true)
        } else if spec == "~" {
            (anchors.home.clone()?, "**", true)
        } else if let Some(rest) = spec.strip_prefix('/') {
            (anchors.root.clone(), rest, true)
        } else if let Some(rest) = spec.strip_prefix("./") {
            (anchors.cwd.clone(), rest, true)
        } else {
            (anchors.cwd.clone(), spec, false)
        };
        let mut rest = rest.to_string();
        if rest.ends_with('/') {
            rest.push_str("**");
        }
        let mut segments: Vec<String> = rest
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .map(str::to_string)
            .collect();
        // gitignore: a pattern with no inner slash matches at any depth.
        if !anchored && segments.len() == 1 {
            segments.insert(0, "**".into());
        }
        if segments.is_empty() {
            segments.push("**".into());
        }
        Some(PathPattern {
            base: clean(&base),
            segments,
            text: spec.to_string(),
        })
    }

    /// Whether the absolute, clean `path` matches (or lies beneath a match).
    pub fn matches(&self, path: &Path) -> bool {
        let Ok(rel) = path.strip_prefix(&self.base) else {
            return false;
        };
        let parts: Vec<String> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        // The path itself or any of its ancestors below the base.
        (1..=parts.len()).any(|n| match_segments(&self.segments, &parts[..n]))
            || (parts.is_empty() && self.segments.iter().all(|s| s == "**"))
    }

    /// The single path it names, when it has no wildcard (for binding in the kernel).
    pub fn literal_path(&self) -> Option<PathBuf> {
        if self.segments.iter().any(|s| s.contains(['*', '?', '['])) {
            return None;
        }
        Some(
            self.segments
                .iter()
                .fold(self.base.clone(), |p, s| p.join(s)),
        )
    }
}

fn match_segments(pat: &[String], parts: &[String]) -> bool {
    match pat.split_first() {
        None => parts.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=parts.len()).any(|skip| match_segments(rest, &parts[skip..]))
        }
        Some((first, rest)) => match parts.split_first() {
            Some((p, prest)) => segment_matches(first, p) && match_segments(rest, prest),
            None => false,
        },
    }
}

/// One segment: `*`, `?`, `[abc]`, `[!a-z]`, literal otherwise.
fn segment_matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    seg(&p, &t)
}

fn seg(p: &[char], t: &[char]) -> bool {
    match p.first() {
        None => t.is_empty(),
        Some('*') => (0..=t.len()).any(|i| seg(&p[1..], &t[i..])),
        Some('?') => !t.is_empty() && seg(&p[1..], &t[1..]),
        Some('[') => {
            let Some(close) = p.iter().skip(1).position(|&c| c == ']').map(|i| i + 1) else {
                return t.first() == Some(&'[') && seg(&p[1..], &t[1..]);
            };
            let Some(&c) = t.first() else { return false };
            let class = &p[1..close];
            let (negate, class) = match class.first() {
                Some('!' | '^') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == '-' {
                    hit |= class[i] <= c && c <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == c;
                    i += 1;
                }
            }
            hit != negate && seg(&p[close + 1..], &t[1..])
        }
        Some(&c) => t.first() == Some(&c) && seg(&p[1..], &t[1..]),
    }
}

/// Makes `path` absolute against `cwd` and removes `.` and `..` lexically.
pub fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    if path.is_absolute() {
        clean(path)
    } else {
        clean(&cwd.join(path))
    }
}

/// Lexical clean-up: `.` goes, `..` pops (never above the root).
pub fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The path as written and, if different, where it resolves on the host. A path that does
/// not exist yet resolves through its deepest existing ancestor.
pub fn candidates(path: &Path) -> Vec<PathBuf> {
    let lexical = clean(path);
    let mut out = vec![lexical.clone()];
    if let Some(real) = resolve(&lexical).filter(|r| *r != lexical) {
        out.push(real);
    }
    out
}

fn resolve(path: &Path) -> Option<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut tail = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut out = real;
            for part in tail.iter().rev() {
                out.push(part);
            }
            return Some(out);
        }
        let name = existing.file_name()?.to_os_string();
        tail.push(name);
        if !existing.pop() {
            return None;
        }
    }
}

/// `~/x` with the home directory; `~user` is left alone (the caller treats it as unknown).
pub fn expand_home(path: &str, home: Option<&Path>) -> Option<PathBuf> {
    if path == "~" {
        return home.map(Path::to_path_buf);
    }
    if let Some(rest) = path.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    if path.starts_with('~') {
        return None;
    }
    Some(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchors() -> Anchors {
        Anchors {
            cwd: "/ws/sub".into(),
            home: Some("/home/u".into()),
            root: "/ws".into(),
        }
    }

    fn m(spec: &str, path: &str) -> bool {
        PathPattern::compile(spec, &anchors())
            .unwrap()
            .matches(Path::new(path))
    }

    #[test]
    fn anchors_resolve() {
        assert!(m("//etc/passwd", "/etc/passwd"));
        assert!(!m("//etc/passwd", "/ws/etc/passwd"));
        assert!(m("~/.ssh/**", "/home/u/.ssh/id_rsa"));
        assert!(m("/src/**", "/ws/src/a/b.rs"));
        assert!(!m("/src/**", "/ws/sub/src/a.rs"));
        assert!(m("./.env", "/ws/sub/.env"));
        assert!(!m("./.env", "/ws/sub/x/.env"));
        assert!(m(".env", "/ws/sub/x/.env"));
        assert!(!m(".env", "/ws/.env"));
        assert!(m("*.pem", "/ws/sub/a/b/key.pem"));
    }

    #[test]
    fn globs_and_directories() {
        assert!(m("src/*.rs", "/ws/sub/src/a.rs"));
        assert!(!m("src/*.rs", "/ws/sub/src/a/b.rs"));
        assert!(m("src/**/*.rs", "/ws/sub/src/a/b.rs"));
        assert!(m("src/**", "/ws/sub/src"));
        assert!(m("secrets", "/ws/sub/secrets/deep/file"));
        assert!(m("build/", "/ws/sub/build/x"));
        assert!(m("file[0-9].txt", "/ws/sub/file3.txt"));
        assert!(!m("file[!0-9].txt", "/ws/sub/file3.txt"));
        assert!(m("f?le", "/ws/sub/file"));
    }

    #[test]
    fn literal_paths_for_the_kernel() {
        let p = PathPattern::compile("./.env", &anchors()).unwrap();
        assert_eq!(p.literal_path(), Some(PathBuf::from("/ws/sub/.env")));
        let p = PathPattern::compile("./*.env", &anchors()).unwrap();
        assert_eq!(p.literal_path(), None);
    }

    #[test]
    fn cleaning_and_symlinks() {
        assert_eq!(clean(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(clean(Path::new("/../..")), PathBuf::from("/"));
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("secret")).unwrap();
        std::os::unix::fs::symlink(real.join("secret"), real.join("link")).unwrap();
        let c = candidates(&real.join("link/new.txt"));
        assert_eq!(
            c,
            vec![real.join("link/new.txt"), real.join("secret/new.txt")]
        );
    }
}
