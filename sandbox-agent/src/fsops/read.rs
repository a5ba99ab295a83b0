//! Read: a file as numbered lines, one window of it at a time, or a description of it when
//! it is binary. The file is streamed once: every byte feeds the digest and the line count,
//! and only the requested window is kept, so memory stays bounded whatever the file size.
//! A `raw` read returns the bytes whole instead (images and PDFs), up to
//! [`MAX_READ_RAW_BYTES`].

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{FileStat, Resolver, io_err, mtime_ns, numbered, open_regular};
use crate::error::AgentError;
use crate::limits::{
    DEFAULT_READ_LINES, MAX_READ_LINE_CHARS, MAX_READ_RAW_BYTES, MAX_READ_RESPONSE_BYTES,
};
use crate::proto::{ReadRequest, ReadResponse};

/// Bytes inspected to tell text from binary.
const SNIFF_BYTES: usize = 8 * 1024;
/// Bytes of one line kept before it is cut (enough for MAX_READ_LINE_CHARS characters).
const LINE_KEEP_BYTES: usize = MAX_READ_LINE_CHARS * 4 + 1;

/// Reads `req.path` as numbered lines (see the module docs and `ReadResponse`).
pub fn read(resolver: &Resolver, req: &ReadRequest) -> Result<ReadResponse, AgentError> {
    let opened = open(resolver, req)?;
    read_opened(opened, req)
}

/// A file opened for [`read_opened`]: resolved beneath the roots, checked to be regular.
pub struct Opened {
    file: std::fs::File,
    stat: FileStat,
}

impl Opened {
    /// The file's size when opened, in bytes.
    pub fn size(&self) -> u64 {
        u64::try_from(self.stat.st_size).unwrap_or(u64::MAX)
    }
}

/// The first half of [`read`]: resolve and open, without reading any content (cheap, so a
/// caller may run it inline and decide by [`Opened::size`] where the reading runs).
pub fn open(resolver: &Resolver, req: &ReadRequest) -> Result<Opened, AgentError> {
    let path = Path::new(&req.path);
    let entry = resolver.entry(path)?;
    let (file, stat) = open_regular(&entry, path)?;
    Ok(Opened { file, stat })
}

/// The second half of [`read`]: streams the opened file into the response.
pub fn read_opened(opened: Opened, req: &ReadRequest) -> Result<ReadResponse, AgentError> {
    if req.raw {
        return read_raw(opened, req);
    }
    let path = Path::new(&req.path);
    let Opened { mut file, stat } = opened;
    let mut hasher = Sha256::new();
    let head = read_up_to(&mut file, SNIFF_BYTES, path)?;
    hasher.update(&head);
    let binary = is_binary(&head, head.len() < SNIFF_BYTES);
    let limit = if req.limit == 0 {
        DEFAULT_READ_LINES
    } else {
        req.limit
    };
    let mut view = View::new(req.offset.max(1), limit);
    let mut size = head.len() as u64;
    if !binary {
        view.feed(&head);
    }
    // A head shorter than asked for is the whole file: no buffer, no further read.
    let mut buf = if head.len() < SNIFF_BYTES {
        Vec::new()
    } else {
        vec![0u8; 64 * 1024]
    };
    while !buf.is_empty() {
        let n = read_retrying(&mut file, &mut buf, path)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
        if !binary {
            view.feed(&buf[..n]);
        }
    }
    let mut resp = ReadResponse {
        size_bytes: size,
        mtime_ns: mtime_ns(&stat),
        sha256: hex::encode(hasher.finalize()),
        ..Default::default()
    };
    if binary {
        resp.binary_description = describe_binary(&head, size);
    } else {
        view.fill(&mut resp);
    }
    Ok(resp)
}

/// The whole file's bytes, refused past [`MAX_READ_RAW_BYTES`] (also when it grew past
/// that while being read: one byte more than the cap is read to tell).
fn read_raw(opened: Opened, req: &ReadRequest) -> Result<ReadResponse, AgentError> {
    let path = Path::new(&req.path);
    if req.offset != 0 || req.limit != 0 {
        return Err(AgentError::invalid("a raw read takes no offset or limit"));
    }
    let too_large = |size: u64| {
        AgentError::new(
            crate::error::ErrorCode::TooLarge,
            format!(
                "{} is {size} bytes, over the {MAX_READ_RAW_BYTES} bytes a whole-file read returns",
                path.display()
            ),
        )
        .with_path(path.display().to_string())
    };
    if opened.size() > MAX_READ_RAW_BYTES {
        return Err(too_large(opened.size()));
    }
    let expected = usize::try_from(opened.size()).unwrap_or(0);
    let Opened { file, stat } = opened;
    let mut data = Vec::with_capacity(expected);
    // read_to_end retries EINTR itself.
    file.take(MAX_READ_RAW_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| io_err(&e, path))?;
    if data.len() as u64 > MAX_READ_RAW_BYTES {
        return Err(too_large(data.len() as u64));
    }
    Ok(ReadResponse {
        size_bytes: data.len() as u64,
        mtime_ns: mtime_ns(&stat),
        sha256: hex::encode(Sha256::digest(&data)),
        raw_content: data,
        ..Default::default()
    })
}

