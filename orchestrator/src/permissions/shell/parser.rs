//! The recursive-descent parser behind [`super::parse`]. Grammar (a subset of POSIX sh and
//! bash):
//!
//! ```text
//! list     := and_or ((';' | '&' | NEWLINE) and_or)*
//! and_or   := pipeline (('&&' | '||') NEWLINE* pipeline)*
//! pipeline := ['!'] command (('|' | '|&') NEWLINE* command)*
//! command  := '(' list ')' redirect* | '{' list '}' redirect* | simple
//! simple   := (assignment | word | redirect)+
//! ```
//!
//! Security note: every construct outside this grammar is an error, so that the permission
//! engine never allows a command whose meaning the parser did not fully see.

use super::expansion::has_glob;
use super::heredoc::PendingHeredoc;
use super::{
    Assignment, MAX_DEPTH, MAX_LEN, Redirect, RedirectKind, Script, SimpleCommand, Unparseable,
    Word,
};

pub(super) type Result<T> = std::result::Result<T, Unparseable>;

/// Words that start shell control flow, which this parser does not model.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "select", "function", "[[", "]]", "coproc", "in",
];

/// Parses `src` into its simple commands.
pub fn parse(src: &str) -> Result<Script> {
    parse_at_depth(src, 0)
}

pub(crate) fn parse_at_depth(src: &str, depth: usize) -> Result<Script> {
    if src.len() > MAX_LEN {
        return Err(Unparseable::new(format!(
            "the command is longer than {MAX_LEN} bytes"
        )));
    }
    if depth > MAX_DEPTH {
        return Err(Unparseable::new("the command nests too deeply"));
    }
    let mut p = Parser::new(src, depth);
    p.list(End::Eof)?;
    Ok(Script { commands: p.out })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Eof,
    Paren,
    Brace,
}

pub(super) struct Parser {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) depth: usize,
    pub(super) out: Vec<SimpleCommand>,
    /// Here-documents opened on the current line of the current nesting level.
    pub(super) heredocs: Vec<PendingHeredoc>,
}

fn is_meta(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
    )
}

