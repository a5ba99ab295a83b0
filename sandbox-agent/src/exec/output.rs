//! Capping a command's output: the first `limit` characters are streamed; past that,
//! nothing more is streamed and the whole output (stdout and stderr interleaved as they
//! arrived) goes to a file under the tmp dir, whose path the exit status names.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// Counts characters the cheap way: every byte that does not continue a UTF-8 sequence
/// starts one (invalid bytes count one each).
fn is_char_start(b: u8) -> bool {
    b & 0xC0 != 0x80
}

#[derive(Debug)]
pub struct OutputCap {
    limit_chars: u64,
    sent_chars: u64,
    total_bytes: u64,
    /// Everything streamed so far, kept until a cut makes the file necessary.
    sent: Vec<u8>,
    truncated: bool,
    file: Option<File>,
    file_path: PathBuf,
    file_error: Option<String>,
}

/// The cap's verdict once the command is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapSummary {
    pub truncated: bool,
    pub total_bytes: u64,
    /// Set when truncated and the full output was saved.
    pub full_output_path: Option<PathBuf>,
    /// The marker chunk to stream last, when truncated.
    pub marker: Option<Vec<u8>>,
}

impl OutputCap {
    /// `file_path` is where the whole output goes if it has to be cut (created only then).
    pub fn new(limit_chars: u64, file_path: PathBuf) -> Self {
        Self {
            limit_chars,
            sent_chars: 0,
            total_bytes: 0,
            sent: Vec::new(),
            truncated: false,
            file: None,
            file_path,
            file_error: None,
        }
    }

    /// Takes one chunk; returns the part to stream (possibly empty).
    pub fn accept(&mut self, data: &[u8]) -> Vec<u8> {
        self.total_bytes += data.len() as u64;
        if self.truncated {
            self.save(data);
            return Vec::new();
        }
        let mut cut = data.len();
        let mut chars = self.sent_chars;
        for (i, b) in data.iter().enumerate() {
            if is_char_start(*b) {
                if chars == self.limit_chars {
                    cut = i;
                    break;
                }
                chars += 1;
            }
        }
        self.sent_chars = chars;
        let streamed = data[..cut].to_vec();
        if cut < data.len() {
            self.truncated = true;
            self.open_file();
            let so_far = std::mem::take(&mut self.sent);
            self.save(&so_far);
            self.save(data);
        } else {
            self.sent.extend_from_slice(&streamed);
        }
        streamed
    }

    fn open_file(&mut self) {
        let opened = (|| -> io::Result<File> {
            if let Some(dir) = self.file_path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // create_new + O_NOFOLLOW: a sandboxed process cannot make us write through a
            // symlink or into a file it prepared.
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&self.file_path)
        })();
        match opened {
            Ok(f) => self.file = Some(f),
            Err(e) => self.file_error = Some(e.to_string()),
        }
    }

    fn save(&mut self, data: &[u8]) {
        if let Some(f) = self.file.as_mut()
            && let Err(e) = f.write_all(data)
        {
            self.file_error = Some(e.to_string());
            self.file = None;
        }
    }

    pub fn finish(mut self) -> CapSummary {
        if !self.truncated {
            return CapSummary {
                truncated: false,
                total_bytes: self.total_bytes,
                full_output_path: None,
                marker: None,
            };
        }
        if let Some(f) = self.file.as_mut()
            && let Err(e) = f.flush()
        {
            self.file_error = Some(e.to_string());
        }
        let total = self.total_bytes;
        let (path, marker) = match &self.file_error {
            None => (
                Some(self.file_path.clone()),
                format!(
                    "\n... [output truncated: {total} bytes total; full output in {}]\n",
                    self.file_path.display()
                ),
            ),
            Some(e) => (
                None,
                format!(
                    "\n... [output truncated: {total} bytes total; full output could not be saved: {e}]\n"
                ),
            ),
        };
        CapSummary {
            truncated: true,
            total_bytes: total,
            full_output_path: path,
            marker: Some(marker.into_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_passes_whole_and_makes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut cap = OutputCap::new(10, path.clone());
        assert_eq!(cap.accept(b"hello"), b"hello");
        assert_eq!(cap.accept(b"12345"), b"12345");
        let s = cap.finish();
        assert!(!s.truncated);
        assert_eq!(s.total_bytes, 10);
        assert!(!path.exists());
    }

    #[test]
    fn long_output_is_cut_on_a_char_boundary_and_saved_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("log");
        let mut cap = OutputCap::new(3, path.clone());
        assert_eq!(cap.accept("aé".as_bytes()), "aé".as_bytes());
        assert_eq!(cap.accept("éé".as_bytes()), "é".as_bytes());
        assert_eq!(cap.accept(b"more"), b"");
        let s = cap.finish();
        assert!(s.truncated);
        assert_eq!(s.full_output_path.as_deref(), Some(path.as_path()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "aééémore");
        let marker = String::from_utf8(s.marker.unwrap()).unwrap();
        assert!(marker.contains("11 bytes total"), "{marker}");
    }

    #[test]
    fn an_existing_file_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut cap = OutputCap::new(1, link);
        cap.accept(b"abc");
        let s = cap.finish();
        assert!(s.full_output_path.is_none());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}
