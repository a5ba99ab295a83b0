//! A session's footprint in its workspace: what a backend put there that is not the user's
//! content (placeholders at missing protected paths) or that the sandbox may never touch
//! (masked, denied-read paths), and whether a sandbox of the session is running.
//!
//! This is the one place that says what a backend leaves in a workspace. Checkpoints and
//! rewind ask it ([`of_session`]) and never read a backend's directories themselves: each
//! backend answers for its own run state ([`super::local::footprint`],
//! [`super::docker::footprint`]).

use std::path::{Path, PathBuf};

/// What one session's sandbox leaves in, or hides of, its workspace (absolute paths).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Empty entries made at missing protected paths for the sandbox's life.
    pub placeholders: Vec<PathBuf>,
    /// Paths masked in the sandbox (denied reads): the sandbox can neither see nor change
    /// them, so they are never the session's doing, and a copy of them (secrets, often)
    /// never belongs in a checkpoint.
    pub masks: Vec<PathBuf>,
    /// Whether a sandbox of the session may be running (its run state is present).
    pub running: bool,
}

impl Footprint {
    /// Every path of the footprint.
    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.placeholders.iter().chain(&self.masks)
    }

    /// The footprint's paths relative to `workspace` (those inside it).
    pub fn relative_to(&self, workspace: &Path) -> Vec<PathBuf> {
        let mut rel: Vec<PathBuf> = self
            .paths()
            .filter_map(|p| p.strip_prefix(workspace).ok())
            .filter(|r| !r.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .collect();
        rel.sort();
        rel.dedup();
        rel
    }

    fn merge(mut self, other: Footprint) -> Self {
        self.placeholders.extend(other.placeholders);
        self.masks.extend(other.masks);
        self.running |= other.running;
        self
    }
}

/// The footprint of session `session_id` under Cordon's data directory `home`, whichever
/// backend runs (or ran) it.
pub fn of_session(home: &Path, session_id: &str) -> Footprint {
    super::local::footprint(home, session_id)
        .merge(super::docker::footprint::footprint(home, session_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_inside_the_workspace_sorted_and_unique() {
        let f = Footprint {
            placeholders: vec!["/w/.bashrc".into(), "/w/.envrc".into(), "/elsewhere".into()],
            masks: vec!["/w/.env".into(), "/w/.bashrc".into(), "/w".into()],
            running: false,
        };
        assert_eq!(
            f.relative_to(Path::new("/w")),
            vec![
                PathBuf::from(".bashrc"),
                PathBuf::from(".env"),
                PathBuf::from(".envrc")
            ]
        );
    }

    #[test]
    fn a_session_no_backend_knows_has_no_footprint() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(of_session(home.path(), "nobody"), Footprint::default());
    }
}
