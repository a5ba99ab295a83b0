//! Bash commands against `Bash(...)` specifiers.
//!
//! A command is parsed ([`super::shell`]) and split into [`Part`]s: one per simple command,
//! with wrappers looked through. Wrappers are `timeout`, `nice`, `nohup`, `stdbuf`, `time`,
//! `command`, `builtin`, `exec`, `env [VAR=x...]`, `xargs` (the command it runs gets an
//! unknown trailing argument) and `bash|sh|dash|zsh|ksh -c BODY` (the body is parsed
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

use super::read_only::command_name;
use super::rules::wildcard_chars;
use super::shell::{self, Assignment, Redirect, SimpleCommand, Unparseable, Word};

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

    /// Every layer rendered, outermost first, innermost last.
    pub fn layers(&self) -> Vec<String> {
        self.wrappers
            .iter()
            .map(|w| render(w))
            .chain(std::iter::once(self.rendered()))
            .collect()
    }
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
fn dangerous_variable(name: &str) -> bool {
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
            } => {
                if let Some(name) = env.iter().find(|n| dangerous_variable(n)) {
                    part.unresolved
                        .get_or_insert(format!("it sets {name}, which changes what runs"));
                }
                let outer = part.words.clone();
                let mut inner = part.words.split_off(skip);
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
            Layer::ShellBody(body) => {
                let inner = split_at_depth(&body, depth + 1)?;
                let outer = part.words.clone();
                let mut wrappers = part.wrappers.clone();
                wrappers.push(outer);
                let mut first = true;
                for mut p in inner {
                    let mut w = wrappers.clone();
                    w.append(&mut p.wrappers);
                    p.wrappers = w;
                    if first {
                        // The wrapper's own redirections and assignments apply to the body.
                        p.redirects.extend(part.redirects.iter().cloned());
                        p.assignments.extend(part.assignments.iter().cloned());
                        if p.unresolved.is_none() {
                            p.unresolved = part.unresolved.clone();
                        }
                        first = false;
                    }
                    parts.push(p);
                }
                if first {
                    // An empty body: keep the wrapper as a no-op part for its redirections.
                    part.wrappers = wrappers;
                    part.words.clear();
                    parts.push(part);
                }
                return Ok(());
            }
        }
    }
    parts.push(part);
    Ok(())
}

enum Layer {
    /// Not a wrapper.
    Plain,
    /// A wrapper whose command starts at word `skip`; `env` lists variables it sets.
    Inner {
        skip: usize,
        env: Vec<String>,
        append_unknown: bool,
    },
    /// `sh -c BODY`.
    ShellBody(String),
    /// A wrapper used in a way this code does not follow.
    Unresolved(String),
}

