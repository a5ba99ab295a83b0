//! Commands that run other commands, and where in their words the other command starts.
//!
//! Each wrapper is read with its complete option table ([`OptionSpec`], getopt_long's rules:
//! clusters, attached values, abbreviated long options), so `exec -a x rm y`, `timeout
//! --sig=KILL 5 rm y` or `setsid -fw rm y` expose `rm y` to deny rules exactly as bash would
//! run it. Security: a wrapper used in any way this table does not describe (an unknown
//! option, a computed word where an option may be, a form that starts a shell) is
//! [`Layer::Unresolved`]: no allow rule and no read-only check may pass it, and deny or ask
//! rules look at every tail of its words ([`super::bash_rules::Part::layers`]).
//!
//! Besides program wrappers, the shell's own ways of running a string are followed: `eval`
//! (its arguments joined by spaces are a script), `trap ACTION SIG` (ACTION runs later),
//! `alias NAME=VALUE` (VALUE runs where NAME is used, once aliases are on), `bash -c BODY`;
//! and `find -exec ... ;` whose commands become parts of their own.

use super::bash_rules::dangerous_variable;
use super::options::OptionSpec;
use super::read_only::command_name;
use super::shell::Word;

/// What a command's words say about the command it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layer {
    /// Not a wrapper (or a wrapper form that runs nothing).
    Plain,
    /// The wrapped command starts at word `skip`.
    Inner {
        skip: usize,
        /// Variables the wrapper sets for it (`env A=1 cmd`).
        env: Vec<String>,
        /// The wrapper appends arguments the parser cannot know (`xargs cmd`).
        append_unknown: bool,
        /// A string the wrapper replaces with data in the command's words (`xargs -I {}`).
        placeholder: Option<String>,
    },
    /// A shell string it runs (`bash -c BODY`, `eval ...`, `trap BODY INT`).
    ShellBody(String),
    /// Separate commands it runs (`find -exec A {} ; -exec B ;`), with `{}` already marked
    /// computed; the wrapper itself remains a part.
    Commands(Vec<Vec<Word>>),
    /// A wrapper used in a way this code does not follow, and why.
    Unresolved(String),
}

/// Programs that run a command given in their arguments but are not followed here.
const UNFOLLOWED: &[&str] = &[
    "watch",
    "strace",
    "ltrace",
    "valgrind",
    "gdb",
    "script",
    "su",
    "runuser",
    "chroot",
    "nsenter",
    "systemd-run",
    "parallel",
    "busybox",
    "firejail",
    "bwrap",
    "fakeroot",
    "fakechroot",
    "eatmydata",
    "proot",
    "torsocks",
    "proxychains",
    "proxychains4",
    "prlimit",
    "numactl",
    "cpulimit",
    "catchsegv",
    "setpriv",
    "capsh",
    "dbus-run-session",
    "xvfb-run",
    "run-parts",
    "runcon",
    "sg",
    "unbuffer",
    "rlwrap",
    "faketime",
    "cgexec",
    "chpst",
    "pkexec",
    "mapfile",
    "readarray",
    "hash",
    "enable",
    "source",
    ".",
];

const NO_OPTIONS: OptionSpec = OptionSpec {
    short_flags: "",
    short_values: "",
    short_optional: "",
    long_flags: &[],
    long_values: &[],
    long_optional: &[],
};

/// Reads the layer `words` form. The first word is the command name.
pub fn unwrap_layer(words: &[Word]) -> Layer {
    let Some(first) = words.first() else {
        return Layer::Plain;
    };
    if first.dynamic || first.glob {
        return Layer::Unresolved(format!("its command name `{}` is computed", first.value));
    }
    if first.quoted {
        return Layer::Unresolved(format!(
            "its command name `{}` is quoted or escaped",
            first.value
        ));
    }
    let Some(name) = command_name(&first.value) else {
        // `./timeout`, `/opt/bin/env`, `/usr/bin/../bin/eval`: a program named like a
        // wrapper outside the system directories may or may not be one. Never allowed by
        // a rule, and deny rules see every tail of its words.
        let file_name = first.value.rsplit('/').next().unwrap_or_default();
        return match layer_for(file_name, words) {
            Layer::Plain => Layer::Plain,
            _ => Layer::Unresolved(format!(
                "`{}` is named like the wrapper `{file_name}` but is not the system's",
                first.value
            )),
        };
    };
    layer_for(name, words)
}

