//! Here-documents: their bodies are read after the next newline token *of the nesting level
//! that opened them*, as bash reads them.
//!
//! Security: bash parses a `$(...)`, `<(...)` or backtick substitution to its end before it
//! reads the here-document bodies pending on the line that contains it, so in
//! `cat <<EOF $(` newline `touch pwned` newline `)` the `touch` is a command, not data. A
//! parser that took the first newline inside the substitution for the end of the line would
//! read `touch pwned` as body text and never report it. Each substitution therefore starts
//! with no pending here-documents and must close all of its own.
//!
//! An unquoted body is expanded like a double-quoted string: its `$(...)` and backticks run,
//! so they are parsed and reported as commands.

use super::Word;
use super::parser::{End, Parser, Result};

pub(super) struct PendingHeredoc {
    pub(super) delimiter: String,
    /// A quoted delimiter: the body is not expanded.
    pub(super) quoted: bool,
    /// `<<-`: leading tabs are stripped.
    pub(super) strip_tabs: bool,
}

impl Parser {
    /// Consumes a newline token, then the bodies of the here-documents begun on its line.
    pub(super) fn newline(&mut self) -> Result<()> {
        self.pos += 1;
        for doc in std::mem::take(&mut self.heredocs) {
            let body = self.heredoc_body(&doc);
            if !doc.quoted {
                self.body_expansions(&body)?;
            }
        }
        Ok(())
    }

    /// Reads lines up to the delimiter line (or the end of input, as bash allows) and returns
    /// the body. In an unquoted body a backslash-newline joins lines before the comparison,
    /// as in bash (`EO\` newline `F` ends a body delimited by `EOF`).
    fn heredoc_body(&mut self, doc: &PendingHeredoc) -> String {
        let mut body = String::new();
        while self.pos < self.chars.len() {
            let mut line = String::new();
            loop {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let physical: String = self.chars[start..self.pos].iter().collect();
                let at_newline = self.peek() == Some('\n');
                if at_newline {
                    self.pos += 1;
                }
                let trailing = physical.chars().rev().take_while(|&c| c == '\\').count();
                if !doc.quoted && at_newline && trailing % 2 == 1 {
                    line.push_str(&physical[..physical.len() - 1]);
                    continue;
                }
                line.push_str(&physical);
                break;
            }
            let cmp = if doc.strip_tabs {
                line.trim_start_matches('\t')
            } else {
                line.as_str()
            };
            if cmp == doc.delimiter {
                break;
            }
            body.push_str(&line);
            body.push('\n');
        }
        body
    }

    /// The substitutions of an unquoted body, parsed as in a double-quoted string (where only
    /// `$`, backtick, backslash and newline are special).
    fn body_expansions(&mut self, body: &str) -> Result<()> {
        let mut sub = Parser::new(body, self.depth + 1);
        let mut sink = Word::default();
        while let Some(c) = sub.peek() {
            match c {
                '\\' => sub.pos += 2,
                '$' => sub.dollar(&mut sink, true)?,
                '`' => sub.backtick(&mut sink, false)?,
                _ => sub.pos += 1,
            }
        }
        if !sub.heredocs.is_empty() {
            return self.err("a here-document opened inside a here-document body");
        }
        self.out.append(&mut sub.out);
        Ok(())
    }

    /// The list inside `$(...)` or `<(...)`, with here-documents scoped to it.
    pub(super) fn substitution(&mut self) -> Result<()> {
        let outer = std::mem::take(&mut self.heredocs);
        self.nested(|p| p.list(End::Paren))?;
        if !self.heredocs.is_empty() {
            return self.err("a here-document that does not end inside its substitution");
        }
        self.heredocs = outer;
        Ok(())
    }
}