fn unwrap_layer(words: &[Word]) -> Layer {
    let Some(first) = words.first() else {
        return Layer::Plain;
    };
    if first.quoted || first.dynamic || first.glob {
        return Layer::Unresolved(format!(
            "its command name `{}` is quoted, escaped or computed",
            first.value
        ));
    }
    let Some(name) = command_name(&first.value) else {
        return Layer::Plain;
    };
    let lit = |i: usize| words.get(i).and_then(Word::literal);
    let inner = |skip: usize| -> Layer {
        if skip >= words.len() {
            Layer::Plain
        } else {
            Layer::Inner {
                skip,
                env: Vec::new(),
                append_unknown: false,
            }
        }
    };
    let unresolved = |why: &str| Layer::Unresolved(format!("`{name}` {why}"));
    // Options before the wrapped command; `with_arg` take a value (`-n 5`); any other
    // option, or a computed word among them, makes the part unresolved.
    let skip_options = |start: usize, flags: &[&str], with_arg: &[&str]| -> Option<usize> {
        let mut i = start;
        while let Some(w) = words.get(i) {
            let a = w.literal()?;
            if a == "--" {
                return Some(i + 1);
            }
            if !a.starts_with('-') || a == "-" {
                return Some(i);
            }
            if with_arg.contains(&a) {
                i += 2;
            } else if flags.contains(&a)
                || with_arg
                    .iter()
                    .any(|f| f.starts_with("--") && a.starts_with(&format!("{f}=")))
                || with_arg
                    .iter()
                    .any(|f| f.len() == 2 && !f.starts_with("--") && a.starts_with(f))
            {
                i += 1;
            } else {
                return None;
            }
        }
        Some(i)
    };
    match name {
        "nohup" | "builtin" | "exec" => inner(skip_options(1, &[], &[]).unwrap_or(1)),
        "time" => match skip_options(1, &["-p"], &[]) {
            Some(i) => inner(i),
            None => unresolved("has options this check does not follow"),
        },
        "command" => match lit(1) {
            Some("-v" | "-V") => Layer::Plain,
            _ => match skip_options(1, &["-p"], &[]) {
                Some(i) => inner(i),
                None => unresolved("has options this check does not follow"),
            },
        },
        "timeout" => {
            match skip_options(
                1,
                &["--preserve-status", "--foreground", "-v", "--verbose"],
                &["-s", "-k", "--signal", "--kill-after"],
            ) {
                // The duration, then the command.
                Some(i) if lit(i).is_some() => inner(i + 1),
                _ => unresolved("has options this check does not follow"),
            }
        }
        "nice" => {
            let mut i = 1;
            if let Some(a) = lit(1) {
                if a == "-n" {
                    i = 3;
                } else if a.starts_with("--adjustment=")
                    || (a.starts_with('-') && a[1..].chars().all(|c| c.is_ascii_digit()))
                {
                    i = 2;
                }
            }
            match skip_options(i, &[], &[]) {
                Some(i) => inner(i),
                None => unresolved("has options this check does not follow"),
            }
        }
        "stdbuf" => match skip_options(
            1,
            &[],
            &["-i", "-o", "-e", "--input", "--output", "--error"],
        ) {
            Some(i) => inner(i),
            None => unresolved("has options this check does not follow"),
        },
        "env" => {
            let Some(mut i) = skip_options(
                1,
                &["-i", "--ignore-environment", "-0", "--null"],
                &["-u", "--unset", "-C", "--chdir"],
            ) else {
                return unresolved("has options this check does not follow");
            };
            let mut env = Vec::new();
            while let Some(w) = words.get(i) {
                match w.value.split_once('=') {
                    Some((n, _))
                        if !n.is_empty()
                            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                    {
                        env.push(n.to_string());
                        i += 1;
                    }
                    _ => break,
                }
            }
            if i >= words.len() {
                return if env.iter().any(|n| dangerous_variable(n)) {
                    unresolved("sets a variable that changes what runs")
                } else {
                    Layer::Plain
                };
            }
            Layer::Inner {
                skip: i,
                env,
                append_unknown: false,
            }
        }
        "xargs" => {
            match skip_options(
                1,
                &[
                    "-0",
                    "--null",
                    "-r",
                    "--no-run-if-empty",
                    "-t",
                    "--verbose",
                    "-x",
                    "--exit",
                    "--open-tty",
                    "-o",
                ],
                &[
                    "-n",
                    "-L",
                    "-P",
                    "-s",
                    "-d",
                    "-I",
                    "-E",
                    "-a",
                    "--max-args",
                    "--max-lines",
                    "--max-procs",
                    "--max-chars",
                    "--delimiter",
                    "--replace",
                    "--eof",
                    "--arg-file",
                ],
            ) {
                Some(i) if i < words.len() => Layer::Inner {
                    skip: i,
                    env: Vec::new(),
                    append_unknown: true,
                },
                // `xargs` alone runs `echo`.
                Some(_) => Layer::Plain,
                None => unresolved("has options this check does not follow"),
            }
        }
        "bash" | "sh" | "dash" | "zsh" | "ksh" => shell_body(words, name),
        _ => Layer::Plain,
    }
}

/// `bash [opts] -c BODY [name args...]`: the body; without `-c` the shell runs a script or
/// standard input, which is the shell command itself (not looked through).
fn shell_body(words: &[Word], name: &str) -> Layer {
    let mut i = 1;
    let mut has_c = false;
    while let Some(w) = words.get(i) {
        let Some(a) = w.literal() else {
            return Layer::Unresolved(format!("`{name}` has computed options"));
        };
        if a == "--" {
            i += 1;
            break;
        }
        if matches!(a, "-o" | "+o" | "-O" | "+O") {
            i += 2;
            continue;
        }
        if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
            if !a.starts_with("--") && a[1..].contains('c') {
                has_c = true;
            }
            i += 1;
            continue;
        }
        break;
    }
    if !has_c {
        return Layer::Plain;
    }
    match words.get(i) {
        Some(body) if !body.dynamic => Layer::ShellBody(body.value.clone()),
        Some(_) => Layer::Unresolved(format!("`{name} -c` runs a computed command")),
        None => Layer::Unresolved(format!("`{name} -c` without a command")),
    }
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
