//! The session index: an SQLite database in `$CORDON_HOME` that knows every session, its
//! workspace and its transcript, so `--resume ID`, `--continue` (the latest session in this
//! workspace) and fork can find them. Transcripts stay the source of truth for content.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use crate::session::record::{RecordBody, now_rfc3339};
use crate::session::transcript::{Loaded, Transcript, TranscriptError};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("opening the session database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("session database query failed: {0}")]
    Query(#[from] rusqlite::Error),
    #[error("creating {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("a session id may hold only ASCII letters, digits and '-': {0:?}")]
    InvalidId(String),
    #[error("no session with id {0}")]
    NotFound(String),
    #[error("no earlier session in workspace {0}")]
    NoneInWorkspace(PathBuf),
    #[error("session {session} has no message {uuid} to resume at")]
    NoSuchMessage { session: String, uuid: String },
    #[error("Resume rejected by --resume-drops-turn: {0}")]
    DropsMoreThanTheTurn(String),
    #[error("{path} holds session {found}, not {wanted}")]
    ImportMismatch {
        path: PathBuf,
        wanted: String,
        found: String,
    },
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
}

/// One row of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub id: String,
    pub workspace: PathBuf,
    pub transcript: PathBuf,
    pub model: String,
    pub created_at: String,
    pub updated_at: String,
}

/// Sessions on disk under one `$CORDON_HOME`.
#[derive(Debug)]
pub struct SessionStore {
    home: PathBuf,
    db: Connection,
}

