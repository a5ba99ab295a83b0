//! The developer's own toolchains in a local sandbox: which host directories it shows
//! read-only (rustup, pyenv, nvm, `~/.local/bin`, ...), which secrets inside them stay
//! hidden, which caches are Cordon's own, and the PATH commands see. What is exposed is
//! policy as data (`policies/toolchains.json`, every entry with its why); the launcher
//! mounts the result (`sandbox_agent::launch::host_view`).
//!
//! The security argument: the home directory stays hidden as a whole; only named roots
//! and the user's own PATH entries under it are shown, read-only, so nothing a session
//! does changes a program the host later runs. A root that would contain a listed secret
//! (`~/.ssh`, cloud credentials, ...) is refused rather than shown with a hole; secrets
//! that merely sit beside a toolchain (`~/.cargo/credentials.toml`) are covered. Caches
//! that tools write go to Cordon's per-user directories, never the host's own, so a session
//! cannot poison what the user's builds later trust. Only the user, managed and
//! command-line settings may add roots; any source may hide more.

mod policy;
mod resolve;

pub use policy::{Policy, expand, policy};
pub use resolve::{Exposure, Refused, resolve};

use std::path::{Path, PathBuf};

use crate::settings::Settings;

/// What the sandbox shows of the host, and the variables commands start with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toolchains {
    pub view: sandbox_agent::launch::host_view::HostView,
    pub env: Vec<(String, String)>,
}

/// The facts of this host the resolution reads, gathered in one place so tests can give
/// their own.
#[derive(Debug, Clone)]
pub struct HostFacts {
    /// The user's home (canonical).
    pub home: PathBuf,
    /// The user's PATH, in order.
    pub path: Vec<PathBuf>,
    /// Cordon's data directory: its `caches/` hold the per-user caches.
    pub cordon_home: PathBuf,
    /// The session's workspace (canonical): never part of the view.
    pub workspace: PathBuf,
}

impl HostFacts {
    /// This process's home and PATH. `None` without a usable home: nothing is exposed.
    pub fn from_env(cordon_home: &Path, workspace: &Path) -> Option<Self> {
        let home = std::fs::canonicalize(std::env::var_os("HOME")?).ok()?;
        if home == Path::new("/") {
            return None;
        }
        let path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        Some(Self {
            home,
            path,
            cordon_home: cordon_home.to_path_buf(),
            workspace: workspace.to_path_buf(),
        })
    }
}

/// The toolchains a local session of `workspace` shows, per the embedded policy and the
/// settings; caches are created on the way. Empty when `sandbox.exposeToolchains` is
/// false or there is no home.
pub fn for_session(settings: &Settings, cordon_home: &Path, workspace: &Path) -> Toolchains {
    if !expose_enabled(settings) {
        return Toolchains::default();
    }
    let Some(facts) = HostFacts::from_env(cordon_home, workspace) else {
        return Toolchains::default();
    };
    let policy = match policy() {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("no toolchains shown: {e}");
            return Toolchains::default();
        }
    };
    let adjust = resolve::Adjustments::from_settings(settings, &facts.home);
    let exposure = resolve(policy, &facts, &adjust);
    match exposure.create_caches() {
        Ok(()) => exposure.toolchains,
        Err(e) => {
            // Without its caches the view still runs tools; say why writes will fail.
            tracing::warn!("cannot create Cordon's tool caches: {e}");
            let mut t = exposure.toolchains;
            t.view.writable.clear();
            t.view.seeded.clear();
            t
        }
    }
}

/// `sandbox.exposeToolchains` (default true); the first value in precedence order wins,
/// but a repository may only turn it off (it narrows).
fn expose_enabled(settings: &Settings) -> bool {
    let mut trusted = None;
    let mut repo_off = false;
    for f in settings.files() {
        let Some(v) = f
            .value
            .get("sandbox")
            .and_then(|s| s.get("exposeToolchains"))
            .and_then(|v| v.as_bool())
        else {
            continue;
        };
        if f.source.is_repository() {
            repo_off |= !v;
        } else if trusted.is_none() {
            trusted = Some(v);
        }
    }
    trusted.unwrap_or(true) && !repo_off
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
