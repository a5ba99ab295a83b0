//! Output a background shell produced that the model has not read yet: kept up to a
//! bound, past which the oldest bytes are dropped (and counted), so a chatty command that
//! nobody reads costs bounded memory and is never slowed down.

/// Bytes of unread output kept per shell.
pub const UNREAD_MAX_BYTES: usize = 1024 * 1024;

#[derive(Debug, Default)]
pub struct Unread {
    bytes: Vec<u8>,
    /// Bytes dropped unread since the last take.
    dropped: u64,
}

impl Unread {
    pub fn push(&mut self, data: &[u8]) {
        self.push_bounded(data, UNREAD_MAX_BYTES);
    }

    fn push_bounded(&mut self, data: &[u8], max: usize) {
        self.bytes.extend_from_slice(data);
        if self.bytes.len() > max {
            let excess = self.bytes.len() - max;
            self.bytes.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    /// The unread output and how many bytes before it were dropped; both reset.
    pub fn take(&mut self) -> (Vec<u8>, u64) {
        (
            std::mem::take(&mut self.bytes),
            std::mem::take(&mut self.dropped),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_take_returns_only_what_came_since_the_last() {
        let mut u = Unread::default();
        u.push(b"one\n");
        assert_eq!(u.take(), (b"one\n".to_vec(), 0));
        u.push(b"two\n");
        u.push(b"three\n");
        assert_eq!(u.take(), (b"two\nthree\n".to_vec(), 0));
        assert_eq!(u.take(), (Vec::new(), 0));
    }

    #[test]
    fn past_the_bound_the_oldest_bytes_go_and_are_counted() {
        let mut u = Unread::default();
        u.push_bounded(b"abcdef", 4);
        u.push_bounded(b"gh", 4);
        assert_eq!(u.take(), (b"efgh".to_vec(), 4));
        u.push_bounded(b"ij", 4);
        assert_eq!(u.take(), (b"ij".to_vec(), 0));
    }
}
