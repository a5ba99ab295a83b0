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
