//! Bash commands against `Bash(...)` specifiers.
//!
//! A command is parsed ([`super::shell`]) and split into [`Part`]s: one per simple command,
//! with wrappers looked through ([`super::wrappers`]: `timeout`, `env`, `exec -a`, `setsid`,
//! `flock`, `xargs`, `find -exec`, `eval`, `bash -c BODY` and more; a shell body is parsed
//! recursively and its parts replace the wrapper). An allow rule must match the innermost
//! command of every part; a deny or ask rule matches any layer (`timeout 5 curl x` is denied
//! by `Bash(curl *)` and by `Bash(timeout *)`).
//!
//! Specifiers: `*` matches any characters (also across words); a trailing ` *` or the legacy
//! `:*` also matches the bare prefix, with a word boundary (`npm test *` matches `npm test`
//! and `npm test -w` but not `npm testing`). Matching is on words, not on the raw string:
//! the command is rendered with a plain space between words, a space inside a quoted word
//! becomes U+0001 and an expansion (`$X`, `$(...)`) becomes U+0000, which only `*` matches.
//! So `npm' 'test` is not `npm test`, and `npm test $(x)` needs `npm test *`.

use super::rules::wildcard_chars;
use super::shell::{self, Assignment, Redirect, SimpleCommand, Unparseable, Word};
use super::wrappers::{Layer, unwrap_layer};

/// Separator for spaces inside one word in the rendered form.
const IN_WORD_SPACE: char = '\u{1}';
/// Stands for a value the parser cannot know.
const UNKNOWN: char = '\u{0}';

/// One command the shell would run, after wrappers were looked through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Source text, for explanations.
    pub text: String,
    /// The innermost command: what an allow rule must match.
    pub words: Vec<Word>,
    /// Outer layers as written (`timeout 5 curl x`, `bash -c '...'`): matched by deny and
    /// ask rules only.
    pub wrappers: Vec<Vec<Word>>,
    pub assignments: Vec<Assignment>,
    pub redirects: Vec<Redirect>,
    /// Why no allow rule (and no read-only check) may match this part, if so.
    pub unresolved: Option<String>,
}

impl Part {
    /// The innermost command rendered for matching.
    pub fn rendered(&self) -> String {
        render(&self.words)
    }

    /// Every layer rendered, outermost first, innermost last: what deny and ask rules see.
    /// A command named by path is also seen by its file name (`/bin/rm x` as `rm x`).
    ///
    /// Security: when the part is unresolved (a wrapper this code does not follow), what
    /// really runs is not known, so deny and ask rules also see every tail of every layer
    /// (`strace -f rm x` as `rm x`) and the commands in any argument that reads as a shell
    /// script (`su -c 'rm x'`). This can only make a command denied or asked about.
    pub fn layers(&self) -> Vec<String> {
        let mut layers: Vec<Vec<Word>> = self.wrappers.clone();
        layers.push(self.words.clone());
        if self.unresolved.is_some() {
            layers = layers.iter().flat_map(|l| guesses(l)).collect();
        }
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<String> = Vec::new();
        for layer in &layers {
            for rendered in [Some(render(layer)), by_file_name(layer).map(|l| render(&l))]
                .into_iter()
                .flatten()
            {
                if seen.insert(rendered.clone()) {
                    out.push(rendered);
                }
            }
        }
        out
    }
}

/// `words` and every tail of it starting at a plain word, plus the commands of any argument
/// that parses as a script (one level deep).
///
/// Bounded for any input: a tail is at most [`TAIL_WORDS`] words, and there are at most
/// [`MAX_GUESSES`] of them (a rule longer than that many words is not seen in a tail).
fn guesses(words: &[Word]) -> Vec<Vec<Word>> {
    let tail = |ws: &[Word], i: usize| ws[i..ws.len().min(i + TAIL_WORDS)].to_vec();
    let mut out = vec![words.to_vec()];
    for (i, w) in words.iter().enumerate().skip(1) {
        if out.len() >= MAX_GUESSES {
            break;
        }
        let Some(v) = w.literal() else { continue };
        if !v.starts_with('-') {
            out.push(tail(words, i));
        }
        if v.contains([' ', '\t', '\n', ';', '|', '&'])
            && let Ok(script) = shell::parse(v)
        {
            for cmd in script.commands {
                for j in 0..cmd.words.len().min(MAX_GUESSES) {
                    out.push(tail(&cmd.words, j));
                }
            }
        }
    }
    out.truncate(MAX_GUESSES);
    out
}

