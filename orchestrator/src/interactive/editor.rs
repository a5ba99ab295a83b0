//! The input line: the text being typed, the cursor, and the session's history of lines
//! (Up and Down walk it, as in a shell). Pure state; the screen draws it.

use super::keys::Key;

/// What a key did to the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// The line changed (redraw it).
    Changed,
    /// Enter: the finished line.
    Submitted(String),
    /// A key the editor does not handle (the caller decides).
    Other(Key),
}

/// One input line with history.
#[derive(Debug, Default)]
pub struct LineEditor {
    /// The text, as characters (the cursor indexes them).
    line: Vec<char>,
    cursor: usize,
    history: Vec<String>,
    /// Where Up/Down are in `history` (`history.len()` is the line being typed).
    position: usize,
    /// The line being typed when Up was first pressed.
    draft: Vec<char>,
}

impl LineEditor {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn text(&self) -> String {
        self.line.iter().collect()
    }

    /// The cursor, in characters from the start.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.line.is_empty()
    }

    pub fn clear(&mut self) {
        self.line.clear();
        self.cursor = 0;
        self.position = self.history.len();
    }

    pub fn handle(&mut self, key: Key) -> Edit {
        match key {
            Key::Char(c) => self.insert(&[c]),
            Key::Paste(text) => {
                let chars: Vec<char> = text
                    .replace("\r\n", "\n")
                    .replace('\r', "\n")
                    .chars()
                    .collect();
                self.insert(&chars);
            }
            Key::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                self.line.remove(self.cursor);
            }
            Key::Delete if self.cursor < self.line.len() => {
                self.line.remove(self.cursor);
            }
            Key::Backspace | Key::Delete => {}
            Key::Left => self.cursor = self.cursor.saturating_sub(1),
            Key::Right => self.cursor = (self.cursor + 1).min(self.line.len()),
            Key::Home => self.cursor = 0,
            Key::End => self.cursor = self.line.len(),
            Key::ClearLine => self.clear(),
            Key::Up => self.recall(-1),
            Key::Down => self.recall(1),
            Key::Enter => return Edit::Submitted(self.submit()),
            other => return Edit::Other(other),
        }
        Edit::Changed
    }

    fn insert(&mut self, chars: &[char]) {
        for (i, c) in chars.iter().enumerate() {
            self.line.insert(self.cursor + i, *c);
        }
        self.cursor += chars.len();
    }

    /// Ends the line: remembered in the history unless blank or a repeat of the last one.
    fn submit(&mut self) -> String {
        let text = self.text();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        self.clear();
        text
    }

    fn recall(&mut self, step: isize) {
        let Some(target) = self.position.checked_add_signed(step) else {
            return;
        };
        if target > self.history.len() {
            return;
        }
        if self.position == self.history.len() {
            self.draft = self.line.clone();
        }
        self.position = target;
        self.line = match self.history.get(target) {
            Some(entry) => entry.chars().collect(),
            None => self.draft.clone(),
        };
        self.cursor = self.line.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(editor: &mut LineEditor, text: &str) {
        for c in text.chars() {
            editor.handle(Key::Char(c));
        }
    }

    #[test]
    fn typing_editing_and_enter() {
        let mut e = LineEditor::new();
        typed(&mut e, "helo");
        e.handle(Key::Left);
        typed(&mut e, "l");
        assert_eq!(e.text(), "hello");
        e.handle(Key::Home);
        e.handle(Key::Delete);
        assert_eq!(e.text(), "ello");
        e.handle(Key::End);
        e.handle(Key::Backspace);
        assert_eq!(e.handle(Key::Enter), Edit::Submitted("ell".into()));
        assert!(e.is_empty());
        assert_eq!(e.handle(Key::Interrupt), Edit::Other(Key::Interrupt));
    }

    #[test]
    fn up_and_down_walk_the_history_and_keep_the_draft() {
        let mut e = LineEditor::new();
        for line in ["one", "two", "two", "  "] {
            typed(&mut e, line);
            e.handle(Key::Enter);
        }
        typed(&mut e, "dra");
        e.handle(Key::Up);
        assert_eq!(e.text(), "two");
        e.handle(Key::Up);
        assert_eq!(e.text(), "one");
        e.handle(Key::Up);
        assert_eq!(e.text(), "one");
        e.handle(Key::Down);
        e.handle(Key::Down);
        assert_eq!(e.text(), "dra");
        e.handle(Key::Down);
        assert_eq!(e.text(), "dra");
    }

    #[test]
    fn a_paste_keeps_its_lines() {
        let mut e = LineEditor::new();
        e.handle(Key::Paste("a\r\nb".into()));
        assert_eq!(e.text(), "a\nb");
        assert_eq!(e.cursor(), 3);
    }
}