impl Parser {
    pub(super) fn new(src: &str, depth: usize) -> Self {
        Self {
            chars: src.chars().collect(),
            pos: 0,
            depth,
            out: Vec::new(),
            heredocs: Vec::new(),
        }
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.pos + n).copied()
    }

    pub(super) fn err<T>(&self, what: impl std::fmt::Display) -> Result<T> {
        Err(Unparseable::new(format!(
            "{what} (at character {})",
            self.pos
        )))
    }

    /// Spaces, tabs, line continuations and comments; stops at a newline.
    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t') => self.pos += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.pos += 2,
                Some('#') => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn skip_blanks_and_newlines(&mut self) -> Result<()> {
        loop {
            self.skip_blanks();
            if self.peek() == Some('\n') {
                self.newline()?;
            } else {
                return Ok(());
            }
        }
    }

    pub(super) fn list(&mut self, end: End) -> Result<()> {
        loop {
            self.skip_blanks_and_newlines()?;
            match (self.peek(), end) {
                (None, End::Eof) => return Ok(()),
                (None, End::Paren) => return self.err("unclosed parenthesis"),
                (None, End::Brace) => return self.err("unclosed brace group"),
                (Some(')'), End::Paren) => {
                    self.pos += 1;
                    return Ok(());
                }
                (Some('}'), End::Brace)
                    if self.peek_at(1).is_none_or(|c| is_meta(c) || c == '}') =>
                {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {}
            }
            self.and_or(end)?;
            self.skip_blanks();
            match self.peek() {
                Some(';') if self.peek_at(1) == Some(';') => {
                    return self.err("`;;` outside a case statement");
                }
                Some(';' | '&') => self.pos += 1,
                Some('\n') | None => {}
                Some(')') if end == End::Paren => {}
                Some(c) => return self.err(format!("unexpected `{c}`")),
            }
        }
    }

    fn and_or(&mut self, end: End) -> Result<()> {
        self.pipeline(end)?;
        loop {
            self.skip_blanks();
            let op = (self.peek(), self.peek_at(1));
            if op == (Some('&'), Some('&')) || op == (Some('|'), Some('|')) {
                self.pos += 2;
                self.skip_blanks_and_newlines()?;
                self.pipeline(end)?;
            } else {
                return Ok(());
            }
        }
    }

    fn pipeline(&mut self, end: End) -> Result<()> {
        self.skip_blanks();
        if self.peek() == Some('!') && self.peek_at(1).is_some_and(|c| c == ' ' || c == '\t') {
            self.pos += 1;
        }
        self.command(end)?;
        loop {
            self.skip_blanks();
            if self.peek() == Some('|') && self.peek_at(1) != Some('|') {
                self.pos += 1;
                if self.peek() == Some('&') {
                    self.pos += 1;
                }
                self.skip_blanks_and_newlines()?;
                self.command(end)?;
            } else {
                return Ok(());
            }
        }
    }

    fn command(&mut self, _end: End) -> Result<()> {
        self.skip_blanks();
        match (self.peek(), self.peek_at(1)) {
            (Some('('), Some('(')) => self.err("arithmetic commands `((...))`"),
            (Some('('), _) => {
                self.pos += 1;
                self.nested(|p| p.list(End::Paren))?;
                self.trailing_redirects()
            }
            (Some('{'), next) if next.is_none_or(|c| matches!(c, ' ' | '\t' | '\n')) => {
                self.pos += 1;
                self.nested(|p| p.list(End::Brace))?;
                self.trailing_redirects()
            }
            _ => self.simple(),
        }
    }

    pub(super) fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("the command nests too deeply");
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// Redirections after `( ... )` or `{ ...; }`: kept as a command without words.
    fn trailing_redirects(&mut self) -> Result<()> {
        let start = self.pos;
        let mut cmd = SimpleCommand::default();
        loop {
            self.skip_blanks();
            if self.redirect_ahead() {
                cmd.redirects.push(self.redirect()?);
            } else {
                break;
            }
        }
        match self.peek() {
            Some(c) if !is_meta(c) => self.err("a word after a group"),
            _ => {
                if !cmd.redirects.is_empty() {
                    cmd.text = self.text(start);
                    self.out.push(cmd);
                }
                Ok(())
            }
        }
    }

    fn text(&self, start: usize) -> String {
        self.chars[start..self.pos]
            .iter()
            .collect::<String>()
            .trim()
            .to_string()
    }

    fn simple(&mut self) -> Result<()> {
        self.skip_blanks();
        let start = self.pos;
        let mut cmd = SimpleCommand::default();
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else { break };
            if self.redirect_ahead() {
                cmd.redirects.push(self.redirect()?);
                continue;
            }
            match c {
                ';' | '&' | '|' | '\n' | ')' => break,
                '(' => {
                    return self.err(
                        "`(` inside a command (function definitions and extended globs are not supported)",
                    );
                }
                _ => {}
            }
            if cmd.words.is_empty()
                && let Some(name) = self.assignment_name()
            {
                {
                    let value = if self.peek().is_some_and(|c| !is_meta(c)) {
                        if self.peek() == Some('(') {
                            return self.err("array assignments");
                        }
                        self.word()?
                    } else {
                        Word::default()
                    };
                    cmd.assignments.push(Assignment { name, value });
                    continue;
                }
            }
            if cmd.words.is_empty() && self.element_assignment_ahead() {
                return self.err("an array element assignment");
            }
            let word = self.word()?;
            if cmd.words.is_empty()
                && !word.quoted
                && !word.dynamic
                && RESERVED.contains(&word.value.as_str())
            {
                return self.err(format!("shell control flow (`{}`)", word.value));
            }
            cmd.words.push(word);
        }
        if self.pos == start {
            return self.err("a command was expected");
        }
        cmd.text = self.text(start);
        self.out.push(cmd);
        Ok(())
    }

    /// At `NAME[`, the start of `NAME[subscript]=value`, which bash takes for an assignment
    /// (the subscript is evaluated, and `BASH_CMDS[ls]=/bin/rm` rebinds a command name).
    fn element_assignment_ahead(&self) -> bool {
        let Some(mut i) = self.name_end(self.pos) else {
            return false;
        };
        if self.chars.get(i) != Some(&'[') {
            return false;
        }
        let mut depth = 0usize;
        while let Some(&c) = self.chars.get(i) {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                '\n' => return false,
                _ => {}
            }
            i += 1;
        }
        matches!(
            (self.chars.get(i + 1), self.chars.get(i + 2)),
            (Some('='), _) | (Some('+'), Some('='))
        )
    }

    /// At `NAME=` or `NAME+=` (unquoted): consumes it and returns NAME.
    fn assignment_name(&mut self) -> Option<String> {
        let mut i = self.name_end(self.pos)?;
        let name: String = self.chars[self.pos..i].iter().collect();
        if self.chars.get(i) == Some(&'+') {
            i += 1;
        }
        if self.chars.get(i) != Some(&'=') {
            return None;
        }
        self.pos = i + 1;
        Some(name)
    }

    /// At a redirection operator (optionally after a file-descriptor number)?
    fn redirect_ahead(&self) -> bool {
        let mut i = self.pos;
        if let Some(after) = self.named_descriptor_end() {
            // `{fd}>file cmd`: bash allocates a descriptor into `fd`; `cmd` is the command.
            return matches!(
                (self.chars.get(after), self.chars.get(after + 1)),
                (Some('<' | '>'), next) if next != Some(&'(')
            );
        }
        while self.chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        match (self.chars.get(i), self.chars.get(i + 1)) {
            // `<(` and `>(` are process substitutions, handled as words.
            (Some('<' | '>'), Some('(')) => i != self.pos,
            (Some('<' | '>'), _) => true,
            (Some('&'), Some('>')) => i == self.pos,
            _ => false,
        }
    }

    /// At `{NAME}`: the index just after `}`.
    fn named_descriptor_end(&self) -> Option<usize> {
        if self.peek() != Some('{') {
            return None;
        }
        let i = self.name_end(self.pos + 1)?;
        (self.chars.get(i) == Some(&'}')).then_some(i + 1)
    }

    /// The index just after a shell name (`[A-Za-z_][A-Za-z0-9_]*`) starting at `i`.
    fn name_end(&self, mut i: usize) -> Option<usize> {
        let first = self.chars.get(i)?;
        if !(first.is_ascii_alphabetic() || *first == '_') {
            return None;
        }
        while self
            .chars
            .get(i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            i += 1;
        }
        Some(i)
    }

    fn redirect(&mut self) -> Result<Redirect> {
        if let Some(after) = self.named_descriptor_end() {
            self.pos = after;
        }
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let kind = match (self.peek(), self.peek_at(1), self.peek_at(2)) {
            (Some('&'), Some('>'), Some('>')) => {
                self.pos += 3;
                RedirectKind::Append
            }
            (Some('&'), Some('>'), _) => {
                self.pos += 2;
                RedirectKind::Write
            }
            (Some('>'), Some('>'), _) => {
                self.pos += 2;
                RedirectKind::Append
            }
            (Some('>'), Some('|'), _) => {
                self.pos += 2;
                RedirectKind::Write
            }
            (Some('>'), Some('&'), _) => {
                self.pos += 2;
                self.skip_blanks();
                let target = self.word()?;
                // `>&2`, `>&-` duplicate descriptors; `>& file` writes the file.
                let dup = target
                    .literal()
                    .is_some_and(|t| t == "-" || t.chars().all(|c| c.is_ascii_digit()));
                let kind = if dup {
                    RedirectKind::Duplicate
                } else {
                    RedirectKind::Write
                };
                return Ok(Redirect { kind, target });
            }
            (Some('>'), _, _) => {
                self.pos += 1;
                RedirectKind::Write
            }
            (Some('<'), Some('<'), Some('<')) => {
                self.pos += 3;
                RedirectKind::HereString
            }
            (Some('<'), Some('<'), third) => {
                self.pos += 2;
                let strip_tabs = third == Some('-');
                if strip_tabs {
                    self.pos += 1;
                }
                self.skip_blanks();
                let target = self.word()?;
                if target.dynamic {
                    return self.err("a here-document delimiter with an expansion");
                }
                self.heredocs.push(PendingHeredoc {
                    delimiter: target.value.clone(),
                    quoted: target.quoted,
                    strip_tabs,
                });
                return Ok(Redirect {
                    kind: RedirectKind::HereDoc,
                    target,
                });
            }
            (Some('<'), Some('&'), _) => {
                self.pos += 2;
                self.skip_blanks();
                let target = self.word()?;
                let dup = target
                    .literal()
                    .is_some_and(|t| t == "-" || t.chars().all(|c| c.is_ascii_digit()));
                if !dup {
                    return self.err("`<&` with a file");
                }
                return Ok(Redirect {
                    kind: RedirectKind::Duplicate,
                    target,
                });
            }
            (Some('<'), Some('>'), _) => {
                self.pos += 2;
                RedirectKind::ReadWrite
            }
            (Some('<'), _, _) => {
                self.pos += 1;
                RedirectKind::Read
            }
            _ => return self.err("a redirection was expected"),
        };
        self.skip_blanks();
        let target = self.word()?;
        Ok(Redirect { kind, target })
    }

    /// One word. Errors when there is none here.
    fn word(&mut self) -> Result<Word> {
        let start = self.pos;
        let mut w = Word::default();
        // Unquoted characters only, with quoted ones replaced by NUL: for glob detection.
        let mut shape = String::new();
        while let Some(c) = self.peek() {
            match c {
                '<' | '>' if self.pos == start && self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    self.substitution()?;
                    w.dynamic = true;
                    w.value.push_str("<(...)");
                    shape.push('\0');
                }
                c if is_meta(c) => break,
                '\\' => match self.peek_at(1) {
                    Some('\n') => self.pos += 2,
                    Some(x) => {
                        w.value.push(x);
                        w.quoted = true;
                        shape.push('\0');
                        self.pos += 2;
                    }
                    None => {
                        w.value.push('\\');
                        shape.push('\\');
                        self.pos += 1;
                    }
                },
                '\'' => {
                    self.pos += 1;
                    loop {
                        match self.peek() {
                            None => return self.err("unterminated single quote"),
                            Some('\'') => break,
                            Some(x) => w.value.push(x),
                        }
                        self.pos += 1;
                    }
                    self.pos += 1;
                    w.quoted = true;
                    shape.push('\0');
                }
                '"' => {
                    self.double_quoted(&mut w)?;
                    shape.push('\0');
                }
                '$' => {
                    self.dollar(&mut w, false)?;
                    shape.push('\0');
                }
                '`' => {
                    self.backtick(&mut w, false)?;
                    shape.push('\0');
                }
                c if c.is_control() && c != '\t' => {
                    return self.err(format!(
                        "control character U+{:04X} outside quotes",
                        u32::from(c)
                    ));
                }
                c => {
                    w.value.push(c);
                    shape.push(c);
                    self.pos += 1;
                }
            }
        }
        if self.pos == start {
            return match self.peek() {
                Some(c) => self.err(format!("unexpected `{c}`")),
                None => self.err("unexpected end of the command"),
            };
        }
        w.glob = has_glob(&shape);
        Ok(w)
    }
}
