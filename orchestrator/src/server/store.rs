//! The server's state: tenants, API keys (hashed), sessions and their event logs, in
//! SQLite (WAL) in the data directory, behind the [`Store`] trait so another database can
//! follow. Transcripts stay JSONL files (the session library's); the event table is what
//! an SSE client that reconnects with `Last-Event-ID` is replayed from.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("opening the server database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("creating the server database {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("server database query failed: {0}")]
    Query(#[from] rusqlite::Error),
    #[error("a stored JSON column is invalid: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the server database lock was poisoned")]
    Poisoned,
    #[error("tenant {0:?} exists already")]
    TenantExists(String),
    #[error("no tenant {0:?}")]
    NoTenant(String),
    #[error("no key {0:?}")]
    NoKey(String),
}

/// A tenant: its managed settings (the top layer for its sessions) and quotas.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantRow {
    pub name: String,
    pub settings: Value,
    pub quotas: Value,
    pub created_at: String,
}

/// An API key: only the SHA-256 of its secret is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub id: String,
    pub tenant: String,
    pub secret_sha256: String,
    pub revoked: bool,
}

/// A session as the server records it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub tenant: String,
    /// The lifecycle state's name (see `sessions::State`).
    pub state: String,
    pub reason: Option<String>,
    pub workspace: PathBuf,
    /// The creation request, as given (backend, image, model, mode, settings, ttl, idle).
    pub config: Value,
    pub labels: Value,
    /// The transcript exists (a later start resumes it instead of creating it).
    pub started: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// One persisted event of a session's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub seq: u64,
    pub kind: String,
    pub data: Value,
}