/// The layer `words` form when their program is `name`.
fn layer_for(name: &str, words: &[Word]) -> Layer {
    let layer = match name {
        "nohup" | "builtin" => after_options(words, &NO_OPTIONS, 0),
        "exec" => after_options(words, &EXEC, 0),
        "time" => time(words),
        "command" => command(words),
        "timeout" => after_options(words, &TIMEOUT, 1),
        "nice" => nice(words),
        "stdbuf" => after_options(words, &STDBUF, 0),
        "setsid" => after_options(words, &SETSID, 0),
        "env" => env(words),
        "flock" => flock(words),
        "ionice" => ionice(words),
        "taskset" => taskset(words),
        "chrt" => chrt(words),
        "unshare" => unshare(words),
        "sudo" => sudo(words),
        "doas" => doas(words),
        "xargs" => xargs(words),
        "find" => find(words),
        "eval" => eval(words),
        "trap" => trap(words),
        "alias" => alias(words),
        "bash" | "sh" | "dash" | "zsh" | "ksh" | "mksh" | "rbash" | "posh" => {
            shell_body(words, name)
        }
        n if UNFOLLOWED.contains(&n) => Err("runs a command this check does not follow".into()),
        _ => Ok(Layer::Plain),
    };
    layer.unwrap_or_else(|why| Layer::Unresolved(format!("`{name}` {why}")))
}

type Read = Result<Layer, String>;

fn inner(skip: usize, words: &[Word]) -> Layer {
    if skip >= words.len() {
        Layer::Plain
    } else {
        Layer::Inner {
            skip,
            env: Vec::new(),
            append_unknown: false,
            placeholder: None,
        }
    }
}

/// Options, then `operands` operands of the wrapper itself (a duration, a mask), then the
/// command.
fn after_options(words: &[Word], spec: &OptionSpec, operands: usize) -> Read {
    let p = spec.parse(words, 1)?;
    if operands > 0 && p.rest + operands > words.len() {
        return Ok(Layer::Plain);
    }
    Ok(inner(p.rest + operands, words))
}

const EXEC: OptionSpec = OptionSpec {
    short_flags: "cl",
    short_values: "a",
    ..NO_OPTIONS
};

/// `time [-p] [NAME=VALUE]... cmd`: `time` is a reserved word that prefixes a whole
/// pipeline, so assignments after it are the command's own (their values were parsed
/// already; `$(...)` in them is reported as a command of its own).
fn time(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "p",
        ..NO_OPTIONS
    };
    let mut i = SPEC.parse(words, 1)?.rest;
    let mut env = Vec::new();
    while let Some(w) = words.get(i) {
        match w.value.split_once('=') {
            Some((n, _)) if !w.quoted && is_name(n) => {
                env.push(n.to_string());
                i += 1;
            }
            _ => break,
        }
    }
    if i >= words.len() {
        return Ok(Layer::Plain);
    }
    Ok(Layer::Inner {
        skip: i,
        env,
        append_unknown: false,
        placeholder: None,
    })
}

fn is_name(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with(|c: char| c.is_ascii_digit())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `command -v` / `-V` only describe; `command [-p] cmd` runs cmd.
fn command(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "pvV",
        ..NO_OPTIONS
    };
    let p = SPEC.parse(words, 1)?;
    if p.has(&["-v", "-V"]) {
        return Ok(Layer::Plain);
    }
    Ok(inner(p.rest, words))
}

const TIMEOUT: OptionSpec = OptionSpec {
    short_flags: "v",
    short_values: "ks",
    long_flags: &[
        "foreground",
        "preserve-status",
        "verbose",
        "help",
        "version",
    ],
    long_values: &["kill-after", "signal"],
    ..NO_OPTIONS
};

/// `nice [-N | -n N | --adjustment=N] cmd`.
fn nice(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_values: "n",
        long_flags: &["help", "version"],
        long_values: &["adjustment"],
        ..NO_OPTIONS
    };
    let legacy = words.get(1).and_then(Word::literal).is_some_and(|a| {
        a.strip_prefix('-').is_some_and(|n| {
            !n.is_empty()
                && n.trim_start_matches('+')
                    .chars()
                    .all(|c| c.is_ascii_digit())
        })
    });
    let p = SPEC.parse(words, if legacy { 2 } else { 1 })?;
    Ok(inner(p.rest, words))
}

