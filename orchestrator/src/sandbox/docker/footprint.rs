//! The Docker backend's footprint in a workspace (see [`crate::sandbox::footprint`]), from
//! its own run state: each live container has a host-only run directory under
//! [`super::run_root`] holding `session.json` (whose session, which paths are masked) and
//! the placeholder record. A pool container's directory is named after its pool slot, so
//! the session is found by the record, not by the name.

use std::path::Path;

use sandbox_agent::launch::protected;

use super::container::SessionRecord;
use crate::sandbox::footprint::Footprint;

/// The footprint of the Docker sandbox of `session_id` (empty when none runs).
pub fn footprint(home: &Path, session_id: &str) -> Footprint {
    let Ok(entries) = std::fs::read_dir(super::run_root(home)) else {
        return Footprint::default();
    };
    let mut found = Footprint::default();
    for dir in entries.flatten().map(|e| e.path()) {
        let record = std::fs::read(dir.join("session.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<SessionRecord>(&b).ok());
        let Some(record) = record.filter(|r| r.session_id == session_id) else {
            continue;
        };
        found
            .placeholders
            .extend(protected::load(&dir).into_iter().map(|r| r.path));
        found.masks.extend(record.masked);
        // The run directory lives exactly as long as the container (and is swept by
        // reconcile after a crash): while it is here, a sandbox may be running.
        found.running = true;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_session_by_its_record_whatever_the_directory_is_called() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let dir = super::super::run_root(home.path()).join("cordon-pool-1-abc");
        std::fs::create_dir_all(&dir).unwrap();
        let record = SessionRecord {
            session_id: "s1".into(),
            uid: 300_000,
            workspace: Some(ws.path().to_path_buf()),
            masked: vec![ws.path().join(".env")],
            acl: Some(false),
            additional: Vec::new(),
        };
        std::fs::write(
            dir.join("session.json"),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        let ph = protected::Placeholder {
            rel: ".mcp.json".into(),
            kind: protected::EntryKind::File,
            content: None,
        };
        protected::create_placeholders(&dir, ws.path(), &[ph], (0, 0)).unwrap();
        let f = footprint(home.path(), "s1");
        assert_eq!(f.placeholders, vec![ws.path().join(".mcp.json")]);
        assert_eq!(f.masks, vec![ws.path().join(".env")]);
        assert!(f.running);
        assert_eq!(footprint(home.path(), "s2"), Footprint::default());
    }
}
