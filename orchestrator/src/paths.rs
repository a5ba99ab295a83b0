//! Where Cordon keeps things on the host: `$CORDON_HOME` (default `~/.cordon`), its `run/`
//! dir of per-session sandbox state, and where the `sandbox-agent` binary is found.

use std::path::{Path, PathBuf};

/// The environment variable naming Cordon's data directory.
pub const HOME_ENV: &str = "CORDON_HOME";
/// The environment variable naming the agent binary explicitly.
pub const AGENT_BIN_ENV: &str = "CORDON_AGENT_BIN";
/// The agent binary's file name.
pub const AGENT_BIN_NAME: &str = "sandbox-agent";

/// Why a path could not be determined.
#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error("cannot determine the data directory: set CORDON_HOME or HOME")]
    NoHome,
    #[error(
        "cannot find the {AGENT_BIN_NAME} binary: set CORDON_AGENT_BIN, or install it next to cordon or on PATH"
    )]
    NoAgentBinary,
}

/// `$CORDON_HOME`, else `$HOME/.cordon`.
pub fn cordon_home() -> Result<PathBuf, PathsError> {
    if let Some(home) = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".cordon"))
        .ok_or(PathsError::NoHome)
}

/// Per-session sandbox state of the local backend: `<home>/run/<session>/`.
pub fn run_dir(home: &Path) -> PathBuf {
    home.join("run")
}

/// The agent binary: `$CORDON_AGENT_BIN`, else next to the running executable (also one
/// level up when that is cargo's `deps/`, as for test binaries), else on `PATH`.
pub fn find_agent_binary() -> Result<PathBuf, PathsError> {
    if let Some(explicit) = std::env::var_os(AGENT_BIN_ENV).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(explicit);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(PathsError::NoAgentBinary)
        };
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        let mut candidates = vec![dir.join(AGENT_BIN_NAME)];
        if dir.file_name().is_some_and(|n| n == "deps")
            && let Some(up) = dir.parent()
        {
            candidates.push(up.join(AGENT_BIN_NAME));
        }
        if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
            return Ok(found);
        }
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(AGENT_BIN_NAME))
        .find(|p| p.is_file())
        .ok_or(PathsError::NoAgentBinary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_dir_is_under_home() {
        assert_eq!(run_dir(Path::new("/h")), PathBuf::from("/h/run"));
    }
}
