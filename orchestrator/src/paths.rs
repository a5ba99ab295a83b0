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

/// Makes `dir` exist as a private directory: created with mode 0700 (and any missing
/// parent with it), or, when it exists with group or other bits, tightened to 0700.
/// Returns the old permission bits when it tightened. Links are not followed into.
pub fn private_dir(dir: &Path) -> std::io::Result<Option<u32>> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    let mode = meta.permissions().mode() & 0o7777;
    if !meta.is_dir() || mode & 0o077 == 0 {
        return Ok(None);
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(Some(mode))
}

/// Writes a file of Cordon's data directory, created with mode 0600.
pub use sandbox_agent::launch::state::write_private;

/// Prepares `$CORDON_HOME` (`home`) before anything is written there. It holds
/// transcripts, full copies of files such as `.env` in the checkpoint store, run state and
/// the database: other local users must not read it. So it is created 0700; an existing
/// one with group or other bits is tightened to 0700, its direct entries too (files 0600,
/// directories 0700), and that is said once per process on stderr.
pub fn prepare_home(home: &Path) -> std::io::Result<()> {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(old) = private_dir(home)? else {
        return Ok(());
    };
    tighten_entries(home);
    if !SAID.swap(true, std::sync::atomic::Ordering::SeqCst) {
        tracing::warn!(
            "tightened the permissions of Cordon's data directory {} from {old:o} to 700: \
             it holds transcripts, checkpoints and run state",
            home.display()
        );
    }
    Ok(())
}

/// The direct entries of `home` made private: directories 0700, files 0600 (links and
/// anything else left alone; what lies deeper is behind these directories).
fn tighten_entries(home: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(home) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let want = if meta.is_dir() {
            0o700
        } else if meta.is_file() {
            0o600
        } else {
            continue;
        };
        if meta.permissions().mode() & 0o077 != 0 {
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(want));
        }
    }
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

    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_home_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("a/b/.cordon");
        prepare_home(&home).unwrap();
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        write_private(&home.join("f"), b"x").unwrap();
        assert_eq!(mode(&home.join("f")), 0o600);
    }

    #[test]
    fn an_open_home_and_its_entries_are_tightened() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join(".cordon");
        let set = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        std::fs::create_dir_all(home.join("sessions")).unwrap();
        std::fs::write(home.join("cordon.db"), "").unwrap();
        set(&home, 0o755).unwrap();
        set(&home.join("sessions"), 0o775).unwrap();
        set(&home.join("cordon.db"), 0o644).unwrap();
        std::os::unix::fs::symlink("/etc", home.join("link")).unwrap();
        let etc = mode(Path::new("/etc"));
        assert_eq!(private_dir(&home).unwrap(), Some(0o755));
        tighten_entries(&home);
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&home.join("sessions")), 0o700);
        assert_eq!(mode(&home.join("cordon.db")), 0o600);
        assert_eq!(mode(Path::new("/etc")), etc, "links not followed");
        assert_eq!(private_dir(&home).unwrap(), None, "already private");
    }
}
