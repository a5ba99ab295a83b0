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
//! and `find -exec ... ;` whose commands become parts of their own. Builtins that evaluate
//! an argument as arithmetic or an array subscript (`test -v 'a[$(cmd)]'`) are unresolved
//! in those forms ([`evaluating`]).

mod builtins;
mod evaluating;

use builtins::{alias, eval, find, shell_body, trap};

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
        "test" | "[" | "printf" | "wait" | "read" | "unset" | "declare" | "typeset" | "local"
        | "readonly" | "export" | "let" => evaluating::check(name, words),
        n if UNFOLLOWED.contains(&n) => Err("runs a command this check does not follow".into()),
        _ => Ok(Layer::Plain),
    };
    layer.unwrap_or_else(|why| Layer::Unresolved(format!("`{name}` {why}")))
}

pub(super) type Read = Result<Layer, String>;

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

#[cfg(test)]
mod tests;
