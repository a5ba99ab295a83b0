//! Keys from the terminal, as the session understands them: one reader task turns
//! crossterm's events into [`Key`]s on a channel, so the trust question, the prompt, a
//! running turn and a permission question all read from the same place.
//!
//! One reader for the whole run, never a second: dropping a crossterm `EventStream` wakes
//! the shared event source, and the next poll of it can see that wake-up before the
//! terminal's readiness in the same batch. The source then reports the wake-up and drops
//! the readiness, which is edge-triggered and not reported again until more input comes,
//! so keys typed at that moment sit unread (a test typing at once after the prompt hung
//! on it). Started once, before the first question, and kept until the run ends, the
//! reader is never dropped while anyone still reads keys.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use futures::StreamExt;
use tokio::sync::mpsc;

/// One key (or pasted text) the session acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Paste(String),
    Enter,
    Backspace,
    Delete,
    Left,
    Right,
    Home,
    End,
    Up,
    Down,
    Esc,
    /// Ctrl-C: interrupt the turn, or (twice at an idle prompt) exit.
    Interrupt,
    /// Ctrl-D: exit at an empty prompt.
    Eof,
    /// Shift-Tab: the next permission mode.
    CycleMode,
    /// Ctrl-U: clear the line.
    ClearLine,
}

/// The [`Key`] for a crossterm event; `None` for what the session ignores.
pub fn from_event(event: Event) -> Option<Key> {
    match event {
        Event::Key(key) if key.kind != KeyEventKind::Release => from_key(key),
        Event::Paste(text) => Some(Key::Paste(text)),
        _ => None,
    }
}

fn from_key(key: KeyEvent) -> Option<Key> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    Some(match key.code {
        KeyCode::Char('c') if ctrl => Key::Interrupt,
        KeyCode::Char('d') if ctrl => Key::Eof,
        KeyCode::Char('u') if ctrl => Key::ClearLine,
        KeyCode::Char('a') if ctrl => Key::Home,
        KeyCode::Char('e') if ctrl => Key::End,
        KeyCode::Char(_) if ctrl => return None,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::BackTab => Key::CycleMode,
        KeyCode::Tab if key.modifiers.contains(KeyModifiers::SHIFT) => Key::CycleMode,
        KeyCode::Enter => Key::Enter,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Delete => Key::Delete,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Esc => Key::Esc,
        _ => return None,
    })
}

/// The terminal's keys, read by the run's one reader task.
pub struct Keys(mpsc::UnboundedReceiver<Key>);

impl Keys {
    /// Starts the reader: it reads the terminal until it closes, each key to this
    /// channel. Call once per run (see the module documentation). Keys are keys only in
    /// raw mode (else Ctrl-C is a signal, and a line arrives only at Enter).
    pub fn start() -> Keys {
        Keys(spawn_reader())
    }

    /// The next key; `None` once the terminal is gone.
    pub async fn next(&mut self) -> Option<Key> {
        self.0.recv().await
    }

    /// Call just before a question is drawn: what was typed before it was on the screen
    /// can then never answer it (and a key typed once it is seen always does). Returns
    /// every key typed until then, for the caller to keep as type-ahead or drop: a `y`
    /// typed as the start of a prompt must not trust a hostile workspace, nor an `a`
    /// allow a command the user had not yet seen.
    ///
    /// The keys already queued are not all: some may still be between the terminal and
    /// this queue (read by crossterm, not yet forwarded by the reader task), so the queue
    /// is emptied until the input has been quiet for [`SETTLE_QUIET`] (at most
    /// [`SETTLE_MAX`]: under a steady stream of input the question is drawn anyway).
    /// Nothing is flushed from the terminal here: inside a bracketed paste that would cut
    /// its end marker off and leave every later key inside the paste.
    pub async fn typed_before_question(&mut self) -> Vec<Key> {
        self.settle(SETTLE_QUIET, SETTLE_MAX).await
    }