fn read_retrying(
    file: &mut std::fs::File,
    buf: &mut [u8],
    path: &Path,
) -> Result<usize, AgentError> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other.map_err(|e| io_err(&e, path)),
        }
    }
}

fn read_up_to(file: &mut std::fs::File, max: usize, path: &Path) -> Result<Vec<u8>, AgentError> {
    let mut head = vec![0u8; max];
    let mut filled = 0;
    while filled < max {
        let n = read_retrying(file, &mut head[filled..], path)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    head.truncate(filled);
    Ok(head)
}

/// Binary when the sample holds a NUL byte, or is invalid UTF-8 and not mostly text
/// (more than a tenth of it invalid sequences or control bytes). A sequence cut by the
/// sample's end is not counted against it unless the file ends there.
pub(crate) fn is_binary(sample: &[u8], whole_file: bool) -> bool {
    if sample.contains(&0) {
        return true;
    }
    let mut invalid = 0usize;
    let mut chunks = sample.utf8_chunks().peekable();
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        if !last || whole_file {
            invalid += chunk.invalid().len();
        }
    }
    if invalid == 0 {
        return false;
    }
    let control = sample
        .iter()
        .filter(|&&b| (b < 0x20 && !b"\t\n\r\x0c\x1b".contains(&b)) || b == 0x7f)
        .count();
    (invalid + control) * 10 > sample.len()
}

/// "binary file, 12345 bytes (PNG image)".
pub(crate) fn describe_binary(head: &[u8], size: u64) -> String {
    match magic(head) {
        Some(kind) => format!("binary file, {size} bytes ({kind})"),
        None => format!("binary file, {size} bytes"),
    }
}

fn magic(head: &[u8]) -> Option<&'static str> {
    const TABLE: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "PNG image"),
        (b"\xff\xd8\xff", "JPEG image"),
        (b"GIF87a", "GIF image"),
        (b"GIF89a", "GIF image"),
        (b"%PDF-", "PDF document"),
        (b"PK\x03\x04", "ZIP archive"),
        (b"\x1f\x8b", "gzip data"),
        (b"BZh", "bzip2 data"),
        (b"\xfd7zXZ\x00", "xz data"),
        (b"\x28\xb5\x2f\xfd", "zstd data"),
        (b"\x7fELF", "ELF executable"),
        (b"\x00asm", "WebAssembly module"),
        (b"SQLite format 3\x00", "SQLite database"),
    ];
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return Some("WebP image");
    }
    TABLE
        .iter()
        .find(|(m, _)| head.starts_with(m))
        .map(|(_, kind)| *kind)
}

/// The window of lines being collected while the file streams past.
struct View {
    first: u64,
    end: u64,
    line_no: u64,
    current: Vec<u8>,
    pending: bool,
    out: String,
    returned: u64,
    capped: bool,
}

impl View {
    fn new(first: u64, limit: u64) -> Self {
        Self {
            first,
            end: first.saturating_add(limit),
            line_no: 1,
            current: Vec::new(),
            pending: false,
            out: String::new(),
            returned: 0,
            capped: false,
        }
    }

    fn wanted(&self) -> bool {
        !self.capped && self.line_no >= self.first && self.line_no < self.end
    }

    fn feed(&mut self, mut data: &[u8]) {
        while let Some(i) = data.iter().position(|&b| b == b'\n') {
            self.take(&data[..i]);
            self.end_line();
            data = &data[i + 1..];
        }
        if !data.is_empty() {
            self.take(data);
        }
    }

    fn take(&mut self, part: &[u8]) {
        self.pending = true;
        if self.wanted() {
            let room = LINE_KEEP_BYTES.saturating_sub(self.current.len());
            self.current
                .extend_from_slice(&part[..part.len().min(room)]);
        }
    }

    fn end_line(&mut self) {
        if self.wanted() {
            self.emit();
        }
        self.current.clear();
        self.pending = false;
        self.line_no += 1;
    }

    /// Formats the current line, or marks the view capped when it would not fit.
    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.current);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        let cut = match text.char_indices().nth(MAX_READ_LINE_CHARS) {
            Some((end, _)) => &text[..end],
            None => text,
        };
        // The numbered line is at most 20 digits, a tab, the text and a newline long.
        if self.out.len() + cut.len() + 22 > MAX_READ_RESPONSE_BYTES {
            let mut line = String::new();
            numbered(&mut line, self.line_no, cut);
            if self.out.len() + line.len() > MAX_READ_RESPONSE_BYTES {
                self.capped = true;
                return;
            }
        }
        numbered(&mut self.out, self.line_no, cut);
        self.returned += 1;
    }

    fn fill(mut self, resp: &mut ReadResponse) {
        if self.pending {
            self.end_line();
        }
        let total = self.line_no - 1;
        resp.first_line = self.first;
        resp.lines_returned = self.returned;
        resp.total_lines = total;
        resp.partial = self.returned < total;
        resp.content = self.out;
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