const STDBUF: OptionSpec = OptionSpec {
    short_values: "ioe",
    long_flags: &["help", "version"],
    long_values: &["input", "output", "error"],
    ..NO_OPTIONS
};

const SETSID: OptionSpec = OptionSpec {
    short_flags: "cfwhV",
    long_flags: &["ctty", "fork", "wait", "help", "version"],
    ..NO_OPTIONS
};

/// `env [-i] [-u NAME] [-C DIR] [-] [NAME=VALUE]... [cmd]`; `-S` splits a string into a
/// command line by rules of its own, so it is not followed.
fn env(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "i0v",
        short_values: "uCS",
        long_flags: &[
            "ignore-environment",
            "null",
            "debug",
            "list-signal-handling",
            "help",
            "version",
        ],
        long_values: &["unset", "chdir", "split-string"],
        long_optional: &["block-signal", "default-signal", "ignore-signal"],
        ..NO_OPTIONS
    };
    let p = SPEC.parse(words, 1)?;
    if p.has(&["-S", "--split-string"]) {
        return Err("-S splits a string into a command by rules of its own".into());
    }
    if p.has(&["-C", "--chdir"]) {
        // Like `cd`: the command then reads the configuration of another directory (a
        // nested repository's for git), which the read-only check cannot see.
        return Err("changes the working directory".into());
    }
    let mut i = p.rest;
    if words.get(i).and_then(Word::literal) == Some("-") {
        i += 1;
    }
    assignments_then_command(words, i)
}

/// `NAME=VALUE` words, then the command (none: the wrapper only prints).
fn assignments_then_command(words: &[Word], mut i: usize) -> Read {
    let mut env = Vec::new();
    while let Some(w) = words.get(i) {
        match w.value.split_once('=') {
            Some((n, _)) if !w.dynamic && is_name(n) => {
                env.push(n.to_string());
                i += 1;
            }
            _ => break,
        }
    }
    if i >= words.len() {
        // Nothing to run: it prints the environment.
        return match env.iter().find(|n| dangerous_variable(n)) {
            Some(n) => Err(format!("sets {n}, which changes what runs")),
            None => Ok(Layer::Plain),
        };
    }
    Ok(Layer::Inner {
        skip: i,
        env,
        append_unknown: false,
        placeholder: None,
    })
}

/// `flock [opts] FILE cmd...`, `flock [opts] FILE -c BODY`, `flock [opts] FD`.
fn flock(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "sexnoFuhV",
        short_values: "wE",
        long_flags: &[
            "shared",
            "exclusive",
            "unlock",
            "nonblocking",
            "nb",
            "close",
            "no-fork",
            "verbose",
            "help",
            "version",
        ],
        long_values: &["timeout", "wait", "conflict-exit-code"],
        ..NO_OPTIONS
    };
    let p = SPEC.parse(words, 1)?;
    let cmd = p.rest + 1;
    match words.get(cmd).map(|w| (w.literal(), w)) {
        None => Ok(Layer::Plain),
        Some((Some("-c" | "--command"), _)) => match words.get(cmd + 1) {
            Some(body) if !body.dynamic && words.len() == cmd + 2 => {
                Ok(Layer::ShellBody(body.value.clone()))
            }
            _ => Err("-c runs a computed command".into()),
        },
        Some((None, w)) if w.value.starts_with('-') || w.dynamic => {
            Err("has a computed word where -c may stand".into())
        }
        Some(_) => Ok(inner(cmd, words)),
    }
}

/// `ionice [-c C] [-n N] [-t] cmd`; with `-p`/`-P`/`-u` it changes running processes.
fn ionice(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "thV",
        short_values: "cnpPu",
        long_flags: &["ignore", "help", "version"],
        long_values: &["class", "classdata", "pid", "pgid", "uid"],
        ..NO_OPTIONS
    };
    let p = SPEC.parse(words, 1)?;
    if p.has(&["-p", "-P", "-u", "--pid", "--pgid", "--uid"]) {
        return Ok(Layer::Plain);
    }
    Ok(inner(p.rest, words))
}

/// `taskset [-a] [-c] MASK cmd`; with `-p` it changes a running process.
fn taskset(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "apchV",
        long_flags: &["all-tasks", "pid", "cpu-list", "help", "version"],
        ..NO_OPTIONS
    };
    let p = SPEC.parse(words, 1)?;
    if p.has(&["-p", "--pid"]) {
        return Ok(Layer::Plain);
    }
    after_operands(words, p.rest, 1)
}

