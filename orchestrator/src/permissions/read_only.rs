//! Read-only commands: ones that never need permission (they only read or print), checked
//! with their arguments after the shell parser split the command.
//!
//! Security notes:
//! - A command counts only when its name is written plainly (`ls`) or is an absolute path in
//!   a system directory (`/usr/bin/ls`): `./ls` could be a script from the repository.
//! - Arguments whose value the parser cannot know (`$X`, `$(...)`, unquoted globs) could
//!   expand into options (a file named `--pre=sh` matched by `*`), so only commands with no
//!   dangerous option accept them (`dynamic_ok`).
//! - Options that write files or run programs are forbidden by their exact name and by every
//!   abbreviation of it, since GNU getopt and git accept unambiguous prefixes (`sort --co=sh`
//!   is `sort --compress-program=sh`): see [`super::options::long_option_is`].
//! - This decides only whether to prompt; the sandbox confines whatever runs.

use super::options::{long_option_is, short_cluster_has};
use super::shell::Word;

mod git;
use git::git_ok;

/// Directories whose binaries may be named by absolute path.
const SYSTEM_BIN_DIRS: &[&str] = &["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"];

type Check = fn(&[&str]) -> bool;

/// `(name, dynamic arguments are fine, argument check)`.
const COMMANDS: &[(&str, bool, Check)] = &[
    ("cat", true, any),
    ("head", true, any),
    ("tail", true, any),
    ("wc", true, any),
    ("ls", true, any),
    ("echo", true, any),
    ("pwd", true, any),
    ("true", true, any),
    ("false", true, any),
    ("basename", true, any),
    ("dirname", true, any),
    ("realpath", true, any),
    ("readlink", true, any),
    ("stat", true, any),
    ("du", true, any),
    ("df", true, any),
    ("cut", true, any),
    ("tr", true, any),
    ("nl", true, any),
    ("od", true, any),
    ("hexdump", true, any),
    ("md5sum", true, any),
    ("sha1sum", true, any),
    ("sha256sum", true, any),
    ("sha512sum", true, any),
    ("cksum", true, any),
    ("cmp", true, any),
    ("comm", true, any),
    ("diff", true, any),
    ("grep", true, any),
    ("egrep", true, any),
    ("fgrep", true, any),
    ("which", true, any),
    ("whoami", true, any),
    ("id", true, any),
    ("uname", true, any),
    ("type", true, any),
    // `test -v 'a[$(cmd)]'` evaluates the subscript, running cmd; a computed argument could
    // be `-v`.
    ("test", false, test_ok),
    ("[", false, test_ok),
    ("seq", true, any),
    ("printenv", true, any),
    ("column", true, any),
    ("strings", true, any),
    ("tac", true, any),
    ("rev", true, any),
    ("fold", true, any),
    ("paste", true, any),
    ("jq", true, any),
    ("nproc", true, any),
    ("sleep", true, any),
    ("cd", true, any),
    ("pushd", true, any),
    ("popd", true, any),
    // `file -C` compiles a magic file (writes).
    ("file", false, file_ok),
    ("hostname", false, hostname_ok),
    ("date", false, date_ok),
    // `rg --pre CMD` runs CMD on every file; `--hostname-bin CMD` runs CMD.
    ("rg", false, rg_ok),
    ("find", false, find_ok),
    // `sort -o FILE` writes; `--compress-program` runs a program.
    ("sort", false, sort_ok),
    // `uniq IN OUT` writes OUT; `xxd IN OUT` too.
    ("uniq", false, at_most_one_positional),
    ("xxd", false, at_most_one_positional),
    // `tree -o FILE` writes; `-R` writes `00Tree.html` in every directory.
    ("tree", false, tree_ok),
    ("env", false, no_args),
    ("git", false, git_ok),
];

