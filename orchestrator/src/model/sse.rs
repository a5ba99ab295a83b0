//! An incremental Server-Sent Events parser.
//!
//! Network chunks split anywhere, including inside a UTF-8 character or between the CR and
//! LF of a line ending, so lines are split on bytes and only complete lines are looked at.
//! Nothing is allocated per byte: the parser keeps one buffer for a line that spans chunks
//! and one for the event's data, and hands each dispatched event to a callback as borrowed
//! slices (the caller decodes the JSON straight from them).
//!
//! Supported: `event:` and `data:` fields (several data lines joined with `\n`), `id:` and
//! `retry:` (ignored: we never reconnect with Last-Event-ID), comments (lines starting with
//! `:`), dispatch on a blank line, and CRLF, CR or LF line endings. An event still open at
//! end of stream is discarded, as the SSE specification says.

/// One dispatched event, borrowed from the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field; empty when the event had none (the spec's "message").
    pub event: &'a str,
    /// The data lines joined with `\n`.
    pub data: &'a [u8],
}

/// Errors from the SSE layer itself.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// A single line or event grew past the limit: a broken or hostile upstream, refuse it
    /// instead of buffering without bound.
    #[error("server-sent event larger than {limit} bytes")]
    EventTooLarge { limit: usize },
}

/// Default cap on one event (all its data lines) or one line: far above any real event
/// (deltas are small), small enough that a hostile stream cannot exhaust memory.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Incremental parser; feed it chunks in order.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of a line whose end has not arrived yet.
    line: Vec<u8>,
    event: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous chunk ended in CR: a LF at the start of the next belongs to it.
    skip_lf: bool,
    max_event_bytes: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    pub fn with_limit(max_event_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            event: Vec::new(),
            data: Vec::new(),
            has_data: false,
            skip_lf: false,
            max_event_bytes,
        }
    }

    /// True when bytes of an unfinished line or event are buffered.
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_data || !self.event.is_empty()
    }

    /// Feeds one chunk; calls `on_event` for every event it completes. Stops at the first
    /// error (the parser should not be fed again after one).
    pub fn feed<E, F>(&mut self, chunk: &[u8], mut on_event: F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(SseEvent<'_>) -> Result<(), E>,
    {
        let mut rest = chunk;
        if self.skip_lf && !rest.is_empty() {
            self.skip_lf = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(eol) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let consumed = match rest.get(eol + 1) {
                Some(b'\n') if rest[eol] == b'\r' => eol + 2,
                None if rest[eol] == b'\r' => {
                    self.skip_lf = true;
                    eol + 1
                }
                _ => eol + 1,
            };
            if self.line.is_empty() {
                self.process_line(&rest[..eol], &mut on_event)?;
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&rest[..eol]);
                let result = self.process_line(&line, &mut on_event);
                line.clear();
                self.line = line;
                result?;
            }
            rest = &rest[consumed..];
        }
        if !rest.is_empty() {
            if self.line.len() + rest.len() > self.max_event_bytes {
                return Err(SseError::EventTooLarge {
                    limit: self.max_event_bytes,
                }
                .into());
            }
            self.line.extend_from_slice(rest);
        }
        Ok(())
    }

    fn process_line<E, F>(&mut self, line: &[u8], on_event: &mut F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(SseEvent<'_>) -> Result<(), E>,
    {
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max_event_bytes {
                    return Err(SseError::EventTooLarge {
                        limit: self.max_event_bytes,
                    }
                    .into());
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            // id and retry only matter for automatic reconnection, which we never do:
            // a broken stream restarts the whole request. Unknown fields are ignored.
            _ => {}
        }
        Ok(())
    }

    fn dispatch<E, F>(&mut self, on_event: &mut F) -> Result<(), E>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), E>,
    {
        let result = if self.has_data {
            let event = std::str::from_utf8(&self.event).unwrap_or("");
            on_event(SseEvent {
                event,
                data: &self.data,
            })
        } else {
            Ok(())
        };
        self.event.clear();
        self.data.clear();
        self.has_data = false;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Owned {
        event: String,
        data: String,
    }

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<Owned> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser
                .feed::<SseError, _>(chunk, |e| {
                    out.push(Owned {
                        event: e.event.to_owned(),
                        data: String::from_utf8(e.data.to_vec()).unwrap(),
                    });
                    Ok(())
                })
                .unwrap();
        }
        out
    }

    fn ev(event: &str, data: &str) -> Owned {
        Owned {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn lf_crlf_and_cr_line_endings() {
        for nl in ["\n", "\r\n", "\r"] {
            let text = format!("event: a{nl}data: 1{nl}{nl}data: 2{nl}{nl}");
            assert_eq!(
                parse_chunks(&[text.as_bytes()]),
                vec![ev("a", "1"), ev("", "2")],
                "{nl:?}"
            );
        }
    }

    #[test]
    fn comments_multi_line_data_and_fields_without_colon() {
        let text = b": keep-alive\nevent: x\ndata: one\ndata:two\ndata\nid: 7\nretry: 10\n\n";
        assert_eq!(parse_chunks(&[text]), vec![ev("x", "one\ntwo\n")]);
    }

    #[test]
    fn blank_line_without_data_dispatches_nothing_and_resets_event() {
        let text = b"event: lonely\n\ndata: d\n\n";
        assert_eq!(parse_chunks(&[text]), vec![ev("", "d")]);
    }

    #[test]
    fn empty_data_field_dispatches_empty_data() {
        assert_eq!(parse_chunks(&[b"data:\n\n"]), vec![ev("", "")]);
    }

    #[test]
    fn unterminated_event_at_end_is_not_dispatched() {
        let mut parser = SseParser::new();
        let mut n = 0;
        parser
            .feed::<SseError, _>(b"data: 1\n\ndata: 2\n", |_| {
                n += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 1);
        assert!(parser.has_partial());
    }

    #[test]
    fn cr_at_chunk_end_then_lf_is_one_line_ending() {
        let got = parse_chunks(&[b"data: a\r", b"\n\r", b"\ndata: b\r", b"\r"]);
        assert_eq!(got, vec![ev("", "a"), ev("", "b")]);
    }

    #[test]
    fn oversized_line_is_refused() {
        let mut parser = SseParser::with_limit(16);
        let err = parser
            .feed::<SseError, _>(&[b'x'; 40], |_| Ok(()))
            .unwrap_err();
        assert_eq!(err, SseError::EventTooLarge { limit: 16 });
        let mut parser = SseParser::with_limit(16);
        let err = parser
            .feed::<SseError, _>(b"data: 0123456789\ndata: 0123456789\n", |_| Ok(()))
            .unwrap_err();
        assert_eq!(err, SseError::EventTooLarge { limit: 16 });
    }

    const RECORDED: &str = concat!(
        "event: message_start\r\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\r\n\r\n",
        ": comment\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,",
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"h\u{e9}llo \u{1f600} \u{4e16}\"}}\n\n",
        "event: ping\rdata: {\"type\": \"ping\"}\r\r",
        "data: line1\ndata: line2\n\n",
    );

    #[test]
    fn every_two_way_split_gives_the_same_events() {
        let bytes = RECORDED.as_bytes();
        let whole = parse_chunks(&[bytes]);
        assert_eq!(whole.len(), 4);
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(parse_chunks(&[a, b]), whole, "split at {split}");
        }
    }

    #[test]
    fn every_three_way_split_gives_the_same_events() {
        let bytes = RECORDED.as_bytes();
        let whole = parse_chunks(&[bytes]);
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let got = parse_chunks(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
                assert_eq!(got, whole, "splits at {i},{j}");
            }
        }
    }

    #[test]
    fn byte_by_byte_gives_the_same_events() {
        let bytes = RECORDED.as_bytes();
        let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(parse_chunks(&chunks), parse_chunks(&[bytes]));
    }
}
