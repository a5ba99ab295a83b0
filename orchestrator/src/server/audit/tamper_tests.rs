//! The chain against the tamperings it exists to catch, done to the database file with a
//! second connection, the way someone with the file would (triggers dropped first).

use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;
use serde_json::json;

use super::verify::{verify, verify_data_dir};
use super::*;

fn tool_call(n: u32) -> AuditEvent {
    let mut rec = ToolCallAudit::new(
        Some("key_1"),
        "sess_1",
        &format!("toolu_{n}"),
        "Bash",
        &json!({"command": format!("echo {n}")}),
    );
    rec.duration_ms = u64::from(n);
    rec.output_sha256 = Some(chain::digest(n.to_string().as_bytes()));
    AuditEvent::ToolCall(rec)
}

/// A data dir holding two tenants' chains: `a` with 5 records, `b` with 3.
fn populated() -> (tempfile::TempDir, AuditLog) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = AuditLog::open(dir.path()).expect("open");
    for n in 1..=5 {
        log.append("a", &tool_call(n)).expect("append a");
        if n <= 3 {
            log.append("b", &tool_call(n)).expect("append b");
        }
    }
    (dir, log)
}

/// A second connection that has removed the append-only triggers.
fn tamperer(dir: &Path) -> Connection {
    let db = Connection::open(dir.join(log::AUDIT_DB)).expect("open db");
    db.execute_batch("DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete;")
        .expect("drop triggers");
    db
}

fn problems(dir: &Path) -> Vec<ChainProblem> {
    verify_data_dir(dir).expect("verify").problems
}

#[test]
fn untouched_chains_verify() {
    let (dir, _log) = populated();
    let report = verify_data_dir(dir.path()).expect("verify");
    assert!(report.ok(), "{:?}", report.problems);
    let counts: Vec<_> = report
        .chains
        .iter()
        .map(|c| (c.tenant.as_str(), c.records))
        .collect();
    assert_eq!(counts, [("a", 5), ("b", 3)]);
}

#[test]
fn each_record_links_to_the_one_before() {
    let (_dir, log) = populated();
    let recs = log.export("a", 0, 100).expect("export");
    assert_eq!(recs.len(), 5);
    assert_eq!(recs[0].prev_hash, chain::GENESIS);
    for pair in recs.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
        assert_eq!(pair[1].seq, pair[0].seq + 1);
    }
    assert_eq!(log.export("a", 3, 100).expect("export").len(), 2);
}

#[test]
fn the_database_refuses_updates_and_deletes() {
    let (dir, _log) = populated();
    let db = Connection::open(dir.path().join(log::AUDIT_DB)).expect("open");
    let upd = db.execute("UPDATE audit SET body = '{}' WHERE seq = 1", []);
    assert!(upd.is_err_and(|e| e.to_string().contains("append-only")));
    assert!(db.execute("DELETE FROM audit", []).is_err());
}

#[test]
fn an_edited_body_is_detected() {
    let (dir, _log) = populated();
    tamperer(dir.path())
        .execute(
            "UPDATE audit SET body = replace(body, 'echo 2', 'echo X') WHERE tenant = 'a' AND seq = 2",
            [],
        )
        .expect("edit");
    assert_eq!(
        problems(dir.path()),
        [ChainProblem::Edited {
            tenant: "a".into(),
            seq: 2
        }]
    );
}

#[test]
fn an_edited_timestamp_is_detected() {
    let (dir, _log) = populated();
    tamperer(dir.path())
        .execute(
            "UPDATE audit SET at = '2000-01-01T00:00:00.000Z' WHERE tenant = 'b' AND seq = 1",
            [],
        )
        .expect("edit");
    assert!(problems(dir.path()).contains(&ChainProblem::Edited {
        tenant: "b".into(),
        seq: 1
    }));
}

