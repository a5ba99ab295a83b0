//! From the policy, the host's facts and the settings to what the sandbox shows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sandbox_agent::launch::mounts::SYSTEM_DIRS;

use super::policy::{Policy, expand};
use super::{HostFacts, Toolchains};
use crate::settings::Settings;

/// What the settings add or hide.
#[derive(Debug, Clone, Default)]
pub struct Adjustments {
    /// `sandbox.filesystem.allowRead` from the user, managed and command-line settings.
    pub allow_read: Vec<PathBuf>,
    /// `sandbox.filesystem.denyRead` from any source.
    pub deny_read: Vec<PathBuf>,
}

impl Adjustments {
    /// Reads both keys; a repository's `allowRead` is ignored (it would widen what of the
    /// host a session sees), its `denyRead` counts. Entries are absolute or `~/`.
    pub fn from_settings(settings: &Settings, home: &Path) -> Self {
        let mut out = Self::default();
        for f in settings.files() {
            let Some(fs) = f.value.get("sandbox").and_then(|s| s.get("filesystem")) else {
                continue;
            };
            let list = |key: &str| -> Vec<PathBuf> {
                fs.get(key)
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str())
                    .map(|s| expand(s, home))
                    .filter(|p| p.is_absolute())
                    .collect()
            };
            if !f.source.is_repository() {
                out.allow_read.extend(list("allowRead"));
            }
            out.deny_read.extend(list("denyRead"));
        }
        out
    }
}

/// A candidate root not shown, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub path: PathBuf,
    pub why: String,
}

/// The resolution: what the sandbox gets, and what `cordon doctor` reports.
#[derive(Debug, Clone, Default)]
pub struct Exposure {
    pub toolchains: Toolchains,
    /// Each shown root with the reason it is shown.
    pub shown: Vec<(PathBuf, String)>,
    pub refused: Vec<Refused>,
}

impl Exposure {
    /// Creates Cordon's cache directories (0700, the user's own): each cache, the mount
    /// point of each seeded part, and that part's overlay layers.
    pub fn create_caches(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        let view = &self.toolchains.view;
        let seeded = view
            .seeded
            .iter()
            .flat_map(|s| [s.at.clone(), s.upper(), s.work()]);
        for dir in view.writable.iter().cloned().chain(seeded) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        Ok(())
    }
}

struct Candidate {
    path: PathBuf,
    reason: String,
    env: BTreeMap<String, String>,
    /// Relative to `path`: directories given a session-private writable layer.
    scratch: Vec<String>,
}