    /// Every key until the input has been quiet for `quiet`, or `max` has passed.
    async fn settle(&mut self, quiet: Duration, max: Duration) -> Vec<Key> {
        let mut early = Vec::new();
        let deadline = tokio::time::Instant::now() + max;
        loop {
            while let Ok(key) = self.0.try_recv() {
                early.push(key);
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            match tokio::time::timeout(quiet.min(left), self.0.recv()).await {
                Ok(Some(key)) => early.push(key),
                // Quiet for long enough, or the terminal is gone.
                Err(_) | Ok(None) => break,
            }
        }
        early
    }
}

/// How long the input must stay quiet before a question is drawn.
pub const SETTLE_QUIET: Duration = Duration::from_millis(30);
/// The longest a question waits for the input to settle.
pub const SETTLE_MAX: Duration = Duration::from_millis(300);

/// Discards the input the terminal `tty` holds unread (tcflush, as a password prompt
/// does). Only outside raw mode and bracketed paste (the trust question, before either
/// begins): there a half-typed line sits in the terminal until raw mode would hand it to
/// the reader. Not a terminal: nothing to discard.
pub fn discard_unread_input(tty: BorrowedFd<'_>) {
    let _ = nix::sys::termios::tcflush(tty, nix::sys::termios::FlushArg::TCIFLUSH);
}

#[cfg(test)]
impl Keys {
    /// Keys from `rx` instead of the terminal.
    fn from_channel(rx: mpsc::UnboundedReceiver<Key>) -> Keys {
        Keys(rx)
    }
}

fn spawn_reader() -> mpsc::UnboundedReceiver<Key> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = EventStream::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    if let Some(key) = from_event(event)
                        && tx.send(key).is_err()
                    {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the terminal failed");
                    let _ = tx.send(Key::Eof);
                    break;
                }
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> Option<Key> {
        from_event(Event::Key(KeyEvent::new(code, modifiers)))
    }

    #[tokio::test]
    async fn keys_typed_before_a_question_are_taken_off_and_later_ones_answer() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut keys = Keys::from_channel(rx);
        for c in "ye".chars() {
            tx.send(Key::Char(c)).unwrap();
        }
        // One more still on its way when the question comes: sent at once, it lands
        // well within the (here generous) quiet time.
        let late = tx.clone();
        tokio::spawn(async move { late.send(Key::Char('s')).unwrap() });
        let quiet = Duration::from_secs(1);
        let early = keys.settle(quiet, quiet * 30).await;
        assert_eq!(early, vec![Key::Char('y'), Key::Char('e'), Key::Char('s')]);
        // Typed once the question is drawn: the answer.
        tx.send(Key::Char('n')).unwrap();
        assert_eq!(keys.next().await, Some(Key::Char('n')));
    }

    #[tokio::test]
    async fn a_steady_stream_of_keys_does_not_hold_a_question_back() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut keys = Keys::from_channel(rx);
        tokio::spawn(async move {
            while tx.send(Key::Char('x')).is_ok() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        // Never quiet for a whole minute: the cap ends the wait.
        let flood = keys
            .settle(Duration::from_secs(60), Duration::from_millis(200))
            .await;
        assert!(!flood.is_empty());
    }

    #[test]
    fn the_terminals_unread_input_is_discarded() {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        // A terminal of the test's own: what is typed on its far side is unread input.
        let pty = nix::pty::openpty(None, None).unwrap();
        let mut tty = std::fs::File::from(pty.slave);
        let mut typist = std::fs::File::from(pty.master);
        let mut termios = nix::sys::termios::tcgetattr(&tty).unwrap();
        nix::sys::termios::cfmakeraw(&mut termios);
        nix::sys::termios::tcsetattr(&tty, nix::sys::termios::SetArg::TCSANOW, &termios).unwrap();
        typist.write_all(b"y").unwrap();
        // Until the kernel has it: then it is discarded.
        let readable = || {
            let mut fds = [nix::poll::PollFd::new(
                tty.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).unwrap() == 1
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !readable() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(readable(), "the typed key reached the terminal");
        discard_unread_input(tty.as_fd());
        assert!(!readable(), "the typed key is gone");
        typist.write_all(b"n").unwrap();
        let mut got = [0u8; 1];
        tty.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"n", "what is typed afterwards is read");
    }

    #[test]
    fn control_keys_and_shift_tab() {
        assert_eq!(
            key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Key::Interrupt)
        );
        assert_eq!(
            key(KeyCode::BackTab, KeyModifiers::SHIFT),
            Some(Key::CycleMode)
        );
        assert_eq!(
            key(KeyCode::Char('y'), KeyModifiers::NONE),
            Some(Key::Char('y'))
        );
        assert_eq!(key(KeyCode::Char('z'), KeyModifiers::CONTROL), None);
        assert_eq!(
            from_event(Event::Paste("a\nb".into())),
            Some(Key::Paste("a\nb".into()))
        );
    }
}
