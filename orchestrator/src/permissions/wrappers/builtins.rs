//! The shell's own ways of running a string (`eval`, `trap`, `alias`, `bash -c`) and
//! `find -exec`, whose commands are words of `find`'s own command line.

use super::{Layer, Read};
use crate::permissions::shell::Word;

/// `find ... -exec CMD {} ;` (also `-execdir`, `-ok`, `-okdir`, and `+`).
pub(super) fn find(words: &[Word]) -> Read {
    if let Some(w) = words.iter().find(|w| w.literal().is_none()) {
        return Err(format!("has a computed argument `{}`", w.value));
    }
    let mut commands = Vec::new();
    let mut i = 1;
    while let Some(w) = words.get(i) {
        i += 1;
        if !matches!(w.value.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let start = i;
        while words
            .get(i)
            .is_some_and(|w| !matches!(w.value.as_str(), ";" | "+"))
        {
            i += 1;
        }
        if i >= words.len() {
            return Err(format!("`{}` has no terminating `;` or `+`", w.value));
        }
        // find replaces `{}` anywhere in a word with a file name: data, not known.
        let cmd: Vec<Word> = words[start..i]
            .iter()
            .map(|w| Word {
                dynamic: w.dynamic || w.value.contains("{}"),
                ..w.clone()
            })
            .collect();
        if cmd.is_empty() {
            return Err(format!("`{}` has no command", w.value));
        }
        commands.push(cmd);
        i += 1;
    }
    Ok(if commands.is_empty() {
        Layer::Plain
    } else {
        Layer::Commands(commands)
    })
}

/// `eval ARGS...`: the arguments joined by spaces are parsed again as a script.
pub(super) fn eval(words: &[Word]) -> Read {
    let mut body = Vec::new();
    for w in &words[1..] {
        match w.literal() {
            Some(v) => body.push(v),
            None => return Err(format!("runs a computed string (`{}`)", w.value)),
        }
    }
    if body.first() == Some(&"--") {
        body.remove(0);
    }
    Ok(if body.is_empty() {
        Layer::Plain
    } else {
        Layer::ShellBody(body.join(" "))
    })
}

/// `trap ACTION SIGNAL...`: ACTION runs when a signal (or EXIT) arrives.
pub(super) fn trap(words: &[Word]) -> Read {
    let mut i = 1;
    match words.get(1).and_then(Word::literal) {
        Some("-l" | "-p" | "-P") => return Ok(Layer::Plain),
        Some("--") => i = 2,
        _ => {}
    }
    let (Some(action), Some(_)) = (words.get(i), words.get(i + 1)) else {
        // No action, or `trap SIG` (resets SIG).
        return Ok(Layer::Plain);
    };
    match action.literal() {
        Some("-") => Ok(Layer::Plain),
        Some(body) => Ok(Layer::ShellBody(body.to_string())),
        None => Err(format!("sets a computed action (`{}`)", action.value)),
    }
}

/// `alias NAME=VALUE...`: each VALUE is a command wherever NAME is used later.
///
/// Security: a definition is refused, not looked through. Where aliases expand (after
/// `shopt -s expand_aliases`, on a later line of the same command), a later part that
/// reads as `g push` runs `git push`, which no rule written for `git push` would see;
/// checking the body alone (`git`) does not say what the later use runs. Listing
/// (`alias`, `alias NAME`) stays a plain command.
pub(super) fn alias(words: &[Word]) -> Read {
    for w in &words[1..] {
        if w.literal().is_none() {
            return Err(format!("defines a computed alias (`{}`)", w.value));
        }
        if w.value.contains('=') {
            return Err(format!(
                "defines an alias (`{}`): a later part of the command may run other than it reads",
                w.value
            ));
        }
    }
    Ok(Layer::Plain)
}

/// `bash [opts] -c BODY [name args...]`: the body. Without `-c` the shell runs a script or
/// its standard input, which is the shell command itself (not looked through). Options
/// that make the shell read start-up files the sandbox may have written (`-l`, `-i`,
/// `--rcfile`, ...) or read commands from elsewhere are not followed.
pub(super) fn shell_body(words: &[Word], name: &str) -> Read {
    const LONG_OK: &[&str] = &["--norc", "--noprofile", "--posix", "--noediting"];
    let mut i = 1;
    let mut has_c = false;
    while let Some(w) = words.get(i) {
        let Some(a) = w.literal() else {
            return Err("has computed options".into());
        };
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if matches!(a, "-o" | "+o" | "-O" | "+O") {
            i += 2;
            continue;
        }
        if a.starts_with("--") {
            if !LONG_OK.contains(&a) {
                return Err(format!("has the option `{a}`"));
            }
        } else if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
            if a[1..].contains(['i', 'l', 's']) {
                return Err(format!("has the option `{a}`"));
            }
            if a.starts_with('-') && a[1..].contains('c') {
                has_c = true;
            }
        } else {
            break;
        }
        i += 1;
    }
    if !has_c {
        return Ok(Layer::Plain);
    }
    match words.get(i) {
        Some(body) if !body.dynamic => Ok(Layer::ShellBody(body.value.clone())),
        Some(_) => Err(format!("`{name} -c` runs a computed command")),
        None => Err(format!("`{name} -c` without a command")),
    }
}
