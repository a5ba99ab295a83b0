//! Sessions on disk: one append-only JSONL transcript per session (see [`transcript`]),
//! indexed in SQLite (see [`store`]), so a session survives a crash, can be resumed
//! (`--resume ID`, `--continue`) and forked.

pub mod assemble;
pub mod record;
pub mod store;
pub mod transcript;

pub use assemble::{
    FrontEnd, Prepared, SessionEnv, SessionHandles, SessionOverrides, SessionStart,
};
pub use record::{Record, RecordBody};
pub use store::{SessionInfo, SessionStore, StoreError};
pub use transcript::{Loaded, Transcript, TranscriptError};

#[cfg(test)]
mod tests;