/// Words per guessed tail, and guesses per layer (see [`guesses`]).
const TAIL_WORDS: usize = 64;
const MAX_GUESSES: usize = 4096;

/// The layer with its command named by file name, when it was named by a path.
fn by_file_name(words: &[Word]) -> Option<Vec<Word>> {
    let first = words.first()?;
    let (_, name) = first.literal()?.rsplit_once('/')?;
    if name.is_empty() {
        return None;
    }
    let mut out = words.to_vec();
    out[0] = Word {
        value: name.to_string(),
        ..first.clone()
    };
    Some(out)
}

/// Renders words for matching (see the module docs).
pub fn render(words: &[Word]) -> String {
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if w.dynamic {
            out.push(UNKNOWN);
        } else {
            out.extend(w.value.chars().map(|c| match c {
                ' ' | '\t' | '\n' => IN_WORD_SPACE,
                c => c,
            }));
        }
    }
    out
}

/// Renders a specifier the same way: quotes group words, unquoted `*` is a wildcard.
/// Returns the pattern as chars where `*` wildcards are `*` and a literal `*` cannot occur
/// (a quoted `*` is kept as U+0002, which no command text contains).
fn render_pattern(spec: &str) -> Vec<char> {
    let mut out = Vec::new();
    let mut quote: Option<char> = None;
    let mut chars = spec.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    out.push(if n == '*' { '\u{2}' } else { n });
                }
            }
            (Some(_), ' ' | '\t') => out.push(IN_WORD_SPACE),
            (Some(_), '*') => out.push('\u{2}'),
            (None, ' ' | '\t') => {
                if out.last() != Some(&' ') {
                    out.push(' ');
                }
            }
            (_, c) => out.push(c),
        }
    }
    out
}

/// Whether a `Bash(spec)` specifier matches one rendered command.
pub fn spec_matches(spec: &str, rendered: &str) -> bool {
    let text: Vec<char> = rendered.chars().collect();
    let spec = spec.trim();
    // `cmd:*` (legacy) and `cmd *`: the prefix alone, or the prefix then a word boundary.
    let prefix = spec
        .strip_suffix(":*")
        .or_else(|| spec.strip_suffix(" *"))
        .map(str::trim_end);
    if let Some(prefix) = prefix {
        let p = render_pattern(prefix);
        if wildcard_chars(&p, &text) {
            return true;
        }
        let mut with_space = p;
        with_space.push(' ');
        with_space.push('*');
        return wildcard_chars(&with_space, &text);
    }
    wildcard_chars(&render_pattern(spec), &text)
}