/// Whether the command `words` (a simple command, wrappers already peeled) only reads.
pub fn is_read_only(words: &[Word]) -> bool {
    let Some((first, args)) = words.split_first() else {
        return true;
    };
    if first.quoted {
        return false;
    }
    let Some(name) = first.literal().and_then(command_name) else {
        return false;
    };
    if name == "printf" {
        return printf_ok(args);
    }
    let Some((_, dynamic_ok, check)) = COMMANDS.iter().find(|(n, _, _)| *n == name) else {
        return false;
    };
    let literal: Vec<&str> = args.iter().filter_map(Word::literal).collect();
    if literal.len() != args.len() && !dynamic_ok {
        return false;
    }
    check(&literal)
}

/// `printf -v NAME` assigns a variable (`printf -v PATH ...` changes what later commands
/// run, and a subscript in NAME is evaluated): the first argument must be a known format.
fn printf_ok(args: &[Word]) -> bool {
    match args.first() {
        None => true,
        Some(w) => w.literal().is_some_and(|f| !f.starts_with("-v")),
    }
}

/// Whether the command reads a configuration found from the working directory that can
/// name programs to run (git's repository config: `core.fsmonitor`, `core.pager`...).
/// Security: after a `cd` into a directory the sandbox could write (a nested repository),
/// such a command is not read-only: the workspace's own `.git/config` is protected, a
/// nested one is not.
pub fn runs_configured_programs(words: &[Word]) -> bool {
    words
        .first()
        .and_then(Word::literal)
        .and_then(command_name)
        .is_some_and(|n| n == "git")
}

/// `ls` → `ls`; `/usr/bin/ls` → `ls`; `./ls`, `bin/ls` → none.
pub fn command_name(word: &str) -> Option<&str> {
    if !word.contains('/') {
        return Some(word);
    }
    let (dir, name) = word.rsplit_once('/')?;
    SYSTEM_BIN_DIRS.contains(&dir).then_some(name)
}

fn any(_: &[&str]) -> bool {
    true
}

fn no_args(args: &[&str]) -> bool {
    args.is_empty()
}

fn test_ok(args: &[&str]) -> bool {
    !args.iter().any(|a| matches!(*a, "-v" | "-R"))
}

/// Printing only: `hostname`, `-s`, `-f`, `-i`...; an operand or `-F FILE` sets the name.
fn hostname_ok(args: &[&str]) -> bool {
    const PRINTS: &[&str] = &[
        "-a",
        "-A",
        "-d",
        "-f",
        "-i",
        "-I",
        "-s",
        "-y",
        "--alias",
        "--domain",
        "--fqdn",
        "--long",
        "--ip-address",
        "--all-ip-addresses",
        "--all-fqdns",
        "--short",
    ];
    args.iter().all(|a| PRINTS.contains(a))
}

fn positional<'a>(args: &'a [&'a str]) -> impl Iterator<Item = &'a &'a str> {
    args.iter().filter(|a| !a.starts_with('-') || **a == "-")
}

fn at_most_one_positional(args: &[&str]) -> bool {
    positional(args).count() <= 1
}

fn file_ok(args: &[&str]) -> bool {
    !args
        .iter()
        .any(|a| short_cluster_has(a, 'C') || long_option_is(a, &["compile"]))
}

fn date_ok(args: &[&str]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if short_cluster_has(a, 's') || long_option_is(a, &["set"]) {
            return false;
        }
        if matches!(a, "-d" | "-r" | "-f") {
            i += 2;
            continue;
        }
        // A bare positional (not `+FORMAT`) sets the clock.
        if !a.starts_with('-') && !a.starts_with('+') {
            return false;
        }
        i += 1;
    }
    true
}

fn rg_ok(args: &[&str]) -> bool {
    !args
        .iter()
        .any(|a| long_option_is(a, &["pre", "hostname-bin"]))
}

fn find_ok(args: &[&str]) -> bool {
    const WRITES_OR_RUNS: &[&str] = &[
        "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
    ];
    !args.iter().any(|a| WRITES_OR_RUNS.contains(a))
}

fn sort_ok(args: &[&str]) -> bool {
    !args
        .iter()
        .any(|a| short_cluster_has(a, 'o') || long_option_is(a, &["output", "compress-program"]))
}