/// Resolves what a local sandbox shows; see the module docs of [`super`] for the rules.
pub fn resolve(policy: &Policy, facts: &HostFacts, adjust: &Adjustments) -> Exposure {
    let home = &facts.home;
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    // Secrets by every name that reaches them: as written and resolved.
    let mut secrets: Vec<PathBuf> = Vec::new();
    for s in policy
        .secrets
        .iter()
        .map(|s| expand(&s.path, home))
        .chain(adjust.deny_read.iter().cloned())
    {
        if let Some(c) = canonical(&s) {
            secrets.push(c);
        }
        secrets.push(s);
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    for p in &facts.path {
        if p.is_absolute() && p.starts_with(home) && p.is_dir() {
            candidates.push(Candidate {
                path: p.clone(),
                reason: "on your PATH".into(),
                env: BTreeMap::new(),
                scratch: Vec::new(),
            });
        }
    }
    for r in &policy.roots {
        candidates.push(Candidate {
            path: expand(&r.path, home),
            reason: r.why.clone(),
            env: r.env.clone(),
            scratch: r.scratch.iter().map(|s| s.path.clone()).collect(),
        });
    }
    for p in &adjust.allow_read {
        candidates.push(Candidate {
            path: p.clone(),
            reason: "sandbox.filesystem.allowRead".into(),
            env: BTreeMap::new(),
            scratch: Vec::new(),
        });
    }

    let mut out = Exposure::default();
    let mut roots: Vec<(PathBuf, String)> = Vec::new();
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut scratch_wanted: Vec<PathBuf> = Vec::new();
    for c in candidates {
        let Some(real) = canonical(&c.path) else {
            continue; // not on this host
        };
        let refuse = |why: &str| Refused {
            path: c.path.clone(),
            why: why.into(),
        };
        if let Some(why) = refusal(&real, facts, &secrets) {
            out.refused.push(refuse(why));
            continue;
        }
        for (k, v) in &c.env {
            env.entry(k.clone())
                .or_insert_with(|| v.replace("{path}", &real.to_string_lossy()));
        }
        scratch_wanted.extend(c.scratch.iter().map(|s| real.join(s)));
        if is_system(&real) || roots.iter().any(|(r, _)| r == &real) {
            continue; // already visible
        }
        roots.push((real, c.reason));
    }
    // A root inside another is shown by it; keep the outer one only.
    roots.sort_by(|a, b| a.0.cmp(&b.0));
    let mut kept: Vec<(PathBuf, String)> = Vec::new();
    for (r, why) in roots {
        if !kept.iter().any(|(k, _)| r.starts_with(k)) {
            kept.push((r, why));
        }
    }
    let mut hidden: Vec<PathBuf> = secrets
        .iter()
        .filter(|s| kept.iter().any(|(k, _)| s.starts_with(k) && *s != k))
        .filter(|s| std::fs::symlink_metadata(s).is_ok())
        .cloned()
        .collect();
    hidden.sort();
    hidden.dedup();
    let scratch = scratch_dirs(scratch_wanted, &kept, &secrets);

    let caches_dir = facts.cordon_home.join("caches");
    let mut writable = Vec::new();
    let mut seeded = Vec::new();
    for cache in &policy.caches {
        let dir = caches_dir.join(&cache.name);
        for var in &cache.env {
            env.insert(var.clone(), dir.to_string_lossy().into_owned());
        }
        for (i, seed) in cache.seeds.iter().enumerate() {
            let from = expand(&seed.from, home);
            let Some(real) = canonical(&from).filter(|r| r.is_dir()) else {
                continue; // the host has no such cache
            };
            // The lower layer is shown read-only: the rules of a root hold for it, and it
            // may hold no secret (the overlay has no holes) nor lie in a shown root.
            let why = refusal(&real, facts, &secrets)
                .or_else(|| {
                    secrets
                        .iter()
                        .any(|s| s.starts_with(&real))
                        .then_some("it contains a secret")
                })
                .or_else(|| {
                    kept.iter()
                        .any(|(k, _)| real.starts_with(k) || k.starts_with(&real))
                        .then_some("it overlaps a shown toolchain root")
                })
                .or_else(|| is_system(&real).then_some("it is a system directory"));
            if let Some(why) = why {
                out.refused.push(Refused {
                    path: from,
                    why: format!("as a seed of Cordon's {} cache: {why}", cache.name),
                });
                continue;
            }
            let at = if seed.into.is_empty() {
                dir.clone()
            } else {
                dir.join(&seed.into)
            };
            seeded.push(sandbox_agent::launch::host_view::SeededCache {
                at,
                lower: real,
                layers: caches_dir
                    .join(".seeded")
                    .join(format!("{}-{i}", cache.name)),
            });
        }
        writable.push(dir);
    }
    let visible = |p: &Path| {
        is_system(p)
            || p.starts_with(&facts.workspace)
            || kept.iter().any(|(k, _)| p.starts_with(k))
    };
    let mut path_entries: Vec<String> = Vec::new();
    for p in &facts.path {
        let Some(real) = canonical(p) else { continue };
        if visible(&real) {
            let shown = if p.starts_with(home) { &real } else { p };
            let s = shown.to_string_lossy().into_owned();
            if !path_entries.contains(&s) {
                path_entries.push(s);
            }
        }
    }
    if !path_entries.is_empty() {
        env.insert("PATH".into(), path_entries.join(":"));
    }
    out.toolchains = Toolchains {
        view: sandbox_agent::launch::host_view::HostView {
            read_only: kept.iter().map(|(k, _)| k.clone()).collect(),
            hidden,
            writable,
            seeded,
            scratch,
        },
        env: env.into_iter().collect(),
    };
    out.shown = kept;
    out
}

/// The scratch directories that can have a layer of their own: real directories (no link
/// on the way) strictly inside a shown root, holding no secret and no other root. An
/// overlay shows its lower directory without the mounts beneath it, so a hidden secret or
/// a nested root inside would show through (or vanish): such a directory keeps its
/// read-only bind.
fn scratch_dirs(
    wanted: Vec<PathBuf>,
    kept: &[(PathBuf, String)],
    secrets: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in wanted {
        let real = std::fs::canonicalize(&dir).ok().filter(|r| r.is_dir());
        if real.as_ref() != Some(&dir) {
            continue; // absent here, or reached through a link
        }
        let inside = kept.iter().any(|(k, _)| dir.starts_with(k) && &dir != k);
        let holds = |p: &Path| p.starts_with(&dir);
        let holds_other =
            secrets.iter().any(|s| holds(s)) || kept.iter().any(|(k, _)| holds(k) && k != &dir);
        if inside && !holds_other && !out.contains(&dir) {
            out.push(dir);
        }
    }
    out.sort();
    out
}

/// Why a root cannot be shown, if it cannot.
fn refusal(real: &Path, facts: &HostFacts, secrets: &[PathBuf]) -> Option<&'static str> {
    if real == Path::new("/") || facts.home.starts_with(real) {
        return Some("it would show the whole home directory");
    }
    if secrets.iter().any(|s| real.starts_with(s)) {
        return Some("it is, or lies inside, a secret");
    }
    let overlaps = |other: &Path| real.starts_with(other) || other.starts_with(real);
    if overlaps(&facts.workspace) {
        return Some("it overlaps the workspace");
    }
    if overlaps(&facts.cordon_home) {
        return Some("it overlaps Cordon's data directory");
    }
    None
}

fn is_system(p: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| p.starts_with(d))
}
