//! The screen: the conversation as it streams (answers, tool calls and their results), the
//! input line with the status (the permission mode), and permission questions. Output goes
//! inline, scrolling like a shell; every terminal control is a crossterm command.
//!
//! The terminal is in raw mode for the whole session (Ctrl-C and Shift-Tab are keys, not
//! signals), so a line break is written as `\r\n`.

use std::io::{Stdout, Write};

use crossterm::cursor::{MoveDown, MoveToColumn, MoveUp};
use crossterm::style::{Color, Print, ResetColor, SetForegroundColor};
use crossterm::terminal::{Clear, ClearType};
use crossterm::{QueueableCommand, queue};

use super::editor::LineEditor;
use super::preview;
use crate::model::{ContentBlock, Message, Role, ToolResultBlock, ToolResultContent};
use crate::permissions::PermissionMode;

/// Most lines of a tool's result shown under its call.
const RESULT_LINES: usize = 3;

/// Where output goes, and what is on its last line.
pub struct Screen {
    out: Stdout,
    /// The cursor is at the start of a line.
    at_line_start: bool,
    /// Assistant text is streaming (a "●" was printed for it).
    in_text: bool,
    /// Rows of the drawn input line above the cursor (to redraw it in place).
    prompt_row: u16,
    /// The drawn input line's last row (from its first).
    prompt_end: u16,
    /// Assistant text was streamed in the current run.
    pub streamed: bool,
}

impl Default for Screen {
    fn default() -> Self {
        Self::new()
    }
}

impl Screen {
    pub fn new() -> Self {
        Self {
            out: std::io::stdout(),
            at_line_start: true,
            in_text: false,
            prompt_row: 0,
            prompt_end: 0,
            streamed: false,
        }
    }

    /// Every character shown goes through here: text the model, a tool or the repository
    /// wrote is escaped (no OSC 52 clipboard writes, no cursor moves, no title changes),
    /// and a newline becomes CR LF for the raw-mode terminal. The screen's own controls are
    /// crossterm commands, queued separately.
    fn put(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let safe = crate::output::for_terminal(text);
        let _ = self.out.queue(Print(safe.replace('\n', "\r\n")));
        self.at_line_start = text.ends_with('\n');
    }