fn tree_ok(args: &[&str]) -> bool {
    !args.iter().any(|a| {
        short_cluster_has(a, 'o') || short_cluster_has(a, 'R') || long_option_is(a, &["output"])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::shell::parse;

    fn ro(cmd: &str) -> bool {
        let script = parse(cmd).unwrap();
        assert_eq!(script.commands.len(), 1, "{cmd}");
        is_read_only(&script.commands[0].words)
    }

    #[test]
    fn read_only_commands() {
        for cmd in [
            "ls -la",
            "cat README.md",
            "head -n 5 a",
            "grep -rn foo src",
            "rg foo",
            "find . -name '*.rs'",
            "git status",
            "git log --oneline -5",
            "git diff HEAD~1",
            "git branch",
            "git branch -a -v",
            "git branch --list 'feat*'",
            "git --no-pager log",
            "git --namespace=x log",
            "git tag -l 'v1*'",
            "git tag",
            "git config --get user.name",
            "printf '%s\\n' \"$HOME\"",
            "test -f x",
            "sort --check a",
            "/usr/bin/ls",
            "echo $HOME",
            "cat *.txt",
            "sort a",
            "date +%Y",
            "wc -l",
            "pwd",
        ] {
            assert!(ro(cmd), "{cmd}");
        }
    }

    #[test]
    fn not_read_only() {
        for cmd in [
            "rm x",
            "find . -delete",
            "find . -exec rm {} ;",
            "git branch -D main",
            "git branch newbranch",
            "git push",
            "git -c core.pager=sh log",
            "git diff --output=x",
            "sort -o out a",
            "sort -ro out a",
            "rg --pre sh foo",
            "rg foo *",
            "sort $X",
            "./ls",
            "'ls'",
            "\\ls",
            "$LS",
            "uniq a b",
            "date -s now",
            "date 01011200",
            "env",
            "curl x",
            "tree -o out",
            "git",
            "git stash",
            "git config user.name x",
        ] {
            let expect_ro = cmd == "env";
            assert_eq!(ro(cmd), expect_ro, "{cmd}");
        }
    }

    /// Issue 9: GNU getopt and git accept unambiguous prefixes of long options.
    #[test]
    fn forbidden_long_options_by_any_abbreviation() {
        for cmd in [
            "sort --co=sh a",
            "sort --compress=sh a",
            "sort --outp=F a",
            "sort --ou F a",
            "sort --o=F a",
            "git grep --open=vim x",
            "git grep --open-files=vim x",
            "git grep -iOvim x",
            "git diff --outp=x",
            "git log --out=x",
            "git diff --ext",
            "git show --ext-d",
            "rg --pr=sh x",
            "rg --hostname=sh x",
            "file --comp x",
            "date --se=now",
            "date --s now",
            "tree -R",
            "tree -aR",
            "git config --get x --ad y z",
            "git config --list --ed",
            "git config --get x --unset-a y",
        ] {
            assert!(!ro(cmd), "{cmd}");
        }
    }

    /// Issue 9: global options that point git at another repository or configuration.
    #[test]
    fn git_globals_that_change_repository_or_config() {
        for cmd in [
            "git -C sub status",
            "git --git-dir=evil/.git status",
            "git --git-dir evil/.git status",
            "git --work-tree=x status",
            "git -c core.pager=sh log",
            "git -c core.fsmonitor=./x status",
            "git --config-env=core.pager=X log",
            "git --exec-path=./bin status",
            "git --bare log",
            "git -p log",
            "git --paginate log",
            "git --no-pager -C sub status",
        ] {
            assert!(!ro(cmd), "{cmd}");
        }
    }

    /// `printf -v` assigns (and evaluates a subscript); `test -v` evaluates a subscript.
    #[test]
    fn builtins_that_assign_or_evaluate() {
        for cmd in [
            "printf -v PATH /tmp/x",
            "printf -vPATH x",
            "printf $F x",
            "test -v 'a[$(touch p)]'",
            "[ -v x ]",
            "test -R x",
            "test -f \"$X\"",
            "git tag v1",
            "git tag -a v1 -m x",
            "git tag -d v1",
            "git tag -l -d v1",
            "git branch --contains x",
            "hostname -F f",
            "hostname --file=f",
            "hostname newname",
        ] {
            assert!(!ro(cmd), "{cmd}");
        }
    }
}
