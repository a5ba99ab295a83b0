//! The local backend's footprint in a workspace (see [`crate::sandbox::footprint`]), from
//! its own run state: `$CORDON_HOME/run/<session>/` holds the placeholder record, the launch
//! config (its denied-read paths) and the launcher's pid file.

use std::path::{Path, PathBuf};

use sandbox_agent::launch::{protected, state};

use crate::paths;
use crate::sandbox::footprint::Footprint;

/// The footprint of the local sandbox of `session_id` (empty when none ran).
pub fn footprint(home: &Path, session_id: &str) -> Footprint {
    if !sandbox_agent::launch::valid_session_id(session_id) {
        return Footprint::default();
    }
    let state_dir = paths::run_dir(home).join(session_id);
    if !state_dir.is_dir() {
        return Footprint::default();
    }
    Footprint {
        placeholders: protected::load(&state_dir)
            .into_iter()
            .map(|r| r.path)
            .collect(),
        masks: denied_read(&state_dir),
        // A state dir whose launcher is not known dead counts as running: a launcher that
        // is starting has no pid file yet.
        running: state::launcher_alive(&state_dir) != Some(false),
    }
}

/// The denied-read paths of the launch config (read as plain JSON, so a config written by
/// another version still yields them).
fn denied_read(state_dir: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read(state_dir.join("launch.json")) else {
        return Vec::new();
    };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    value
        .get("denied_read")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_placeholders_masks_and_liveness_from_the_state_dir() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let dir = paths::run_dir(home.path()).join("s1");
        std::fs::create_dir_all(&dir).unwrap();
        let ph = sandbox_agent::launch::protected::Placeholder {
            rel: ".envrc".into(),
            kind: sandbox_agent::launch::protected::EntryKind::File,
            content: None,
        };
        protected::create_placeholders(&dir, ws.path(), &[ph], (0, 0)).unwrap();
        std::fs::write(
            dir.join("launch.json"),
            serde_json::json!({"denied_read": [ws.path().join(".env")]}).to_string(),
        )
        .unwrap();
        // A pid file naming a process that is not there: the launcher is dead.
        std::fs::write(dir.join("launcher.pid"), "999999999 1\n").unwrap();
        let f = footprint(home.path(), "s1");
        assert_eq!(f.placeholders, vec![ws.path().join(".envrc")]);
        assert_eq!(f.masks, vec![ws.path().join(".env")]);
        assert!(!f.running);
        assert_eq!(footprint(home.path(), "../s1"), Footprint::default());
    }
}