fn after_operands(words: &[Word], rest: usize, operands: usize) -> Read {
    if rest + operands > words.len() {
        return Ok(Layer::Plain);
    }
    Ok(inner(rest + operands, words))
}

/// `chrt [policy] [PRIORITY] cmd`; `-p` and `-m` act on processes or print.
fn chrt(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "abdfiomprRvhV",
        short_values: "TPD",
        long_flags: &[
            "all-tasks",
            "batch",
            "deadline",
            "fifo",
            "idle",
            "other",
            "rr",
            "reset-on-fork",
            "verbose",
            "max",
            "pid",
            "help",
            "version",
        ],
        long_values: &["sched-runtime", "sched-period", "sched-deadline"],
        ..NO_OPTIONS
    };
    let p = SPEC.parse(words, 1)?;
    if p.has(&["-p", "--pid", "-m", "--max"]) {
        return Ok(Layer::Plain);
    }
    let priority = words
        .get(p.rest)
        .and_then(Word::literal)
        .is_some_and(|a| !a.is_empty() && a.chars().all(|c| c.is_ascii_digit()));
    Ok(inner(p.rest + usize::from(priority), words))
}

/// `unshare [opts] [cmd]`; without a command it starts `$SHELL`.
fn unshare(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "muinpUCTfrchV",
        short_values: "RwSGl",
        long_flags: &[
            "fork",
            "map-root-user",
            "map-current-user",
            "keep-caps",
            "map-auto",
            "help",
            "version",
        ],
        long_values: &[
            "propagation",
            "setgroups",
            "root",
            "wd",
            "monotonic",
            "boottime",
            "map-user",
            "map-group",
            "map-users",
            "map-groups",
            "setuid",
            "setgid",
            "load-interp",
        ],
        long_optional: &[
            "mount",
            "uts",
            "ipc",
            "net",
            "pid",
            "user",
            "cgroup",
            "time",
            "kill-child",
            "mount-proc",
            "mount-binfmt",
        ],
        ..NO_OPTIONS
    };
    let p = SPEC.parse(words, 1)?;
    if p.rest >= words.len() {
        return Err("without a command starts a shell".into());
    }
    Ok(inner(p.rest, words))
}

/// `sudo [opts] [NAME=VALUE]... cmd`; `-i`, `-s`, `-e` and the listing forms run a shell or
/// an editor, or nothing this check can follow.
fn sudo(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "AbBEHnPSkKeilsvV",
        short_values: "CDgpRrtTUu",
        short_optional: "h",
        long_flags: &[
            "askpass",
            "background",
            "bell",
            "set-home",
            "non-interactive",
            "preserve-groups",
            "stdin",
            "reset-timestamp",
            "remove-timestamp",
            "edit",
            "login",
            "shell",
            "list",
            "validate",
            "version",
            "help",
        ],
        long_values: &[
            "close-from",
            "chdir",
            "group",
            "prompt",
            "chroot",
            "role",
            "type",
            "command-timeout",
            "other-user",
            "user",
        ],
        long_optional: &["preserve-env", "host"],
    };
    let p = SPEC.parse(words, 1)?;
    const SHELLS: &[&str] = &[
        "-e",
        "-i",
        "-s",
        "-l",
        "-v",
        "-V",
        "-K",
        "-h",
        "--edit",
        "--login",
        "--shell",
        "--list",
        "--validate",
        "--version",
        "--help",
        "--remove-timestamp",
        "--host",
    ];
    if p.has(SHELLS) {
        return Err("runs a shell, an editor, or no command".into());
    }
    assignments_then_command(words, p.rest)
}

/// `doas [-n] [-u USER] cmd`; `-s` runs a shell.
fn doas(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "Lns",
        short_values: "Cu",
        ..NO_OPTIONS
    };
    let p = SPEC.parse(words, 1)?;
    if p.has(&["-s", "-L", "-C"]) {
        return Err("runs a shell or no command".into());
    }
    Ok(inner(p.rest, words))
}

