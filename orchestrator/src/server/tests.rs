//! The store and the event log, without a server: rows round-trip, event ids continue
//! after a reopen, and a follower replays from the store then follows live events.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;

use super::events::EventLog;
use super::store::{SessionRow, SqliteStore, Store, StoreError};

fn row(id: &str) -> SessionRow {
    SessionRow {
        id: id.into(),
        tenant: "acme".into(),
        state: "idle".into(),
        reason: None,
        workspace: "/w".into(),
        config: json!({"request": {}}),
        labels: json!({"k": "v"}),
        started: true,
        created_at: "2026-01-01T00:00:00Z".into(),
        updated_at: "2026-01-01T00:00:00Z".into(),
    }
}

#[test]
fn tenants_keys_and_sessions_round_trip_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(dir.path()).unwrap();
        store
            .create_tenant(
                "acme",
                &json!({"permissions": {}}),
                &json!({"max_sessions": 2}),
            )
            .unwrap();
        assert!(matches!(
            store.create_tenant("acme", &json!({}), &json!({})),
            Err(StoreError::TenantExists(_))
        ));
        store.put_session(&row("s1")).unwrap();
        let mut changed = row("s1");
        changed.state = "paused".into();
        changed.reason = Some("why".into());
        store.put_session(&changed).unwrap();
    }
    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(
        store.tenant("acme").unwrap().unwrap().quotas,
        json!({"max_sessions": 2})
    );
    let sessions = store.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].state, "paused");
    assert_eq!(sessions[0].reason.as_deref(), Some("why"));
    assert_eq!(sessions[0].labels, json!({"k": "v"}));
    assert!(store.session("nope").unwrap().is_none());
    assert!(matches!(
        store.revoke_key("nope"),
        Err(StoreError::NoKey(_))
    ));
}

#[tokio::test]
async fn a_follower_replays_then_follows_and_ids_continue_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let log = Arc::new(EventLog::open("s1", store.clone()).unwrap());
    for n in 1..=3 {
        assert_eq!(log.emit("n", json!({"n": n})), n);
    }
    let follower = log.stream(1);
    let emitter = log.clone();
    tokio::spawn(async move {
        emitter.emit("n", json!({"n": 4}));
        emitter.emit("lifecycle", json!({"state": "ended"}));
    });
    let got: Vec<_> = follower.collect().await;
    // 2 and 3 from the store, 4 and the end live; the stream ends after `ended`.
    assert_eq!(got.len(), 4);
    let reopened = EventLog::open("s1", store.clone()).unwrap();
    assert_eq!(reopened.last_id(), 5);
    assert_eq!(reopened.emit("n", json!({})), 6);
    let stored = store.events_after("s1", 4, 10).unwrap();
    assert_eq!(stored.iter().map(|e| e.seq).collect::<Vec<_>>(), [5, 6]);
}