/// Where the server keeps its state.
pub trait Store: Send + Sync {
    fn create_tenant(&self, name: &str, settings: &Value, quotas: &Value)
    -> Result<(), StoreError>;
    fn tenant(&self, name: &str) -> Result<Option<TenantRow>, StoreError>;
    fn add_key(&self, key: &KeyRow) -> Result<(), StoreError>;
    fn key(&self, id: &str) -> Result<Option<KeyRow>, StoreError>;
    fn revoke_key(&self, id: &str) -> Result<(), StoreError>;
    fn put_session(&self, row: &SessionRow) -> Result<(), StoreError>;
    fn session(&self, id: &str) -> Result<Option<SessionRow>, StoreError>;
    fn sessions(&self) -> Result<Vec<SessionRow>, StoreError>;
    fn append_event(&self, session: &str, event: &StoredEvent) -> Result<(), StoreError>;
    fn events_after(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError>;
    fn last_seq(&self, session: &str) -> Result<u64, StoreError>;
    /// Adds `tokens` to `tenant`'s count for `day` (YYYY-MM-DD, UTC); returns the total.
    fn add_tokens(&self, tenant: &str, day: &str, tokens: u64) -> Result<u64, StoreError>;
    fn tokens(&self, tenant: &str, day: &str) -> Result<u64, StoreError>;
    /// Whether the database answers (readiness).
    fn ping(&self) -> Result<(), StoreError>;
}

/// The embedded store: one SQLite file, WAL, opened 0600.
#[derive(Debug)]
pub struct SqliteStore {
    db: Mutex<Connection>,
}

const SCHEMA: &str = "PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS tenants (
    name TEXT PRIMARY KEY, settings TEXT NOT NULL, quotas TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS keys (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL REFERENCES tenants(name),
    secret_sha256 TEXT NOT NULL, revoked INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, state TEXT NOT NULL, reason TEXT,
    workspace TEXT NOT NULL, config TEXT NOT NULL, labels TEXT NOT NULL,
    started INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_by_tenant ON sessions (tenant, created_at);
CREATE TABLE IF NOT EXISTS usage (
    tenant TEXT NOT NULL, day TEXT NOT NULL, tokens INTEGER NOT NULL, PRIMARY KEY (tenant, day));
CREATE TABLE IF NOT EXISTS events (
    session TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (session, seq));";

impl SqliteStore {
    /// Opens (creating) `DATA/server.db`.
    pub fn open(data: &Path) -> Result<Self, StoreError> {
        let path = data.join("server.db");
        let create = |source| StoreError::Create {
            path: path.clone(),
            source,
        };
        crate::paths::private_dir(data).map_err(create)?;
        {
            // Created 0600 before SQLite opens it: its WAL and shm files take its mode.
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&path)
                .map_err(create)?;
        }
        let db = Connection::open(&path).map_err(|source| StoreError::Open {
            path: path.clone(),
            source,
        })?;
        db.busy_timeout(std::time::Duration::from_secs(5))?;
        db.execute_batch(SCHEMA)?;
        Ok(Self { db: Mutex::new(db) })
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db.lock().map_err(|_| StoreError::Poisoned)?;
        f(&db)
    }
}

/// Event ids as SQLite integers (ids never come near 2^63).
fn to_sql(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

fn from_sql(seq: i64) -> u64 {
    u64::try_from(seq).unwrap_or(0)
}

fn now() -> String {
    crate::session::record::now_rfc3339()
}

impl Store for SqliteStore {
    fn create_tenant(
        &self,
        name: &str,
        settings: &Value,
        quotas: &Value,
    ) -> Result<(), StoreError> {
        self.with(|db| {
            let inserted = db.execute(
                "INSERT OR IGNORE INTO tenants (name, settings, quotas, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![name, settings.to_string(), quotas.to_string(), now()],
            )?;
            if inserted == 0 {
                return Err(StoreError::TenantExists(name.to_string()));
            }
            Ok(())
        })
    }

    fn tenant(&self, name: &str) -> Result<Option<TenantRow>, StoreError> {
        self.with(|db| {
            let row = db
                .query_row(
                    "SELECT name, settings, quotas, created_at FROM tenants WHERE name = ?1",
                    params![name],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                        ))
                    },
                )
                .optional()?;
            row.map(|(name, settings, quotas, created_at)| {
                Ok(TenantRow {
                    name,
                    settings: serde_json::from_str(&settings)?,
                    quotas: serde_json::from_str(&quotas)?,
                    created_at,
                })
            })
            .transpose()
        })
    }

    fn add_key(&self, key: &KeyRow) -> Result<(), StoreError> {
        if self.tenant(&key.tenant)?.is_none() {
            return Err(StoreError::NoTenant(key.tenant.clone()));
        }
        self.with(|db| {
            db.execute(
                "INSERT INTO keys (id, tenant, secret_sha256, revoked, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![key.id, key.tenant, key.secret_sha256, key.revoked, now()],
            )?;
            Ok(())
        })
    }

    fn key(&self, id: &str) -> Result<Option<KeyRow>, StoreError> {
        self.with(|db| {
            Ok(db
                .query_row(
                    "SELECT id, tenant, secret_sha256, revoked FROM keys WHERE id = ?1",
                    params![id],
                    |r| {
                        Ok(KeyRow {
                            id: r.get(0)?,
                            tenant: r.get(1)?,
                            secret_sha256: r.get(2)?,
                            revoked: r.get(3)?,
                        })
                    },
                )
                .optional()?)
        })
    }

    fn revoke_key(&self, id: &str) -> Result<(), StoreError> {
        self.with(|db| {
            match db.execute("UPDATE keys SET revoked = 1 WHERE id = ?1", params![id])? {
                0 => Err(StoreError::NoKey(id.to_string())),
                _ => Ok(()),
            }
        })
    }

    fn put_session(&self, row: &SessionRow) -> Result<(), StoreError> {
        self.with(|db| {
            db.execute(
                "INSERT INTO sessions (id, tenant, state, reason, workspace, config, labels, started, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT(id) DO UPDATE SET state = ?3, reason = ?4, started = ?8, updated_at = ?10",
                params![
                    row.id,
                    row.tenant,
                    row.state,
                    row.reason,
                    row.workspace.display().to_string(),
                    row.config.to_string(),
                    row.labels.to_string(),
                    row.started,
                    row.created_at,
                    row.updated_at,
                ],
            )?;
            Ok(())
        })
    }

    fn session(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        Ok(self.select_sessions("WHERE id = ?1", params![id])?.pop())
    }

    fn sessions(&self) -> Result<Vec<SessionRow>, StoreError> {
        self.select_sessions("", params![])
    }

    fn append_event(&self, session: &str, event: &StoredEvent) -> Result<(), StoreError> {
        self.with(|db| {
            db.execute(
                "INSERT INTO events (session, seq, kind, data) VALUES (?1, ?2, ?3, ?4)",
                params![
                    session,
                    to_sql(event.seq),
                    event.kind,
                    event.data.to_string()
                ],
            )?;
            Ok(())
        })
    }

    fn events_after(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.with(|db| {
            let mut stmt = db.prepare_cached(
                "SELECT seq, kind, data FROM events WHERE session = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(params![session, to_sql(after), limit], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, kind, data) = row?;
                out.push(StoredEvent {
                    seq: from_sql(seq),
                    kind,
                    data: serde_json::from_str(&data)?,
                });
            }
            Ok(out)
        })
    }

    fn last_seq(&self, session: &str) -> Result<u64, StoreError> {
        self.with(|db| {
            let last: i64 = db.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session = ?1",
                params![session],
                |r| r.get(0),
            )?;
            Ok(from_sql(last))
        })
    }

    fn add_tokens(&self, tenant: &str, day: &str, tokens: u64) -> Result<u64, StoreError> {
        self.with(|db| {
            db.execute(
                "INSERT INTO usage (tenant, day, tokens) VALUES (?1, ?2, ?3)
                 ON CONFLICT(tenant, day) DO UPDATE SET tokens = tokens + ?3",
                params![tenant, day, to_sql(tokens)],
            )?;
            Ok(())
        })?;
        self.tokens(tenant, day)
    }

    fn tokens(&self, tenant: &str, day: &str) -> Result<u64, StoreError> {
        self.with(|db| {
            let n: Option<i64> = db
                .query_row(
                    "SELECT tokens FROM usage WHERE tenant = ?1 AND day = ?2",
                    params![tenant, day],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(from_sql(n.unwrap_or(0)))
        })
    }

    fn ping(&self) -> Result<(), StoreError> {
        self.with(|db| {
            Ok(db
                .query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
                .map(|_| ())?)
        })
    }
}

impl SqliteStore {
    fn select_sessions(
        &self,
        filter: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<SessionRow>, StoreError> {
        self.with(|db| {
            let sql = format!(
                "SELECT id, tenant, state, reason, workspace, config, labels, started, created_at, updated_at
                 FROM sessions {filter} ORDER BY created_at, id"
            );
            let mut stmt = db.prepare(&sql)?;
            let rows = stmt.query_map(args, |r| {
                Ok((
                    (r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?),
                    (r.get::<_, Option<String>>(3)?, r.get::<_, String>(4)?),
                    (r.get::<_, String>(5)?, r.get::<_, String>(6)?, r.get::<_, bool>(7)?),
                    (r.get::<_, String>(8)?, r.get::<_, String>(9)?),
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let ((id, tenant, state), (reason, workspace), (config, labels, started), (created_at, updated_at)) = row?;
                out.push(SessionRow {
                    id,
                    tenant,
                    state,
                    reason,
                    workspace: PathBuf::from(workspace),
                    config: serde_json::from_str(&config)?,
                    labels: serde_json::from_str(&labels)?,
                    started,
                    created_at,
                    updated_at,
                });
            }
            Ok(out)
        })
    }
}