/// `xargs [opts] [cmd [args]]`: cmd gets arguments read from input (unknown), or with
/// `-I R` / `-i` has R (`{}`) replaced by them.
fn xargs(words: &[Word]) -> Read {
    const SPEC: OptionSpec = OptionSpec {
        short_flags: "0prtxo",
        short_values: "aEILnsPd",
        short_optional: "eil",
        long_flags: &[
            "null",
            "interactive",
            "no-run-if-empty",
            "show-limits",
            "verbose",
            "exit",
            "open-tty",
            "help",
            "version",
        ],
        long_values: &[
            "arg-file",
            "delimiter",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ],
        long_optional: &["eof", "replace", "max-lines"],
    };
    let p = SPEC.parse(words, 1)?;
    if p.has(&["--process-slot-var"]) {
        return Err("sets an environment variable for the command".into());
    }
    let placeholder = match (p.value(&["-I"]), p.has(&["-i", "--replace"])) {
        (Some(r), _) => Some(r.to_string()),
        (None, true) => Some(p.value(&["-i", "--replace"]).unwrap_or("{}").to_string()),
        (None, false) => None,
    };
    if p.rest >= words.len() {
        // `xargs` alone runs `echo`.
        return Ok(Layer::Plain);
    }
    Ok(Layer::Inner {
        skip: p.rest,
        env: Vec::new(),
        append_unknown: placeholder.is_none(),
        placeholder,
    })
}

