//! Which `git` commands only read.
//!
//! Security notes:
//! - git runs programs named in its configuration (`core.fsmonitor`, `core.pager`, diff and
//!   textconv drivers, `core.sshCommand`...). The workspace's own `.git/config` is protected
//!   from the sandbox, but a global option that points git at another repository or
//!   configuration (`-C DIR`, `--git-dir`, `--work-tree`, `--bare`, `-c k=v`,
//!   `--config-env`, `--exec-path`) lets a command run whatever a file the agent wrote
//!   names, so any of them makes the command not read-only. Only global options known to
//!   change neither are accepted; `--namespace` is one: it prefixes the refs a remote
//!   transport sees and changes neither the repository, its configuration, nor what runs.
//!   `-p`/`--paginate` starts the pager, so it is not accepted either.
//! - git's own option parser accepts unambiguous abbreviations of long options, so the
//!   options that write files or run programs are matched by every prefix.

use super::long_option_is;
use super::short_cluster_has;

/// Global options that change neither the repository, its configuration, nor what runs.
const SAFE_GLOBALS: &[&str] = &[
    "--no-pager",
    "-P",
    "--no-optional-locks",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-replace-objects",
];

/// Long options of read subcommands that write a file or run a program.
const RISKY_LONG: &[&str] = &["output", "ext-diff", "open-files-in-pager"];

pub(super) fn git_ok(args: &[&str]) -> bool {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match *a {
            a if SAFE_GLOBALS.contains(&a) || a.starts_with("--namespace=") => i += 1,
            "--namespace" => i += 2,
            a if a.starts_with('-') => return false,
            _ => break,
        }
    }
    let Some(sub) = args.get(i) else {
        return false;
    };
    let rest = &args[i + 1..];
    // `-O` is `git grep --open-files-in-pager`, also inside a cluster (`-iO`).
    let risky = |a: &&str| long_option_is(a, RISKY_LONG) || short_cluster_has(a, 'O');
    if rest.iter().any(risky) {
        return false;
    }
    match *sub {
        "status" | "log" | "diff" | "show" | "blame" | "shortlog" | "describe" | "ls-files"
        | "ls-tree" | "cat-file" | "rev-parse" | "rev-list" | "grep" | "whatchanged"
        | "show-ref" | "merge-base" | "name-rev" | "count-objects" | "check-ignore"
        | "show-branch" => true,
        "branch" => listing_ok(rest, BRANCH_LISTING, &["-l", "--list"], false),
        "tag" => listing_ok(rest, TAG_LISTING, &["-l", "--list", "-n"], true),
        "remote" => rest.iter().all(|a| matches!(*a, "-v" | "--verbose")),
        "config" => config_ok(rest),
        "stash" => matches!(rest.first(), Some(&"list" | &"show")),
        "reflog" => matches!(rest.first(), None | Some(&"show")),
        "worktree" => matches!(rest.first(), Some(&"list")),
        _ => false,
    }
}

/// `git config` with a reading action and no writing one.
fn config_ok(rest: &[&str]) -> bool {
    const READS: &[&str] = &["--get", "--get-all", "--get-regexp", "--list", "-l"];
    const WRITES: &[&str] = &[
        "add",
        "unset",
        "unset-all",
        "replace-all",
        "rename-section",
        "remove-section",
        "edit",
    ];
    rest.iter().any(|a| READS.contains(a))
        && !rest
            .iter()
            .any(|a| long_option_is(a, WRITES) || short_cluster_has(a, 'e'))
}

const BRANCH_LISTING: &[&str] = &[
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

const TAG_LISTING: &[&str] = &[
    "-l",
    "--list",
    "-i",
    "--ignore-case",
    "--color",
    "--no-color",
    "--no-column",
    "--merged",
    "--no-merged",
    "--contains",
    "--no-contains",
    "--points-at",
];

/// Listing only (`git branch -a`, `git tag -l 'v1*'`): every option is a listing one
/// (exactly: an abbreviation is not recognised, so it asks), and a positional (which would
/// create a branch or tag) only with an explicit list flag. `numbered`: `-n<N>` lists too.
fn listing_ok(args: &[&str], listing: &[&str], list_flags: &[&str], numbered: bool) -> bool {
    let is_n = |a: &str| {
        numbered
            && a.strip_prefix("-n")
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    };
    let listing_mode = args.iter().any(|a| list_flags.contains(a) || is_n(a));
    args.iter().all(|a| {
        listing.contains(a)
            || is_n(a)
            || a.starts_with("--sort=")
            || a.starts_with("--format=")
            || (listing_mode && !a.starts_with('-'))
    })
}