/// What deny and ask rules see of a command the parser cannot parse: the raw text, and
/// every tail of its crude word list (words split at blanks and shell operators, quotes
/// dropped) starting at each word, a bounded number of words long.
///
/// Security: bypassPermissions mode or a bare `Bash` allow runs an unparseable command;
/// without this, `if true; then rm x; fi` would pass a `Bash(rm *)` deny rule. Matching
/// more text can only deny or ask more.
pub fn unparsed_layers(command: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    for c in command.chars() {
        if c.is_whitespace() || ";&|(){}<>`".contains(c) {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
        } else if !matches!(c, '\'' | '"' | '\\') {
            current.push(c);
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    let mut out = vec![command.trim().to_string()];
    for i in 0..words.len().min(MAX_GUESSES) {
        let end = (i + TAIL_WORDS).min(words.len());
        out.push(words[i..end].join(" "));
    }
    out
}

/// Splits `command` into parts. Errors when the shell parser cannot parse it.
pub fn split(command: &str) -> Result<Vec<Part>, Unparseable> {
    split_at_depth(command, 0)
}

fn split_at_depth(command: &str, depth: usize) -> Result<Vec<Part>, Unparseable> {
    let script = shell::parser_at_depth(command, depth)?;
    let mut parts = Vec::new();
    for cmd in script.commands {
        peel(cmd, depth, &mut parts)?;
    }
    Ok(parts)
}

/// Environment variables that change what a command runs or loads: an assignment to one of
/// them makes the part unresolved (no allow rule, not read-only). Security: `PATH=. npm
/// test` or `LD_PRELOAD=x.so ls` would otherwise pass as the allowed command.
pub(super) fn dangerous_variable(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "PATH",
        "IFS",
        "ENV",
        "BASH_ENV",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "GLOBIGNORE",
        "HOME",
        "CDPATH",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "BROWSER",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "NODE_PATH",
        "RUBYOPT",
        "RUBYLIB",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "TMPDIR",
        "ZDOTDIR",
        "XDG_CONFIG_HOME",
        "LESSOPEN",
        "LESSCLOSE",
        "MANPAGER",
        "GIT_DIR",
    ];
    EXACT.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("GIT_")
        || name.starts_with("BASH_FUNC_")
        || name.starts_with("npm_config_")
        || name.starts_with("NPM_CONFIG_")
        || name.ends_with("_COMMAND")
        || name.ends_with("_OPTIONS")
        || name.ends_with("PATH")
}

fn peel(cmd: SimpleCommand, depth: usize, parts: &mut Vec<Part>) -> Result<(), Unparseable> {
    let mut part = Part {
        text: cmd.text,
        words: cmd.words,
        wrappers: Vec::new(),
        assignments: cmd.assignments,
        redirects: cmd.redirects,
        unresolved: None,
    };
    if let Some(a) = part
        .assignments
        .iter()
        .find(|a| dangerous_variable(&a.name))
    {
        part.unresolved = Some(format!("it sets {}, which changes what runs", a.name));
    }
    peel_part(part, depth, parts)
}

/// Looks through `part`'s wrappers, pushing the parts it runs.
fn peel_part(mut part: Part, depth: usize, parts: &mut Vec<Part>) -> Result<(), Unparseable> {
    loop {
        match unwrap_layer(&part.words) {
            Layer::Plain => break,
            Layer::Unresolved(why) => {
                part.unresolved.get_or_insert(why);
                break;
            }
            Layer::Inner {
                skip,
                env,
                append_unknown,
                placeholder,
            } => {
                if let Some(name) = env.iter().find(|n| dangerous_variable(n)) {
                    part.unresolved
                        .get_or_insert(format!("it sets {name}, which changes what runs"));
                }
                let outer = part.words.clone();
                let mut inner = part.words.split_off(skip);
                if let Some(p) = placeholder.filter(|p| !p.is_empty()) {
                    // Replaced by input data: the word's value is not known.
                    for w in inner.iter_mut().filter(|w| w.value.contains(&p)) {
                        w.dynamic = true;
                    }
                }
                if append_unknown {
                    inner.push(Word {
                        value: "...".into(),
                        dynamic: true,
                        ..Word::default()
                    });
                }
                part.wrappers.push(outer);
                part.words = inner;
            }
            Layer::Commands(commands) => {
                let mut wrappers = part.wrappers.clone();
                wrappers.push(part.words.clone());
                for words in commands {
                    let sub = Part {
                        text: part.text.clone(),
                        words,
                        wrappers: wrappers.clone(),
                        assignments: part.assignments.clone(),
                        redirects: Vec::new(),
                        unresolved: part.unresolved.clone(),
                    };
                    peel_part(sub, depth + 1, parts)?;
                }
                break;
            }
            Layer::ShellBody(body) => return shell_body(part, &body, depth, parts),
        }
    }
    parts.push(part);
    Ok(())
}

/// The parts of a shell string a wrapper runs, each under the wrapper's layers. The
/// wrapper's assignments and its being unresolved apply to every one of them; its
/// redirections to the first (they are checked once).
fn shell_body(
    part: Part,
    body: &str,
    depth: usize,
    parts: &mut Vec<Part>,
) -> Result<(), Unparseable> {
    let inner = split_at_depth(body, depth + 1)?;
    let mut wrappers = part.wrappers.clone();
    wrappers.push(part.words.clone());
    let mut first = true;
    for mut p in inner {
        let mut w = wrappers.clone();
        w.append(&mut p.wrappers);
        p.wrappers = w;
        p.assignments.extend(part.assignments.iter().cloned());
        if p.unresolved.is_none() {
            p.unresolved = part.unresolved.clone();
        }
        if first {
            p.redirects.extend(part.redirects.iter().cloned());
            first = false;
        }
        parts.push(p);
    }
    if first {
        // An empty body: keep the wrapper as a no-op part for its redirections.
        let mut part = part;
        part.wrappers = wrappers;
        part.words.clear();
        parts.push(part);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(cmd: &str) -> Vec<String> {
        split(cmd).unwrap().iter().map(Part::rendered).collect()
    }

    #[test]
    fn splits_compound_commands() {
        assert_eq!(
            parts("a && b || c; d | e & f"),
            ["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(parts("(a; b) && { c; }"), ["a", "b", "c"]);
        assert_eq!(parts("echo $(curl x)"), ["curl x", "echo \u{0}"]);
        assert_eq!(parts("echo `curl x`"), ["curl x", "echo \u{0}"]);
        assert_eq!(parts("a\nb"), ["a", "b"]);
    }

    #[test]
    fn looks_through_wrappers() {
        assert_eq!(parts("timeout 5 curl x"), ["curl x"]);
        assert_eq!(parts("timeout -s KILL 5 curl x"), ["curl x"]);
        assert_eq!(parts("nice -n 5 nohup curl x"), ["curl x"]);
        assert_eq!(parts("env X=1 Y=2 curl x"), ["curl x"]);
        assert_eq!(parts("bash -c 'curl x && rm y'"), ["curl x", "rm y"]);
        assert_eq!(parts("sh -ec \"ls\""), ["ls"]);
        assert_eq!(parts("find . | xargs -0 rm"), ["find .", "rm \u{0}"]);
        assert_eq!(parts("stdbuf -oL grep x"), ["grep x"]);
        assert_eq!(parts("bash script.sh"), ["bash script.sh"]);
        let p = split("timeout 5 curl x").unwrap();
        assert_eq!(p[0].layers(), ["timeout 5 curl x", "curl x"]);
        let p = split("env PATH=. npm test").unwrap();
        assert!(p[0].unresolved.is_some());
        let p = split("PATH=. npm test").unwrap();
        assert!(p[0].unresolved.is_some());
        let p = split("bash -c \"$X\"").unwrap();
        assert!(p[0].unresolved.is_some());
        let p = split("timeout --weird 5 curl x").unwrap();
        assert!(p[0].unresolved.is_some());
    }

    #[test]
    fn unparsed_commands_show_every_tail() {
        let l = unparsed_layers("if true; then \"r\"m -rf x; fi");
        assert!(l.iter().any(|t| spec_matches("rm *", t)), "{l:?}");
        let l = unparsed_layers("for i in 1; do\ncurl x|sh; done");
        assert!(l.iter().any(|t| spec_matches("curl *", t)), "{l:?}");
        assert!(unparsed_layers(&"a ".repeat(100_000)).len() <= 4097);
    }

    #[test]
    fn guesses_stay_bounded() {
        let cmd = format!("strace {}", "a ".repeat(100_000));
        let p = split(&cmd).unwrap();
        assert!(p[0].unresolved.is_some());
        assert!(p[0].layers().len() <= 2 * MAX_GUESSES);
    }

    #[test]
    fn specifiers() {
        let m = |spec: &str, cmd: &str| {
            let p = split(cmd).unwrap();
            p.len() == 1 && spec_matches(spec, &p[0].rendered())
        };
        assert!(m("npm test", "npm test"));
        assert!(!m("npm test", "npm test x"));
        assert!(m("npm test *", "npm test"));
        assert!(m("npm test *", "npm test --watch"));
        assert!(m("npm test:*", "npm test --watch"));
        assert!(!m("npm test *", "npm testing"));
        assert!(!m("npm test:*", "npm testing"));
        assert!(m("npm test*", "npm testing"));
        assert!(m("git * main", "git push origin main"));
        assert!(!m("npm test", "npm' 'test"));
        assert!(!m("npm test", "npm $X"));
        assert!(m("npm test *", "npm test $X"));
        assert!(m("git commit -m \"a b\"", "git commit -m 'a b'"));
        assert!(!m("git commit -m a b", "git commit -m 'a b'"));
        assert!(m("echo  hi", "echo   hi"));
    }
}
