//! Grep's output: the sink that turns searcher events into `path:line:text` lines, and the
//! buffer that enforces `head_limit` and MAX_GREP_OUTPUT_BYTES.

use grep_searcher::{Searcher, Sink, SinkContext, SinkMatch};

use crate::limits::{MAX_GREP_OUTPUT_BYTES, MAX_READ_LINE_CHARS};
use crate::proto::grep_request::OutputMode;

/// The output text with its two caps. Once a line does not fit, nothing more is added.
pub(crate) struct Output {
    text: String,
    lines: u64,
    head_limit: u64,
    truncated: bool,
}

impl Output {
    pub fn new(head_limit: u32) -> Self {
        Self {
            text: String::new(),
            lines: 0,
            head_limit: u64::from(head_limit),
            truncated: false,
        }
    }

    /// Adds one line; false when a cap was reached (the line is dropped).
    pub fn push(&mut self, line: &str) -> bool {
        let over_head = self.head_limit > 0 && self.lines >= self.head_limit;
        if self.truncated || over_head || self.text.len() + line.len() + 1 > MAX_GREP_OUTPUT_BYTES {
            self.truncated = true;
            return false;
        }
        self.text.push_str(line);
        self.text.push('\n');
        self.lines += 1;
        true
    }

    pub fn truncated(&self) -> bool {
        self.truncated
    }

    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    pub fn into_text(self) -> String {
        self.text
    }
}

/// Collects one file's matches; in content mode it also writes their lines.
pub(crate) struct FileSink<'a> {
    path: &'a str,
    mode: OutputMode,
    numbers: bool,
    out: &'a mut Output,
    matches: u64,
    started: bool,
}

impl<'a> FileSink<'a> {
    pub fn new(path: &'a str, mode: OutputMode, numbers: bool, out: &'a mut Output) -> Self {
        Self {
            path,
            mode,
            numbers,
            out,
            matches: 0,
            started: false,
        }
    }

    pub fn matches(&self) -> u64 {
        self.matches
    }

    /// Writes `bytes` (one or more lines, starting at line `first`) with separator `sep`.
    /// False once the output is full.
    fn lines(&mut self, searcher: &Searcher, bytes: &[u8], first: Option<u64>, sep: char) -> bool {
        if !self.started {
            self.started = true;
            let context = searcher.before_context() > 0 || searcher.after_context() > 0;
            if context && !self.out.is_empty() && !self.out.push("--") {
                return false;
            }
        }
        let text = String::from_utf8_lossy(bytes);
        for (i, line) in text.lines().enumerate() {
            let line: String = line.chars().take(MAX_READ_LINE_CHARS).collect();
            let formatted = match first {
                Some(n) if self.numbers => format!("{}{sep}{}{sep}{line}", self.path, n + i as u64),
                _ => format!("{}{sep}{line}", self.path),
            };
            if !self.out.push(&formatted) {
                return false;
            }
        }
        true
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matches += 1;
        if self.mode != OutputMode::Content {
            return Ok(true);
        }
        Ok(self.lines(searcher, mat.bytes(), mat.line_number(), ':'))
    }

    fn context(&mut self, searcher: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        Ok(self.lines(searcher, ctx.bytes(), ctx.line_number(), '-'))
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, Self::Error> {
        Ok(self.out.push("--"))
    }
}
