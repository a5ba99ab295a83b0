//! The append-only JSONL transcript of one session: written as events happen, fsynced at
//! every turn boundary, so a crash (even `kill -9`) loses no completed turn. Loading
//! tolerates what a crash can leave: a torn last line is dropped, a tool call left without
//! its result is closed with an error result.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::model::{ContentBlock, Message, Role};
use crate::session::record::{Record, RecordBody, now_rfc3339};

/// Why a transcript could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    #[error("opening transcript {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing transcript {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading transcript {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("transcript {path} line {line} is not a valid record: {why}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error("transcript {path} has no session_start record")]
    NoStart { path: PathBuf },
}

/// The text given to the model for a tool call that never finished.
pub const INTERRUPTED_TOOL_RESULT: &str =
    "the tool call did not finish: the session was interrupted before its result arrived";

/// Appends records to one session's transcript.
#[derive(Debug)]
pub struct Transcript {
    path: PathBuf,
    file: File,
    session_id: String,
    last_uuid: Option<String>,
    /// A sub-agent's sidechain: the parent's Agent tool_use id its records carry.
    sidechain: Option<String>,
}

impl Transcript {
    /// Creates a new transcript (fails if it exists).
    pub fn create(path: &Path, session_id: &str) -> Result<Self, TranscriptError> {
        if let Some(dir) = path.parent() {
            crate::paths::private_dir(dir).map_err(open_error(path))?;
        }
        // Only its user may read a transcript: it holds what the model saw.
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(open_error(path))?;
        Ok(Self::over(path, file, session_id, None))
    }

    /// Writes `records` as a new transcript at `path` (fails if it exists), synced.
    pub fn write_records(path: &Path, records: &[Record]) -> Result<(), TranscriptError> {
        let session_id = records.first().map_or("", |r| r.session_id.as_str());
        let mut t = Self::create(path, session_id)?;
        let mut text = Vec::new();
        for rec in records {
            serde_json::to_writer(&mut text, rec).map_err(|e| TranscriptError::Write {
                path: path.into(),
                source: std::io::Error::other(e),
            })?;
            text.push(b'\n');
        }
        t.file
            .write_all(&text)
            .map_err(|source| TranscriptError::Write {
                path: path.into(),
                source,
            })?;
        t.sync()
    }

