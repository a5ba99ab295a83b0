//! `policies/toolchains.json`, parsed once; unknown fields are refused and every entry
//! must say why it exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use serde::Deserialize;

const TEXT: &str = include_str!("../../../policies/toolchains.json");

static POLICY: LazyLock<Result<Policy, String>> = LazyLock::new(|| Policy::parse(TEXT));

/// The shipped policy (compiled in, checked by a unit test). Should it ever fail to parse,
/// callers show nothing of the home: failing closed.
pub fn policy() -> Result<&'static Policy, String> {
    POLICY
        .as_ref()
        .map_err(|e| format!("policies/toolchains.json: {e}"))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub version: u32,
    pub why: String,
    pub roots: Vec<Root>,
    pub secrets: Vec<Secret>,
    pub caches: Vec<Cache>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Root {
    /// `~/...`: under the user's home.
    pub path: String,
    /// Variables set when the root is shown; `{path}` is its absolute path.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Directories inside the root that its tool writes while it runs (a version
    /// manager's shims): each gets a writable layer of the session's own.
    #[serde(default)]
    pub scratch: Vec<Scratch>,
    pub why: String,
}

/// A directory inside a read-only root that a session may change for itself: an overlay
/// over the host's directory whose upper layer lives and dies with the sandbox.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scratch {
    /// Relative to the root.
    pub path: String,
    pub why: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Secret {
    pub path: String,
    pub why: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cache {
    /// Directory name under `$CORDON_HOME/caches/`.
    pub name: String,
    /// Variables pointed at it.
    pub env: Vec<String>,
    /// The host's own caches shown beneath it, read-only (overlay lower layers).
    #[serde(default)]
    pub seeds: Vec<Seed>,
    pub why: String,
}

/// One host cache shown read-only beneath a part of Cordon's cache.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    /// `~/...`: the host's cache directory.
    pub from: String,
    /// Where under the Cordon cache it appears: a relative path, `""` for the cache itself.
    pub into: String,
}

impl Policy {
    pub fn parse(text: &str) -> Result<Self, String> {
        let p: Policy = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if p.version != 1 {
            return Err(format!("unknown version {}", p.version));
        }
        let whys = p
            .roots
            .iter()
            .map(|r| (&r.path, &r.why))
            .chain(p.secrets.iter().map(|s| (&s.path, &s.why)))
            .chain(
                p.roots
                    .iter()
                    .flat_map(|r| r.scratch.iter().map(|s| (&s.path, &s.why))),
            )
            .chain(p.caches.iter().map(|c| (&c.name, &c.why)));
        for (what, why) in whys {
            if why.trim().is_empty() {
                return Err(format!("{what}: every entry must say why"));
            }
        }
        for path in p
            .roots
            .iter()
            .map(|r| &r.path)
            .chain(p.secrets.iter().map(|s| &s.path))
        {
            if !path.starts_with("~/") || path.split('/').any(|c| c == ".." || c == ".") {
                return Err(format!("{path}: entries are ~/relative, without . or .."));
            }
        }
        for r in &p.roots {
            for s in &r.scratch {
                if !plain_relative(&s.path) {
                    return Err(format!(
                        "root {} scratch {:?}: a plain relative path",
                        r.path, s.path
                    ));
                }
            }
        }
        for c in &p.caches {
            for seed in &c.seeds {
                let relative = seed.into.is_empty() || plain_relative(&seed.into);
                if !seed.from.starts_with("~/")
                    || seed.from.split('/').any(|c| c == ".." || c == ".")
                    || !relative
                {
                    return Err(format!(
                        "cache {} seed {:?} -> {:?}: from is ~/relative, into a plain relative path",
                        c.name, seed.from, seed.into
                    ));
                }
            }
            if c.name.is_empty()
                || !c
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Err(format!("cache name {:?} must be [A-Za-z0-9-]+", c.name));
            }
        }
        Ok(p)
    }
}

/// `a/b`: not empty, not absolute, no `.` or `..` parts.
fn plain_relative(path: &str) -> bool {
    path.split('/')
        .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// `~/x` under `home`; anything else as it is.
pub fn expand(path: &str, home: &Path) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None if path == "~" => home.to_path_buf(),
        None => PathBuf::from(path),
    }
}