#[test]
fn an_edit_with_a_recomputed_hash_breaks_the_next_link() {
    let (dir, _log) = populated();
    let db = tamperer(dir.path());
    let (at, kind, body, prev): (String, String, String, String) = db
        .query_row(
            "SELECT at, kind, body, prev_hash FROM audit WHERE tenant = 'a' AND seq = 3",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .expect("row");
    let body = body.replace("echo 3", "echo Y");
    let hash = chain::Link {
        tenant: "a",
        seq: 3,
        at: &at,
        kind: &kind,
        body: &body,
        prev_hash: &prev,
    }
    .hash();
    db.execute(
        "UPDATE audit SET body = ?1, hash = ?2 WHERE tenant = 'a' AND seq = 3",
        rusqlite::params![body, hash],
    )
    .expect("edit");
    assert_eq!(
        problems(dir.path()),
        [ChainProblem::BrokenLink {
            tenant: "a".into(),
            seq: 4
        }]
    );
}

#[test]
fn a_deleted_record_is_detected() {
    let (dir, _log) = populated();
    tamperer(dir.path())
        .execute("DELETE FROM audit WHERE tenant = 'a' AND seq = 2", [])
        .expect("delete");
    let found = problems(dir.path());
    assert!(found.contains(&ChainProblem::Gap {
        tenant: "a".into(),
        expected: 2,
        found: 3
    }));
    assert!(found.contains(&ChainProblem::BrokenLink {
        tenant: "a".into(),
        seq: 3
    }));
}

#[test]
fn a_deleted_newest_record_is_detected_by_the_head() {
    let (dir, _log) = populated();
    tamperer(dir.path())
        .execute("DELETE FROM audit WHERE tenant = 'b' AND seq = 3", [])
        .expect("delete");
    assert_eq!(
        problems(dir.path()),
        [ChainProblem::HeadMismatch {
            tenant: "b".into(),
            head_seq: 3,
            last_seq: 2
        }]
    );
}

#[test]
fn a_deleted_whole_chain_is_detected_by_the_head() {
    let (dir, _log) = populated();
    tamperer(dir.path())
        .execute("DELETE FROM audit WHERE tenant = 'b'", [])
        .expect("delete");
    assert!(matches!(
        problems(dir.path())[..],
        [ChainProblem::HeadMismatch { ref tenant, last_seq: 0, .. }] if tenant == "b"
    ));
}

#[test]
fn swapped_sequence_numbers_are_detected() {
    let (dir, _log) = populated();
    let db = tamperer(dir.path());
    db.execute_batch(
        "UPDATE audit SET seq = -1 WHERE tenant = 'a' AND seq = 2;
         UPDATE audit SET seq = 2 WHERE tenant = 'a' AND seq = 3;
         UPDATE audit SET seq = 3 WHERE tenant = 'a' AND seq = -1;",
    )
    .expect("swap");
    let found = problems(dir.path());
    assert!(found.contains(&ChainProblem::Edited {
        tenant: "a".into(),
        seq: 2
    }));
    assert!(found.contains(&ChainProblem::Edited {
        tenant: "a".into(),
        seq: 3
    }));
}

#[test]
fn swapped_records_with_their_hashes_are_detected() {
    let (dir, _log) = populated();
    let db = tamperer(dir.path());
    // Exchange every column but the sequence number between records 3 and 4: each stays
    // internally consistent only if the sequence number were not hashed, and the links
    // cross.
    db.execute_batch(
        "CREATE TEMP TABLE t AS SELECT * FROM audit WHERE tenant = 'a' AND seq IN (3, 4);
         UPDATE audit SET (at, kind, body, prev_hash, hash) =
             (SELECT at, kind, body, prev_hash, hash FROM t WHERE t.seq = 7 - audit.seq)
         WHERE tenant = 'a' AND seq IN (3, 4);",
    )
    .expect("swap");
    let found = problems(dir.path());
    assert!(!found.is_empty());
    assert!(found.iter().all(|p| matches!(p,
        ChainProblem::Edited { tenant, .. } | ChainProblem::BrokenLink { tenant, .. } if tenant == "a")));
}

#[test]
fn a_record_moved_to_another_tenant_is_detected() {
    let (dir, _log) = populated();
    tamperer(dir.path())
        .execute(
            "UPDATE audit SET tenant = 'b', seq = 4 WHERE tenant = 'a' AND seq = 5",
            [],
        )
        .expect("move");
    let found = problems(dir.path());
    assert!(found.contains(&ChainProblem::Edited {
        tenant: "b".into(),
        seq: 4
    }));
    assert!(
        found
            .iter()
            .any(|p| matches!(p, ChainProblem::HeadMismatch { tenant, .. } if tenant == "a"))
    );
}

#[test]
fn concurrent_appends_keep_one_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(AuditLog::open(dir.path()).expect("open"));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for n in 0..25 {
                    log.append("a", &tool_call(t * 100 + n)).expect("append");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    // A second process's connection (as `cordon admin` would be) appends too.
    let other = AuditLog::open(dir.path()).expect("open again");
    other
        .append(
            "a",
            &AuditEvent::Admin(AdminAudit {
                actor: "cli".into(),
                action: AdminAction::KeyCreate,
                target: "key_2".into(),
            }),
        )
        .expect("append");
    let db = Connection::open(dir.path().join(log::AUDIT_DB)).expect("open");
    let report = verify(&db).expect("verify");
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.chains[0].records, 101);
}

#[test]
fn records_hold_digests_and_redacted_previews_not_secrets() {
    let (dir, log) = populated();
    let secret = "sk-ant-api03-THISISASECRETVALUE";
    let rec = ToolCallAudit::new(
        Some("key_1"),
        "s",
        "t",
        "Bash",
        &json!({"command": format!("ANTHROPIC_API_KEY={secret} run")}),
    );
    log.append("a", &AuditEvent::ToolCall(rec)).expect("append");
    let raw = std::fs::read(dir.path().join(log::AUDIT_DB)).expect("read");
    let wal = std::fs::read(dir.path().join("audit.db-wal")).unwrap_or_default();
    let needle = secret.as_bytes();
    for bytes in [raw, wal] {
        assert!(!bytes.windows(needle.len()).any(|w| w == needle));
    }
}
