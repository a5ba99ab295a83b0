//! Expansions inside a word: quotes, `$...` forms, backticks, `$'...'`, and the checks that
//! refuse expansions whose value bash would evaluate as code.
//!
//! Security: bash evaluates a variable's value as an arithmetic expression in `$((x))`,
//! `$[x]`, `${s:x}`, `${a[x]}` and through `${!x}`, and arithmetic evaluation runs command
//! substitutions found in array subscripts of that value (`x='a[$(touch p)]'; echo
//! $((x))` runs `touch`); `${x@P}` expands the value as a prompt, which runs `$(...)` in it.
//! The value can come from this very command (`x=...;`, or `$_`), so these forms are
//! refused unless the expression is made of constants only.

use super::Word;
use super::parser::{Parser, Result, parse_at_depth};

impl Parser {
    pub(super) fn double_quoted(&mut self, w: &mut Word) -> Result<()> {
        self.pos += 1;
        w.quoted = true;
        loop {
            match self.peek() {
                None => return self.err("unterminated double quote"),
                Some('"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some('\\') => match self.peek_at(1) {
                    Some('\n') => self.pos += 2,
                    Some(x @ ('$' | '`' | '"' | '\\')) => {
                        w.value.push(x);
                        self.pos += 2;
                    }
                    _ => {
                        w.value.push('\\');
                        self.pos += 1;
                    }
                },
                Some('$') => self.dollar(w, true)?,
                Some('`') => self.backtick(w, true)?,
                Some(c) => {
                    w.value.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    pub(super) fn dollar(&mut self, w: &mut Word, in_double_quotes: bool) -> Result<()> {
        match self.peek_at(1) {
            Some('(') if self.peek_at(2) == Some('(') => {
                let body = self.balanced(3, '(', ')')?;
                self.check_arithmetic(&body)?;
                w.dynamic = true;
                w.value.push_str("$((...))");
            }
            Some('(') => {
                self.pos += 2;
                self.substitution()?;
                w.dynamic = true;
                w.value.push_str("$(...)");
            }
            Some('{') => {
                let body = self.balanced(2, '{', '}')?;
                // Security: bash expands the word part of `${x:-word}` (and the other
                // operators') as a word: command and process substitution and `$[...]`
                // arithmetic there run as they would anywhere.
                if ["$(", "`", "<(", ">(", "$["]
                    .iter()
                    .any(|s| body.contains(s))
                {
                    return self.err("a parameter expansion with command substitution");
                }
                if parameter_evaluates(&body) {
                    return self.err(format!(
                        "`${{{body}}}` evaluates a value as arithmetic or a prompt, which can run code"
                    ));
                }
                w.dynamic = true;
                w.value.push_str("${");
                w.value.push_str(&body);
                w.value.push('}');
            }
            Some('[') => {
                // `$[...]`: the old spelling of `$((...))`.
                let body = self.balanced(2, '[', ']')?;
                self.check_arithmetic(&body)?;
                w.dynamic = true;
                w.value.push_str("$[...]");
            }
            Some('\'') if !in_double_quotes => {
                self.pos += 2;
                self.ansi_c(w)?;
            }
            Some('"') if !in_double_quotes => {
                // `$"..."` (locale translation) reads like `"..."`.
                self.pos += 1;
                self.double_quoted(w)?;
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                self.pos += 1;
                w.value.push('$');
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    w.value.push(self.chars[self.pos]);
                    self.pos += 1;
                }
                w.dynamic = true;
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                w.value.push('$');
                w.value.push(c);
                self.pos += 2;
                w.dynamic = true;
            }
            _ => {
                w.value.push('$');
                self.pos += 1;
            }
        }
        Ok(())
    }

    /// From `self.pos + skip` (just inside `open`), to the matching `close`; returns the
    /// body and moves past it. Quotes inside are skipped over.
    pub(super) fn balanced(&mut self, skip: usize, open: char, close: char) -> Result<String> {
        let start = self.pos + skip;
        let mut i = start;
        let mut depth = 1usize;
        let mut quote: Option<char> = None;
        while let Some(&c) = self.chars.get(i) {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"'), '\\') => i += 1,
                (Some(_), _) => {}
                (None, '\\') => i += 1,
                (None, '\'' | '"') => quote = Some(c),
                (None, c) if c == open => depth += 1,
                (None, c) if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        let body: String = self.chars[start..i].iter().collect();
                        // `$((...))` closes with two parentheses.
                        self.pos = i + 1;
                        if open == '(' && skip == 3 {
                            if self.peek() != Some(')') {
                                return self.err("unbalanced arithmetic expansion");
                            }
                            self.pos += 1;
                        }
                        return Ok(body);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        self.err(format!("unclosed `{open}`"))
    }

    /// A backtick substitution; `in_double_quotes`: it lies inside `"..."`, where bash
    /// also takes `\"` in it for a plain `"` (outside, the backslash stays).
    pub(super) fn backtick(&mut self, w: &mut Word, in_double_quotes: bool) -> Result<()> {
        self.pos += 1;
        let mut inner = String::new();
        loop {
            match self.peek() {
                None => return self.err("unterminated backtick"),
                Some('`') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => match self.peek_at(1) {
                    Some('"') if in_double_quotes => {
                        inner.push('"');
                        self.pos += 2;
                    }
                    Some(c @ ('`' | '\\' | '$')) => {
                        inner.push(c);
                        self.pos += 2;
                    }
                    Some(c) => {
                        inner.push('\\');
                        inner.push(c);
                        self.pos += 2;
                    }
                    None => return self.err("unterminated backtick"),
                },
                Some(c) => {
                    inner.push(c);
                    self.pos += 1;
                }
            }
        }
        let script = parse_at_depth(&inner, self.depth + 1)?;
        self.out.extend(script.commands);
        w.dynamic = true;
        w.value.push_str("`...`");
        Ok(())
    }

    /// The body of `$'...'` (after the opening quote).
    pub(super) fn ansi_c(&mut self, w: &mut Word) -> Result<()> {
        w.quoted = true;
        loop {
            match self.peek() {
                None => return self.err("unterminated $'...' quote"),
                Some('\'') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some('\\') => {
                    let Some(e) = self.peek_at(1) else {
                        return self.err("unterminated $'...' quote");
                    };
                    self.pos += 2;
                    // Security: bash cuts a `$'...'` value at a NUL (`\0`, `\x00`,
                    // `\c@`...), so what follows it is not what bash runs; and `\cX` (a
                    // control character) is rare enough to refuse than to model.
                    if e == 'c' {
                        return self.err("a control-character escape (\\c) in $'...'");
                    }
                    let simple = match e {
                        'n' => Some('\n'),
                        't' => Some('\t'),
                        'r' => Some('\r'),
                        'a' => Some('\u{7}'),
                        'b' => Some('\u{8}'),
                        'e' | 'E' => Some('\u{1b}'),
                        'f' => Some('\u{c}'),
                        'v' => Some('\u{b}'),
                        '\\' | '\'' | '"' | '?' => Some(e),
                        _ => None,
                    };
                    if let Some(c) = simple {
                        w.value.push(c);
                        continue;
                    }
                    let (radix, max) = match e {
                        'x' => (16, 2),
                        'u' => (16, 4),
                        'U' => (16, 8),
                        '0'..='7' => {
                            self.pos -= 1;
                            (8, 3)
                        }
                        _ => {
                            w.value.push('\\');
                            w.value.push(e);
                            continue;
                        }
                    };
                    let mut n: u32 = 0;
                    let mut digits = 0;
                    while digits < max {
                        let Some(d) = self.peek().and_then(|c| c.to_digit(radix)) else {
                            break;
                        };
                        n = n.saturating_mul(radix).saturating_add(d);
                        digits += 1;
                        self.pos += 1;
                    }
                    // Bash keeps an octal escape's low eight bits (`\563` is `s`).
                    if radix == 8 {
                        n &= 0xff;
                    }
                    match char::from_u32(n) {
                        Some('\0') if digits > 0 => {
                            return self.err("a NUL in $'...' (bash cuts the value there)");
                        }
                        Some(c) if digits > 0 => w.value.push(c),
                        _ => return self.err("an invalid escape in $'...'"),
                    }
                }
                Some(c) => {
                    w.value.push(c);
                    self.pos += 1;
                }
            }
        }
    }
    /// Refuses an arithmetic expression that names a variable or expands anything.
    fn check_arithmetic(&self, body: &str) -> Result<()> {
        if body.contains("$(") || body.contains('`') {
            return self.err("arithmetic with command substitution");
        }
        if !arithmetic_is_constant(body) {
            return self
                .err("arithmetic on a variable (bash may run code found in the variable's value)");
        }
        Ok(())
    }
}

/// An arithmetic expression of numeric literals (`12`, `0x1f`, `16#ff`) and operators only.
pub(super) fn arithmetic_is_constant(body: &str) -> bool {
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|d| d.is_ascii_alphanumeric() || matches!(d, '#' | '@' | '_'))
            {
                chars.next();
            }
        } else if !(c.is_ascii_whitespace() || "+-*/%()<>=!&|^~?:,".contains(c)) {
            return false;
        }
    }
    true
}

/// Whether the body of `${...}` makes bash evaluate a value as arithmetic or as a prompt:
/// an indirection (`${!x}`), a subscript or offset that is not a constant, `@P`, or a nested
/// `${` (refused without a closer look).
pub(super) fn parameter_evaluates(body: &str) -> bool {
    if body.contains("${") {
        return true;
    }
    let rest = body
        .strip_prefix('#')
        .filter(|r| !r.is_empty())
        .unwrap_or(body);
    if let Some(name) = rest.strip_prefix('!') {
        // `${!prefix*}`, `${!prefix@}`, `${!a[@]}`, `${!a[*]}` list names or keys.
        let listing = ["*", "@", "[@]", "[*]"].iter().any(|s| {
            name.strip_suffix(s)
                .is_some_and(|n| !n.is_empty() && n.chars().all(is_name_char))
        });
        return !listing;
    }
    let name_len = if rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len())
    } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
        rest.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len())
    } else {
        rest.chars().next().map_or(0, char::len_utf8)
    };
    let mut op = &rest[name_len..];
    if let Some(sub) = op.strip_prefix('[') {
        let Some(close) = sub.find(']') else {
            return true;
        };
        let index = &sub[..close];
        if !matches!(index, "@" | "*") && !arithmetic_is_constant(index) {
            return true;
        }
        op = &sub[close + 1..];
    }
    if let Some(range) = op.strip_prefix(':')
        && !range.starts_with(['-', '=', '?', '+'])
    {
        return !range.split(':').all(arithmetic_is_constant);
    }
    op.starts_with('@') && op.contains('P')
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Unquoted `*`, `?`, `[...]` or brace expansion `{a,b}` / `{1..3}`.
pub(super) fn has_glob(shape: &str) -> bool {
    if shape.contains(['*', '?']) {
        return true;
    }
    if shape
        .find('[')
        .is_some_and(|open| shape[open..].contains(']'))
    {
        return true;
    }
    shape.find('{').is_some_and(|open| {
        shape[open..].find('}').is_some_and(|close| {
            let inside = &shape[open..open + close];
            inside.contains(',') || inside.contains("..")
        })
    })
}