    /// A sub-agent's sidechain in the transcript at `path`: its records are appended to the
    /// same file (one write each, so they never tear into the parent's), marked
    /// `isSidechain` with the parent's Agent `tool_use` id, chained among themselves.
    pub fn open_sidechain(
        path: &Path,
        session_id: &str,
        parent_tool_use_id: &str,
    ) -> Result<Self, TranscriptError> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(open_error(path))?;
        Ok(Self::over(
            path,
            file,
            session_id,
            Some(parent_tool_use_id.into()),
        ))
    }

    /// A transcript appending to `file` (at `path`), with no record written yet.
    fn over(path: &Path, file: std::fs::File, session_id: &str, sidechain: Option<String>) -> Self {
        Self {
            path: path.into(),
            file,
            session_id: session_id.into(),
            last_uuid: None,
            sidechain,
        }
    }

    /// Opens an existing transcript for appending after `loaded` (its last record becomes the
    /// parent of the next).
    pub fn reopen(loaded: &Loaded) -> Result<Self, TranscriptError> {
        let path = loaded.path.clone();
        // A torn last line (crash mid-write) must not glue onto the next record.
        if loaded.torn_tail {
            truncate_torn_tail(&path)?;
        }
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(open_error(&path))?;
        Ok(Self {
            path,
            file,
            session_id: loaded.session_id.clone(),
            last_uuid: loaded
                .records
                .iter()
                .rfind(|r| !r.is_sidechain)
                .map(|r| r.uuid.clone()),
            sidechain: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Appends one record (written through to the kernel, not yet fsynced).
    pub fn append(&mut self, body: RecordBody) -> Result<Record, TranscriptError> {
        let record = Record {
            uuid: uuid::Uuid::now_v7().to_string(),
            parent_uuid: self.last_uuid.clone(),
            session_id: self.session_id.clone(),
            timestamp: now_rfc3339(),
            is_sidechain: self.sidechain.is_some(),
            parent_tool_use_id: self.sidechain.clone(),
            body,
        };
        let mut line = serde_json::to_vec(&record).map_err(|e| TranscriptError::Write {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        // One write call per record: O_APPEND makes it land whole or (on crash) torn at the
        // end, which loading tolerates.
        self.file
            .write_all(&line)
            .map_err(|source| TranscriptError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.last_uuid = Some(record.uuid.clone());
        Ok(record)
    }

    /// Makes everything appended so far durable. Called at every turn boundary.
    pub fn sync(&mut self) -> Result<(), TranscriptError> {
        self.file
            .sync_data()
            .map_err(|source| TranscriptError::Write {
                path: self.path.clone(),
                source,
            })
    }
}

fn truncate_torn_tail(path: &Path) -> Result<(), TranscriptError> {
    let data = std::fs::read(path).map_err(|source| TranscriptError::Read {
        path: path.into(),
        source,
    })?;
    let keep = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(open_error(path))?;
    file.set_len(keep as u64)
        .map_err(|source| TranscriptError::Write {
            path: path.into(),
            source,
        })?;
    file.sync_data().map_err(|source| TranscriptError::Write {
        path: path.into(),
        source,
    })
}

/// A transcript read back from disk.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub session_id: String,
    pub records: Vec<Record>,
    /// The last line was cut short by a crash and was dropped.
    pub torn_tail: bool,
}

impl Loaded {
    pub fn read(path: &Path) -> Result<Self, TranscriptError> {
        let file = File::open(path).map_err(|source| TranscriptError::Read {
            path: path.into(),
            source,
        })?;
        let mut lines = Vec::new();
        for line in BufReader::new(file).split(b'\n') {
            lines.push(line.map_err(|source| TranscriptError::Read {
                path: path.into(),
                source,
            })?);
        }
        let ends_with_newline = std::fs::read(path)
            .map(|d| d.last() == Some(&b'\n') || d.is_empty())
            .unwrap_or(true);
        let mut records = Vec::with_capacity(lines.len());
        let mut torn_tail = false;
        let count = lines.len();
        for (i, line) in lines.into_iter().enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Record>(&line) {
                Ok(rec) => records.push(rec),
                Err(_) if i + 1 == count && !ends_with_newline => torn_tail = true,
                Err(e) => {
                    return Err(TranscriptError::Corrupt {
                        path: path.into(),
                        line: i + 1,
                        why: e.to_string(),
                    });
                }
            }
        }
        let session_id = match records.first().map(|r| (&r.body, &r.session_id)) {
            Some((RecordBody::SessionStart { .. }, id)) => id.clone(),
            _ => return Err(TranscriptError::NoStart { path: path.into() }),
        };
        Ok(Self {
            path: path.into(),
            session_id,
            records,
            torn_tail,
        })
    }

    /// The conversation to send to the model: from the latest compaction on, consecutive
    /// user turns merged, and every tool call that never got a result closed with an error
    /// result. The second value lists the tool calls that were closed that way.
    /// Sub-agents' sidechain records are left out: only their reports, as tool results,
    /// are part of the session's conversation.
    pub fn conversation(&self) -> (Vec<Message>, Vec<String>) {
        let main: Vec<&Record> = self.records.iter().filter(|r| !r.is_sidechain).collect();
        let start = main
            .iter()
            .rposition(|r| matches!(r.body, RecordBody::Compaction { .. }))
            .unwrap_or(0);
        let mut messages: Vec<Message> = Vec::new();
        for rec in &main[start..] {
            let msg = match &rec.body {
                RecordBody::Compaction { summary, .. } => Message::user_text(summary.clone()),
                RecordBody::User { message } | RecordBody::Assistant { message, .. } => {
                    message.clone()
                }
                _ => continue,
            };
            push_merged(&mut messages, msg);
        }
        let dangling = close_dangling_tool_uses(&mut messages);
        (messages, dangling)
    }

    /// The last assistant text, if any (for `--continue` summaries and results).
    pub fn last_assistant_text(&self) -> Option<String> {
        self.records.iter().rev().find_map(|r| match &r.body {
            RecordBody::Assistant { message, .. } if !r.is_sidechain => Some(text_of(message)),
            _ => None,
        })
    }
}

/// Appends `msg`, merging it into the previous message when both are the user's.
pub fn push_merged(messages: &mut Vec<Message>, msg: Message) {
    match messages.last_mut() {
        Some(last) if last.role == Role::User && msg.role == Role::User => {
            // Tool results must come first in a user turn; they already do, since a
            // results turn is never preceded by another user turn.
            last.content.extend(msg.content);
        }
        _ => messages.push(msg),
    }
}

/// Every tool_use in an assistant turn needs exactly one tool_result in the next user turn.
/// Adds error results for the missing ones; returns their ids.
pub fn close_dangling_tool_uses(messages: &mut Vec<Message>) -> Vec<String> {
    let mut closed = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role != Role::Assistant {
            i += 1;
            continue;
        }
        let wanted: Vec<String> = messages[i]
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        if wanted.is_empty() {
            i += 1;
            continue;
        }
        let has_next_user = messages.get(i + 1).is_some_and(|m| m.role == Role::User);
        if !has_next_user {
            messages.insert(i + 1, Message::user(Vec::new()));
        }
        let next = &mut messages[i + 1];
        let present: Vec<String> = next
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.clone()),
                _ => None,
            })
            .collect();
        let mut missing: Vec<ContentBlock> = Vec::new();
        for id in wanted.into_iter().filter(|id| !present.contains(id)) {
            missing.push(ContentBlock::tool_result(
                id.clone(),
                INTERRUPTED_TOOL_RESULT,
                true,
            ));
            closed.push(id);
        }
        // Results lead the user turn, before any text.
        let rest = std::mem::take(&mut next.content);
        next.content = missing;
        next.content.extend(rest);
        i += 2;
    }
    closed
}

/// The text blocks of a message, joined.
pub fn text_of(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

/// The error for a transcript at `path` that could not be opened.
fn open_error(path: &Path) -> impl Fn(std::io::Error) -> TranscriptError + '_ {
    move |source| TranscriptError::Open {
        path: path.into(),
        source,
    }
}
