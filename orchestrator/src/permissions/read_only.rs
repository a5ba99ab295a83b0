//! Read-only commands: ones that never need permission (they only read or print), checked
//! with their arguments after the shell parser split the command.
//!
//! Security notes:
//! - A command counts only when its name is written plainly (`ls`) or is an absolute path in
//!   a system directory (`/usr/bin/ls`): `./ls` could be a script from the repository.
//! - Arguments whose value the parser cannot know (`$X`, `$(...)`, unquoted globs) could
//!   expand into options (a file named `--pre=sh` matched by `*`), so only commands with no
//!   dangerous option accept them (`dynamic_ok`).
//! - This decides only whether to prompt; the sandbox confines whatever runs.

use super::shell::Word;

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
    ("printf", true, any),
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
    ("test", true, any),
    ("[", true, any),
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
    ("hostname", false, only_flags),
    ("date", false, date_ok),
    // `rg --pre CMD` runs CMD on every file.
    ("rg", false, rg_ok),
    ("find", false, find_ok),
    // `sort -o FILE` writes; `--compress-program` runs a program.
    ("sort", false, sort_ok),
    // `uniq IN OUT` writes OUT; `xxd IN OUT` too.
    ("uniq", false, at_most_one_positional),
    ("xxd", false, at_most_one_positional),
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
    let Some((_, dynamic_ok, check)) = COMMANDS.iter().find(|(n, _, _)| *n == name) else {
        return false;
    };
    let literal: Vec<&str> = args.iter().filter_map(Word::literal).collect();
    if literal.len() != args.len() && !dynamic_ok {
        return false;
    }
    check(&literal)
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

fn only_flags(args: &[&str]) -> bool {
    args.iter().all(|a| a.starts_with('-'))
}

fn positional<'a>(args: &'a [&'a str]) -> impl Iterator<Item = &'a &'a str> {
    args.iter().filter(|a| !a.starts_with('-') || **a == "-")
}

fn at_most_one_positional(args: &[&str]) -> bool {
    positional(args).count() <= 1
}

/// A short-option cluster (`-ro`) containing `letter`.
fn short_cluster_has(arg: &str, letter: char) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(letter)
}

fn file_ok(args: &[&str]) -> bool {
    !args
        .iter()
        .any(|a| short_cluster_has(a, 'C') || a.starts_with("--compile"))
}

fn date_ok(args: &[&str]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if short_cluster_has(a, 's') || a.starts_with("--set") {
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
    !args.iter().any(|a| a.starts_with("--pre"))
}

fn find_ok(args: &[&str]) -> bool {
    const WRITES_OR_RUNS: &[&str] = &[
        "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
    ];
    !args.iter().any(|a| WRITES_OR_RUNS.contains(a))
}

fn sort_ok(args: &[&str]) -> bool {
    !args.iter().any(|a| {
        short_cluster_has(a, 'o') || a.starts_with("--output") || a.starts_with("--compress")
    })
}

fn tree_ok(args: &[&str]) -> bool {
    !args.iter().any(|a| short_cluster_has(a, 'o'))
}

fn git_ok(args: &[&str]) -> bool {
    let mut i = 0;
    // Global options before the subcommand.
    while let Some(a) = args.get(i) {
        match *a {
            "-C" => i += 2,
            "--no-pager" | "-P" | "--no-optional-locks" | "--literal-pathspecs" => i += 1,
            a if a.starts_with("--git-dir=") || a.starts_with("--work-tree=") => i += 1,
            // `-c core.pager=...`, `--exec-path`, `--config-env`: run configured programs.
            a if a.starts_with('-') => return false,
            _ => break,
        }
    }
    let Some(sub) = args.get(i) else {
        return false;
    };
    let rest = &args[i + 1..];
    // Options that write files or run configured external programs.
    let risky = |a: &&str| {
        a.starts_with("--output")
            || a.starts_with("--ext-diff")
            || a.starts_with("-O")
            || a.starts_with("--open-files-in-pager")
    };
    if rest.iter().any(risky) {
        return false;
    }
    match *sub {
        "status" | "log" | "diff" | "show" | "blame" | "shortlog" | "describe" | "ls-files"
        | "ls-tree" | "cat-file" | "rev-parse" | "rev-list" | "grep" | "whatchanged"
        | "show-ref" | "merge-base" | "name-rev" | "count-objects" | "check-ignore"
        | "show-branch" => true,
        "branch" => git_branch_ok(rest),
        "tag" => rest.is_empty() || matches!(rest[0], "-l" | "--list" | "-n"),
        "remote" => rest.iter().all(|a| matches!(*a, "-v" | "--verbose")),
        "config" => {
            const READS: &[&str] = &["--get", "--get-all", "--get-regexp", "--list", "-l"];
            rest.iter().any(|a| READS.contains(a))
                && !rest.iter().any(|a| {
                    a.starts_with("--add")
                        || a.starts_with("--unset")
                        || a.starts_with("--replace")
                        || a.starts_with("--rename")
                        || a.starts_with("--remove")
                        || matches!(*a, "-e" | "--edit")
                })
        }
        "stash" => matches!(rest.first(), Some(&"list" | &"show")),
        "reflog" => matches!(rest.first(), None | Some(&"show")),
        "worktree" => matches!(rest.first(), Some(&"list")),
        _ => false,
    }
}

/// Listing only: `git branch`, `-a`, `-r`, `-v`, `--list PATTERN`, `--show-current`...;
/// a positional without `--list` creates a branch, `-d`/`-D`/`-m` delete or rename.
fn git_branch_ok(args: &[&str]) -> bool {
    const LISTING: &[&str] = &[
        "-a",
        "--all",
        "-r",
        "--remotes",
        "-v",
        "-vv",
        "--verbose",
        "--show-current",
        "--color",
        "--no-color",
        "--no-column",
        "-l",
        "--list",
        "--merged",
        "--no-merged",
        "--contains",
        "--no-contains",
    ];
    let listing = args.iter().any(|a| matches!(*a, "-l" | "--list"));
    args.iter().all(|a| {
        LISTING.contains(a)
            || a.starts_with("--sort=")
            || a.starts_with("--format=")
            || (listing && !a.starts_with('-'))
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
            "git -C sub status",
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
}