    fn colored(&mut self, color: Color, text: &str) {
        let _ = self.out.queue(SetForegroundColor(color));
        self.put(text);
        let _ = self.out.queue(ResetColor);
    }

    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }

    /// Ends the current line if something is on it.
    pub fn newline(&mut self) {
        if !self.at_line_start {
            self.put("\n");
        }
        self.in_text = false;
    }

    /// A line of its own, in `color` (or the default).
    pub fn line(&mut self, color: Option<Color>, text: &str) {
        self.newline();
        match color {
            Some(c) => self.colored(c, text),
            None => self.put(text),
        }
        self.put("\n");
        self.flush();
    }

    /// A notice from Cordon itself (dimmed).
    pub fn note(&mut self, text: &str) {
        self.line(Some(Color::DarkGrey), text);
    }

    pub fn error(&mut self, text: &str) {
        self.line(Some(Color::Red), text);
    }

    /// A piece of assistant text as it streams.
    pub fn text_delta(&mut self, text: &str) {
        if !self.in_text {
            self.newline();
            self.colored(Color::White, "● ");
            self.in_text = true;
        }
        self.streamed = true;
        self.put(text);
        self.flush();
    }

    /// A complete message: the tool calls of an assistant turn, the results of a user
    /// turn (the typed prompt itself is already on the screen).
    pub fn message(&mut self, message: &Message) {
        for block in &message.content {
            match (message.role, block) {
                (Role::Assistant, ContentBlock::Text { text, .. }) if !self.streamed => {
                    self.text_delta(text);
                }
                (Role::Assistant, ContentBlock::ToolUse { name, input, .. }) => {
                    self.newline();
                    self.colored(Color::Cyan, "● ");
                    self.put(&preview::summary(name, input));
                    self.put("\n");
                }
                (
                    Role::User,
                    ContentBlock::ToolResult {
                        content, is_error, ..
                    },
                ) => self.tool_result(&result_text(content), *is_error),
                _ => {}
            }
        }
        self.in_text = false;
        self.flush();
    }

    fn tool_result(&mut self, text: &str, is_error: bool) {
        self.newline();
        let lines: Vec<&str> = text.lines().collect();
        let color = if is_error {
            Color::Red
        } else {
            Color::DarkGrey
        };
        for (i, l) in lines.iter().take(RESULT_LINES).enumerate() {
            let lead = if i == 0 { "  ⎿ " } else { "    " };
            self.colored(color, &format!("{lead}{}\n", preview::one_line(l, 160)));
        }
        if lines.len() > RESULT_LINES {
            let more = lines.len() - RESULT_LINES;
            self.colored(Color::DarkGrey, &format!("    … {more} more lines\n"));
        }
        if lines.is_empty() {
            self.colored(color, "  ⎿ (no output)\n");
        }
    }

    /// A permission question: the call, why it asks, its preview, the choices.
    pub fn question(&mut self, summary: &str, why: &str, details: &[String], choices: &str) {
        self.newline();
        self.colored(Color::Yellow, &format!("? Allow {summary}\n"));
        self.colored(Color::DarkGrey, &format!("  because {why}\n"));
        for l in details {
            let color = match l.chars().next() {
                Some('+') if !l.starts_with("+++") => Color::Green,
                Some('-') if !l.starts_with("---") => Color::Red,
                _ => Color::Reset,
            };
            self.colored(color, &format!("  │ {l}\n"));
        }
        self.colored(Color::Yellow, &format!("  {choices} "));
        self.flush();
    }

    /// Draws (or redraws in place) the input line: `[mode] > text`.
    pub fn prompt(&mut self, label: &str, editor: &LineEditor) {
        let prefix = format!("{label} > ");
        let text: String = editor
            .text()
            .chars()
            .map(|c| if c == '\n' { '↵' } else { c })
            .collect();
        let cols = usize::from(crossterm::terminal::size().map_or(80, |(c, _)| c).max(1));
        let width = prefix.chars().count() + text.chars().count();
        let at = prefix.chars().count() + editor.cursor();
        let _ = queue!(self.out, MoveToColumn(0));
        if self.prompt_row > 0 {
            let _ = self.out.queue(MoveUp(self.prompt_row));
        }
        let _ = self.out.queue(Clear(ClearType::FromCursorDown));
        self.colored(Color::DarkGrey, &prefix);
        self.put(&text);
        // Where the terminal left the cursor (a full last row keeps it there, pending wrap),
        // and where it should be.
        let mut end_row = width.saturating_sub(1) / cols;
        if at == width && width > 0 && width.is_multiple_of(cols) {
            self.put("\n");
            end_row += 1;
        }
        let (row, col) = (at / cols, at % cols);
        let up = u16::try_from(end_row.saturating_sub(row)).unwrap_or(u16::MAX);
        if up > 0 {
            let _ = self.out.queue(MoveUp(up));
        }
        let down = u16::try_from(row.saturating_sub(end_row)).unwrap_or(0);
        if down > 0 {
            let _ = self.out.queue(MoveDown(down));
        }
        let _ = self
            .out
            .queue(MoveToColumn(u16::try_from(col).unwrap_or(u16::MAX)));
        self.prompt_row = u16::try_from(row).unwrap_or(u16::MAX);
        self.prompt_end = u16::try_from(end_row.max(row)).unwrap_or(u16::MAX);
        self.at_line_start = false;
        self.flush();
    }

    /// Leaves the drawn input line as it is and goes below it.
    pub fn end_prompt(&mut self) {
        let below = self.prompt_end.saturating_sub(self.prompt_row);
        if below > 0 {
            let _ = self.out.queue(MoveDown(below));
        }
        self.prompt_row = 0;
        self.prompt_end = 0;
        self.at_line_start = false;
        self.newline();
        self.streamed = false;
        self.flush();
    }
}

/// The status label of the input line.
pub fn mode_label(mode: PermissionMode) -> String {
    format!("[{}]", mode.as_str())
}

/// A tool result's content as text.
fn result_text(content: &ToolResultContent) -> String {
    match content {
        ToolResultContent::Text(text) => text.clone(),
        ToolResultContent::Blocks(blocks) => blocks
            .iter()
            .map(|b| match b {
                ToolResultBlock::Text { text } => text.as_str(),
                ToolResultBlock::Image { .. } => "[image]",
                ToolResultBlock::Document { .. } => "[document]",
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}
