//! `--session-mirror`: the session's transcript, mirrored to the client as it is written,
//! for an Agent SDK `SessionStore` (the SDK passes the flag when its caller gave one).
//!
//! As Claude Code does, every record written goes out as a `transcript_mirror` frame,
//! `{"type":"transcript_mirror","filePath":..,"entries":[..]}`, ahead of the result of
//! its turn (the SDK flushes the store when it sees the result). The SDK keys the store
//! by `filePath` under its projects directory (`$CLAUDE_CONFIG_DIR/projects`, else
//! `~/.claude/projects`): `<projects>/<project key>/<session id>.jsonl`, the project
//! key being the workspace's path with every character but ASCII letters and digits made
//! `-`. Cordon keeps its transcripts in its own data directory and writes nothing there;
//! the path names the key the SDK's own listing and resume functions look for.
//!
//! The entries are Cordon's transcript records (sub-agents' sidechains included, marked
//! `isSidechain`). To resume from the store, the SDK writes them back under a temporary
//! `CLAUDE_CONFIG_DIR` and passes `--resume`; a session Cordon's own store lacks is then
//! imported from there ([`crate::session::SessionStore::import`]).
//!
//! The transcript is read back from the end of what was already mirrored, complete lines
//! only (a record being written is sent with the next frame).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Longest path component the SDK's project keys keep whole.
const MAX_KEY_LENGTH: usize = 200;
/// Entries of one frame stop growing past this many bytes (a larger record goes alone).
const FRAME_BYTES: usize = 512 * 1024;

/// Claude Code's configuration directory as the SDK resolves it.
pub fn config_dir() -> Option<PathBuf> {
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")),
    }
}

/// The SDK's project key for `dir` (canonical): non-alphanumerics made `-`; a longer
/// key is cut and given the hash of the whole path, as Claude Code names it.
pub fn project_key(dir: &Path) -> String {
    let path = dir.to_string_lossy();
    let clean: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if clean.chars().count() <= MAX_KEY_LENGTH {
        return clean;
    }
    let cut: String = clean.chars().take(MAX_KEY_LENGTH).collect();
    format!("{cut}-{}", js_hash36(&path))
}

/// The 32-bit string hash in base 36 that suffixes long project keys, as the Python SDK
/// computes it (the client this key must agree with): over the characters,
/// `h = h * 31 + char` wrapping as a signed 32-bit integer, then its absolute value.
fn js_hash36(s: &str) -> String {
    let mut h: i32 = 0;
    for c in s.chars() {
        // A char is at most 0x10FFFF: it fits an i32.
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(c as i32);
    }
    let mut n = h.unsigned_abs();
    if n == 0 {
        return "0".into();
    }
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// Where the SDK keeps (or materialises) the session `id` of `workspace`.
pub fn store_path(config_dir: &Path, workspace: &Path, id: &str) -> PathBuf {
    config_dir
        .join("projects")
        .join(project_key(workspace))
        .join(format!("{id}.jsonl"))
}

/// One session's transcript, read forward as it grows.
#[derive(Debug)]
pub struct TranscriptMirror {
    transcript: PathBuf,
    file_path: String,
    offset: u64,
}

impl TranscriptMirror {
    /// Mirrors `transcript` as the store's `file_path`; a resumed session's records are
    /// in the store already, so its mirror starts at the transcript's current end.
    pub fn new(transcript: &Path, file_path: &Path, from_start: bool) -> Self {
        let offset = if from_start {
            0
        } else {
            std::fs::metadata(transcript).map_or(0, |m| m.len())
        };
        Self {
            transcript: transcript.to_path_buf(),
            file_path: file_path.display().to_string(),
            offset,
        }
    }

    /// The frames for what was written since the last call (none when nothing was).
    pub fn frames(&mut self) -> Vec<Value> {
        let lines = match self.complete_lines() {
            Ok(lines) => lines,
            Err(e) => {
                tracing::warn!(path = %self.transcript.display(), error = %e, "the transcript could not be mirrored");
                return Vec::new();
            }
        };
        let mut frames = Vec::new();
        let mut entries: Vec<Value> = Vec::new();
        let mut size = 0;
        for line in lines {
            let Ok(entry) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            if size > 0 && size + line.len() > FRAME_BYTES {
                frames.push(self.frame(std::mem::take(&mut entries)));
                size = 0;
            }
            size += line.len();
            entries.push(entry);
        }
        if !entries.is_empty() {
            frames.push(self.frame(entries));
        }
        frames
    }

    fn frame(&self, entries: Vec<Value>) -> Value {
        json!({"type": "transcript_mirror", "filePath": self.file_path, "entries": entries})
    }

    /// The complete lines past the offset (which moves past them).
    fn complete_lines(&mut self) -> std::io::Result<Vec<Vec<u8>>> {
        let mut file = std::fs::File::open(&self.transcript)?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        let Some(end) = buf.iter().rposition(|b| *b == b'\n') else {
            return Ok(Vec::new());
        };
        self.offset += end as u64 + 1;
        Ok(buf[..end]
            .split(|b| *b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .map(<[u8]>::to_vec)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn project_keys_are_the_sdks() {
        assert_eq!(project_key(Path::new("/tmp/probe/ws")), "-tmp-probe-ws");
        assert_eq!(project_key(Path::new("/a/b_c.d")), "-a-b-c-d");
        // Past 200 characters: cut, then the path's hash (the SDK's `_simple_hash`).
        let long = format!("/{}", "x".repeat(250));
        let key = project_key(Path::new(&long));
        assert!(key.starts_with(&format!("-{}", "x".repeat(199))), "{key}");
        assert_eq!(key.len(), 201 + js_hash36(&long).len());
        assert_eq!(js_hash36(""), "0");
        // "a" is 97: base 36 "2p".
        assert_eq!(js_hash36("a"), "2p");
        assert_eq!(
            store_path(Path::new("/c"), Path::new("/w"), "id"),
            Path::new("/c/projects/-w/id.jsonl")
        );
    }

    #[test]
    fn new_complete_records_go_out_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{\"uuid\":\"a\"}\n").unwrap();
        let mut fresh = TranscriptMirror::new(&path, Path::new("/c/projects/-w/s.jsonl"), true);
        let mut resumed = TranscriptMirror::new(&path, Path::new("/x"), false);
        let frames = fresh.frames();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0]["type"], "transcript_mirror");
        assert_eq!(frames[0]["filePath"], "/c/projects/-w/s.jsonl");
        assert_eq!(frames[0]["entries"], json!([{"uuid": "a"}]));
        assert!(fresh.frames().is_empty());
        assert!(
            resumed.frames().is_empty(),
            "a resumed session starts at the end"
        );
        // A line being written waits for its newline.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"uuid\":\"b\"}\n{\"uuid\":").unwrap();
        let got: Vec<Value> = fresh
            .frames()
            .into_iter()
            .flat_map(|f| f["entries"].as_array().unwrap().clone())
            .collect();
        assert_eq!(got, [json!({"uuid": "b"})]);
        f.write_all(b"\"c\"}\n").unwrap();
        assert_eq!(fresh.frames()[0]["entries"], json!([{"uuid": "c"}]));
        assert_eq!(resumed.frames()[0]["entries"].as_array().unwrap().len(), 2);
    }
}