/// `find ... -exec CMD {} ;` (also `-execdir`, `-ok`, `-okdir`, and `+`).
fn find(words: &[Word]) -> Read {
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
fn eval(words: &[Word]) -> Read {
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
fn trap(words: &[Word]) -> Read {
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
fn alias(words: &[Word]) -> Read {
    let mut bodies = Vec::new();
    for w in &words[1..] {
        if w.literal().is_none() {
            return Err(format!("defines a computed alias (`{}`)", w.value));
        }
        if let Some((_, value)) = w.value.split_once('=') {
            bodies.push(value.to_string());
        }
    }
    Ok(if bodies.is_empty() {
        Layer::Plain
    } else {
        Layer::ShellBody(bodies.join("\n"))
    })
}

/// `bash [opts] -c BODY [name args...]`: the body. Without `-c` the shell runs a script or
/// its standard input, which is the shell command itself (not looked through). Options
/// that make the shell read start-up files the sandbox may have written (`-l`, `-i`,
/// `--rcfile`, ...) or read commands from elsewhere are not followed.
fn shell_body(words: &[Word], name: &str) -> Read {
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

#[cfg(test)]
mod tests {
    use crate::permissions::bash_rules::{Part, split};

    /// The innermost command of every part, rendered (U+0000 for unknown words).
    fn inner(cmd: &str) -> Vec<String> {
        split(cmd)
            .unwrap_or_else(|e| panic!("{cmd}: {e}"))
            .iter()
            .map(Part::rendered)
            .collect()
    }

    /// Issue 9: wrappers that evaded deny rules now expose the command they run.
    #[test]
    fn wrapped_commands_are_exposed() {
        for cmd in [
            "exec -a x rm x",
            "exec -cl rm x",
            "exec -ax rm x",
            "setsid rm x",
            "setsid -fw rm x",
            "setsid --fork --wa rm x",
            "flock /tmp/l rm x",
            "flock -x -w 5 /tmp/l rm x",
            "flock --nb /tmp/l rm x",
            "flock /tmp/l -c 'rm x'",
            "ionice -c 3 rm x",
            "ionice -c3 -n7 -t rm x",
            "taskset 0x1 rm x",
            "taskset -c 0 rm x",
            "chrt -f 10 rm x",
            "chrt 0 rm x",
            "chrt --idle 0 rm x",
            "nice -5 rm x",
            "nice --adj=5 rm x",
            "nice -n5 rm x",
            "timeout --sig=KILL 5 rm x",
            "timeout -k5 -sKILL 5 rm x",
            "timeout --fore 5 rm x",
            "env -i rm x",
            "env -u A rm x",
            "env - A=1 rm x",
            "env --ignore-e rm x",
            "stdbuf -o0 -eL rm x",
            "nohup rm x",
            "command rm x",
            "command -p rm x",
            "time -p rm x",
            "sudo rm x",
            "sudo -u root -E rm x",
            "sudo --user=root A=1 rm x",
            "doas -u root rm x",
            "unshare -r rm x",
            "unshare --mount --net rm x",
            "eval 'rm x'",
            "eval rm x",
            "eval -- rm x",
            "trap 'rm x' EXIT",
            "trap -- 'rm x' INT TERM",
            "alias y='rm x'",
            "find . -exec rm x \\;",
            "find . -name a -ok rm x ';' -print",
            "bash -c 'rm x'",
            "sh -euc 'rm x'",
            "timeout 5 env -i nice -n 1 setsid bash -c 'exec -a y rm x'",
        ] {
            assert!(
                inner(cmd).iter().any(|p| p == "rm x"),
                "{cmd}: {:?}",
                inner(cmd)
            );
        }
        assert_eq!(
            inner("find . -execdir rm {} +"),
            ["rm \u{0}", "find . -execdir rm {} +"]
        );
        assert_eq!(
            inner("find . | xargs -I{} rm -- {}"),
            ["find .", "rm -- \u{0}"]
        );
        assert_eq!(inner("xargs -i rm {}"), ["rm \u{0}"]);
    }

    /// Forms that run nothing else stay plain commands.
    #[test]
    fn forms_that_run_nothing_else() {
        for cmd in [
            "command -v rm",
            "ionice -p 1",
            "taskset -p 1",
            "chrt -p 1",
            "trap - INT",
            "trap -l",
            "trap INT",
            "flock 9",
            "xargs",
            "eval",
            "env",
            "alias",
            "find . -name x",
        ] {
            let parts = split(cmd).unwrap();
            assert_eq!(parts.len(), 1, "{cmd}");
            assert!(parts[0].wrappers.is_empty(), "{cmd}");
            assert!(parts[0].unresolved.is_none(), "{cmd}");
        }
    }

    /// A wrapper this code does not follow: never allowed, and deny rules see every tail
    /// and every script-like argument.
    #[test]
    fn unfollowed_wrappers_are_unresolved_and_searched() {
        for cmd in [
            "strace -f rm x",
            "watch -n 1 rm x",
            "su -c 'rm x'",
            "su root -c 'rm -f x; ls'",
            "timeout --bogus 5 rm x",
            "timeout $T rm x",
            "env -S 'rm x'",
            "env --chdir=/ rm x",
            "env -C sub rm x",
            "sudo -s rm x",
            "sudo -i 'rm x'",
            "bash -l -c 'rm x'",
            "bash --rcfile y -c 'rm x'",
            "setsid $X rm x",
            "xargs --process-slot-var=P rm x",
            "eval rm $X",
            "find . $X rm x ;",
            "xargs -I{} sh -c 'rm {}'",
            "find . -exec sh -c 'rm {}' \\;",
            "hash -p /bin/rm y; y x",
            "'rm' x",
        ] {
            let parts = split(cmd).unwrap();
            let part = parts
                .iter()
                .find(|p| p.unresolved.is_some())
                .unwrap_or_else(|| panic!("{cmd}: nothing unresolved"));
            assert!(
                part.layers()
                    .iter()
                    .any(|l| l.starts_with("rm ") || l.starts_with("rm\u{1}")),
                "{cmd}: {:?}",
                part.layers()
            );
        }
        for cmd in [
            "unshare -r",
            "trap \"$A\" EXIT",
            "env --ign rm x",
            "flock /tmp/l -c \"$C\"",
        ] {
            assert!(split(cmd).unwrap()[0].unresolved.is_some(), "{cmd}");
        }
        assert!(
            split("PATH=. bash -c 'a; b'")
                .unwrap()
                .iter()
                .all(|p| p.unresolved.is_some())
        );
    }

    #[test]
    fn wrappers_named_by_other_paths_are_unresolved() {
        for cmd in [
            "./timeout 5 rm x",
            "/usr/bin/../bin/timeout 5 rm x",
            "/opt/bin/env rm x",
            "bin/eval rm x",
        ] {
            let p = split(cmd).unwrap();
            assert!(p[0].unresolved.is_some(), "{cmd}");
            assert!(p[0].layers().contains(&"rm x".to_string()), "{cmd}");
        }
        assert!(
            split("/usr/bin/timeout 5 rm x").unwrap()[0]
                .unresolved
                .is_none()
        );
        assert!(split("./build.sh x").unwrap()[0].unresolved.is_none());
    }

    #[test]
    fn commands_named_by_path_are_seen_by_file_name() {
        let p = split("/bin/rm x").unwrap();
        assert_eq!(p[0].layers(), ["/bin/rm x", "rm x"]);
        let p = split("./node_modules/.bin/rm x").unwrap();
        assert!(p[0].layers().contains(&"rm x".to_string()));
    }
}