impl SessionStore {
    pub fn open(home: &Path) -> Result<Self, StoreError> {
        crate::paths::prepare_home(home).map_err(|source| StoreError::Dir {
            path: home.to_path_buf(),
            source,
        })?;
        crate::paths::private_dir(&home.join("sessions")).map_err(|source| StoreError::Dir {
            path: home.join("sessions"),
            source,
        })?;
        let path = home.join("cordon.db");
        // Created 0600 before SQLite opens it: its journal and WAL files take its mode.
        {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&path)
                .map_err(|source| StoreError::Dir {
                    path: path.clone(),
                    source,
                })?;
        }
        let db = Connection::open(&path).map_err(|source| StoreError::Open {
            path: path.clone(),
            source,
        })?;
        db.busy_timeout(std::time::Duration::from_secs(5))?;
        db.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS sessions (
                 id TEXT PRIMARY KEY,
                 workspace TEXT NOT NULL,
                 transcript TEXT NOT NULL,
                 model TEXT NOT NULL,
                 created_at TEXT NOT NULL,
                 updated_at TEXT NOT NULL,
                 forked_from TEXT
             );
             CREATE INDEX IF NOT EXISTS sessions_by_workspace ON sessions (workspace, updated_at);",
        )?;
        Ok(Self {
            home: home.to_path_buf(),
            db,
        })
    }

    fn transcript_path(&self, id: &str) -> PathBuf {
        self.home.join("sessions").join(format!("{id}.jsonl"))
    }

    /// Starts a new session: an index row and a transcript opened by its start record.
    pub fn create(
        &self,
        workspace: &Path,
        model: &str,
    ) -> Result<(SessionInfo, Transcript), StoreError> {
        self.create_with(workspace, model, None, None)
    }

    /// [`SessionStore::create`] with the id the caller chose (a server's unguessable id);
    /// `None` picks a time-ordered one.
    pub fn create_with_id(
        &self,
        workspace: &Path,
        model: &str,
        id: Option<&str>,
    ) -> Result<(SessionInfo, Transcript), StoreError> {
        self.create_with(workspace, model, None, id)
    }

    fn create_with(
        &self,
        workspace: &Path,
        model: &str,
        forked_from: Option<&str>,
        id: Option<&str>,
    ) -> Result<(SessionInfo, Transcript), StoreError> {
        let id = match id {
            Some(id) if valid_id(id) => id.to_string(),
            Some(id) => return Err(StoreError::InvalidId(id.to_string())),
            None => uuid::Uuid::now_v7().to_string(),
        };
        let path = self.transcript_path(&id);
        let mut transcript = Transcript::create(&path, &id)?;
        transcript.append(RecordBody::SessionStart {
            cwd: workspace.display().to_string(),
            model: model.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            forked_from: forked_from.map(str::to_string),
        })?;
        transcript.sync()?;
        let now = now_rfc3339();
        self.db.execute(
            "INSERT INTO sessions (id, workspace, transcript, model, created_at, updated_at, forked_from)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)",
            params![id, workspace.display().to_string(), path.display().to_string(), model, now, forked_from],
        )?;
        let info = self.get(&id)?;
        Ok((info, transcript))
    }

    pub fn get(&self, id: &str) -> Result<SessionInfo, StoreError> {
        self.db
            .query_row(
                "SELECT id, workspace, transcript, model, created_at, updated_at FROM sessions WHERE id = ?1",
                params![id],
                row_to_info,
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }

    /// The most recently active session in `workspace` (for `--continue`).
    pub fn latest_in(&self, workspace: &Path) -> Result<SessionInfo, StoreError> {
        self.db
            .query_row(
                "SELECT id, workspace, transcript, model, created_at, updated_at FROM sessions
                 WHERE workspace = ?1 ORDER BY updated_at DESC, id DESC LIMIT 1",
                params![workspace.display().to_string()],
                row_to_info,
            )
            .optional()?
            .ok_or_else(|| StoreError::NoneInWorkspace(workspace.to_path_buf()))
    }

    /// Marks a session active now.
    pub fn touch(&self, id: &str) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE sessions SET updated_at = ?2 WHERE id = ?1",
            params![id, now_rfc3339()],
        )?;
        Ok(())
    }

    /// Reopens a session to continue it.
    pub fn resume(&self, id: &str) -> Result<(SessionInfo, Loaded, Transcript), StoreError> {
        let info = self.get(id)?;
        let loaded = Loaded::read(&info.transcript)?;
        let transcript = Transcript::reopen(&loaded)?;
        Ok((info, loaded, transcript))
    }

    /// Takes in the session `id` from `source`, a transcript of Cordon's records kept
    /// elsewhere (an Agent SDK session store wrote it back from what `--session-mirror`
    /// sent), as a session of `workspace`. Only records that parse are written, into a
    /// new transcript of this store (an id it already has is refused, as a fork's is).
    pub fn import(
        &self,
        id: &str,
        workspace: &Path,
        source: &Path,
    ) -> Result<SessionInfo, StoreError> {
        if !valid_id(id) {
            return Err(StoreError::InvalidId(id.to_string()));
        }
        let loaded = Loaded::read(source)?;
        if loaded.session_id != id {
            return Err(StoreError::ImportMismatch {
                path: source.to_path_buf(),
                wanted: id.to_string(),
                found: loaded.session_id,
            });
        }
        let model = loaded
            .records
            .iter()
            .find_map(|r| match &r.body {
                RecordBody::SessionStart { model, .. } => Some(model.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let path = self.transcript_path(id);
        Transcript::write_records(&path, &loaded.records)?;
        let now = now_rfc3339();
        self.db.execute(
            "INSERT INTO sessions (id, workspace, transcript, model, created_at, updated_at, forked_from)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, NULL)",
            params![id, workspace.display().to_string(), path.display().to_string(), model, now],
        )?;
        self.get(id)
    }

    /// A new session whose transcript starts with a copy of `id`'s turns.
    pub fn fork(&self, id: &str) -> Result<(SessionInfo, Transcript), StoreError> {
        self.fork_with_id(id, None)
    }

    /// [`SessionStore::fork`], the new session under the id the caller chose.
    /// A fork of `id` that keeps its conversation up to and including the record `at`
    /// (`--resume-session-at`). With `drops_turn`, every prompt after `at` must be that
    /// one (the turn the caller means to discard); anything else refuses the fork.
    pub fn fork_at(
        &self,
        id: &str,
        new_id: Option<&str>,
        at: &str,
        drops_turn: Option<&str>,
    ) -> Result<(SessionInfo, Transcript), StoreError> {
        let source = self.get(id)?;
        let loaded = Loaded::read(&source.transcript)?;
        let Some(cut) = loaded.records.iter().position(|r| r.uuid == at) else {
            return Err(StoreError::NoSuchMessage {
                session: id.to_string(),
                uuid: at.to_string(),
            });
        };
        if let Some(drops) = drops_turn {
            let later_prompt = loaded.records[cut + 1..]
                .iter()
                .find(|r| r.is_prompt() && r.uuid != drops);
            if let Some(other) = later_prompt {
                return Err(StoreError::DropsMoreThanTheTurn(format!(
                    "the messages after {at} hold the prompt {}, not only the turn of {drops}",
                    other.uuid
                )));
            }
        }
        let (info, mut transcript) =
            self.create_with(&source.workspace, &source.model, Some(id), new_id)?;
        for rec in loaded.records[..=cut]
            .iter()
            .filter(|r| r.is_conversation())
        {
            transcript.append(rec.body.clone())?;
        }
        transcript.sync()?;
        Ok((info, transcript))
    }

    pub fn fork_with_id(
        &self,
        id: &str,
        new_id: Option<&str>,
    ) -> Result<(SessionInfo, Transcript), StoreError> {
        let source = self.get(id)?;
        let loaded = Loaded::read(&source.transcript)?;
        let (info, mut transcript) =
            self.create_with(&source.workspace, &source.model, Some(id), new_id)?;
        for rec in loaded.records.iter().filter(|r| r.is_conversation()) {
            transcript.append(rec.body.clone())?;
        }
        transcript.sync()?;
        Ok((info, transcript))
    }
}

/// An id names a file (the transcript): ASCII letters, digits and '-' only, never empty.
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn row_to_info(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionInfo> {
    Ok(SessionInfo {
        id: row.get(0)?,
        workspace: PathBuf::from(row.get::<_, String>(1)?),
        transcript: PathBuf::from(row.get::<_, String>(2)?),
        model: row.get(3)?,
        created_at: row.get(4)?,
        updated_at: row.get(5)?,
    })
}
