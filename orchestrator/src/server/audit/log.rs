//! [`AuditLog`]: appends records to the per-tenant chains and exports them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

use super::chain::{GENESIS, Link};
use super::record::AuditEvent;

/// The database file beneath a server's data directory.
pub const AUDIT_DB: &str = "audit.db";

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("opening the audit database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("creating the audit database {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("audit database query failed: {0}")]
    Query(#[from] rusqlite::Error),
    #[error("encoding an audit record: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("the audit database lock was poisoned by a panic")]
    Poisoned,
}

/// One stored record, as exported by `GET /v1/audit`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredRecord {
    pub tenant: String,
    pub seq: i64,
    pub at: String,
    pub kind: String,
    /// The event itself (the body as stored, parsed).
    pub event: serde_json::Value,
    pub prev_hash: String,
    pub hash: String,
}

/// The audit trail of one data directory. Appends are serialised (one connection behind a
/// mutex, and an immediate transaction so another process appending, `cordon admin`, waits).
#[derive(Debug)]
pub struct AuditLog {
    db: Mutex<Connection>,
}

const SCHEMA: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    CREATE TABLE IF NOT EXISTS audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at TEXT NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL,
        UNIQUE (tenant, seq)
    );
    CREATE TABLE IF NOT EXISTS audit_heads (
        tenant TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        hash TEXT NOT NULL
    );
    -- The append-only contract, stated where every writer meets it. It stops mistakes, not
    -- an attacker who owns the file: the chain is what detects that.
    CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
    CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
";

impl AuditLog {
    /// Opens (creating when missing, mode 0600) `DATA/audit.db`.
    pub fn open(data_dir: &Path) -> Result<Self, AuditError> {
        Self::open_path(&data_dir.join(AUDIT_DB))
    }

    pub fn open_path(path: &Path) -> Result<Self, AuditError> {
        let db = open_db(path, true)?;
        db.execute_batch(SCHEMA)?;
        Ok(Self { db: Mutex::new(db) })
    }

    /// Appends `event` to `tenant`'s chain; returns the stored record.
    pub fn append(&self, tenant: &str, event: &AuditEvent) -> Result<StoredRecord, AuditError> {
        let body = serde_json::to_string(event)?;
        let at = crate::session::record::now_rfc3339();
        let mut db = self.db.lock().map_err(|_| AuditError::Poisoned)?;
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let head: Option<(i64, String)> = tx
            .query_row(
                "SELECT seq, hash FROM audit_heads WHERE tenant = ?1",
                [tenant],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let (prev_seq, prev_hash) = head.unwrap_or((0, GENESIS.to_string()));
        let seq = prev_seq + 1;
        let kind = event.kind();
        let hash = Link {
            tenant,
            seq,
            at: &at,
            kind,
            body: &body,
            prev_hash: &prev_hash,
        }
        .hash();
        tx.execute(
            "INSERT INTO audit (tenant, seq, at, kind, body, prev_hash, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![tenant, seq, at, kind, body, prev_hash, hash],
        )?;
        tx.execute(
            "INSERT INTO audit_heads (tenant, seq, hash) VALUES (?1, ?2, ?3)
             ON CONFLICT (tenant) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
            params![tenant, seq, hash],
        )?;
        tx.commit()?;
        Ok(StoredRecord {
            tenant: tenant.into(),
            seq,
            at,
            kind: kind.into(),
            event: serde_json::to_value(event)?,
            prev_hash,
            hash,
        })
    }

    /// Up to `limit` of `tenant`'s records with a sequence number above `after`, oldest first.
    pub fn export(
        &self,
        tenant: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<StoredRecord>, AuditError> {
        let db = self.db.lock().map_err(|_| AuditError::Poisoned)?;
        let mut stmt = db.prepare(
            "SELECT tenant, seq, at, kind, body, prev_hash, hash FROM audit
             WHERE tenant = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![tenant, after, limit], |r| {
            let body: String = r.get(4)?;
            Ok(StoredRecord {
                tenant: r.get(0)?,
                seq: r.get(1)?,
                at: r.get(2)?,
                kind: r.get(3)?,
                event: serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body)),
                prev_hash: r.get(5)?,
                hash: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether the database answers (for `/readyz`).
    pub fn ping(&self) -> bool {
        self.db
            .lock()
            .is_ok_and(|db| db.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)).is_ok())
    }
}

/// Opens the database file; `create` makes it (0600, before SQLite opens it, so its WAL
/// and shared-memory files take the same mode).
pub(crate) fn open_db(path: &Path, create: bool) -> Result<Connection, AuditError> {
    if create {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(parent) = path.parent() {
            crate::paths::private_dir(parent).map_err(|source| AuditError::Create {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(|source| AuditError::Create {
                path: path.to_path_buf(),
                source,
            })?;
    }
    let flags = if create {
        rusqlite::OpenFlags::default()
    } else {
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let db = Connection::open_with_flags(path, flags).map_err(|source| AuditError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    db.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(db)
}
