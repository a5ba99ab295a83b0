//! The permission parser against bash itself.
//!
//! Every command here is parsed by `cordon::permissions::bash_rules::split` and, when the
//! parser says it understands it, run by the real bash inside the sandbox (`cordon
//! sandbox`) with a logging shim in front of every program on PATH: a directory of
//! symlinks, one per program name, to a script that appends its name to a log and exits 0
//! (the wrappers the parser claims to follow, `timeout`, `env`, `xargs`, `find`, `bash`...,
//! then run the real program, so the command they wrap reaches a shim too). The test
//! asserts that every program bash started is among the commands the parser reported.
//!
//! Commands: generated ones (the bypasses with variants, every followed wrapper
//! around every kind of command, and random compositions of operators, substitutions,
//! quotes and here-documents) and a corpus of lines from this host's real shell scripts
//! (`/usr/bin`, `/etc`, Debian maintainer scripts). Corpus lines are run only when harmless
//! even without a sandbox: no program named by path, no file written, no wrapper or
//! directory change.
// Test code: a failed setup step should panic with its message, which is the report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod differential;

use std::collections::BTreeSet;

use cordon::permissions::bash_rules::{Part, split};
use cordon::permissions::read_only::command_name;
use differential::{Outcome, corpus, generated, run_in_sandbox};

/// How many corpus lines to run.
const CORPUS_LINES: usize = 1200;

/// What the parser says a command runs.
enum Reported {
    /// The parser does not understand it: never allowed by a rule, not run here.
    NotUnderstood,
    /// Program names of every layer of every part, and whether some part's program is not
    /// known (a computed name, or a wrapper the parser does not follow: such a part is
    /// never allowed by a rule, so anything it starts counts as reported).
    Names {
        names: BTreeSet<String>,
        computed: bool,
    },
}

fn reported(cmd: &str) -> Reported {
    let Ok(parts) = split(cmd) else {
        return Reported::NotUnderstood;
    };
    let mut names = BTreeSet::new();
    let mut computed = false;
    for part in &parts {
        computed |= part.unresolved.is_some();
        for layer in layers(part) {
            let Some(w) = layer.first() else { continue };
            match w.literal().and_then(|v| v.rsplit('/').next()) {
                Some(name) => {
                    names.insert(name.to_string());
                }
                None => computed = true,
            }
        }
    }
    Reported::Names { names, computed }
}

fn layers(part: &Part) -> Vec<Vec<cordon::permissions::shell::Word>> {
    let mut out = part.wrappers.clone();
    out.push(part.words.clone());
    out
}

/// A corpus line is run only when it is harmless even outside a sandbox.
fn harmless(cmd: &str) -> bool {
    const AVOID: &[&str] = &[
        "cd", "pushd", "popd", "exec", "command", "builtin", "eval", "source", ".", "trap",
        "alias", "env", "timeout", "nice", "nohup", "stdbuf", "setsid", "flock", "ionice",
        "taskset", "chrt", "xargs", "find", "bash", "sh", "dash", "sudo", "kill", "ulimit",
        "enable", "hash", "exit", "logout",
    ];
    let Ok(parts) = split(cmd) else {
        return false;
    };
    parts.iter().all(|p| {
        p.unresolved.is_none()
            && p.redirects
                .iter()
                .all(|r| !r.kind.writes() || r.target.literal() == Some("/dev/null"))
            && p.assignments.iter().all(|a| a.name != "PATH")
            && layers(p).iter().all(|l| {
                l.first()
                    .and_then(|w| w.literal())
                    .is_none_or(|n| command_name(n) == Some(n) && !AVOID.contains(&n))
            })
    })
}

#[test]
fn every_program_bash_starts_is_reported() {
    let generated = generated();
    let kept: Vec<String> = corpus().into_iter().filter(|c| harmless(c)).collect();
    // An even sample, so the run stays short (every line takes a few milliseconds).
    let step = kept.len().div_ceil(CORPUS_LINES).max(1);
    let corpus: Vec<String> = kept.into_iter().step_by(step).collect();
    let mut to_run = Vec::new();
    let mut not_understood = 0;
    for cmd in generated.iter().chain(&corpus) {
        match reported(cmd) {
            Reported::NotUnderstood => not_understood += 1,
            Reported::Names { names, computed } => to_run.push((cmd.clone(), names, computed)),
        }
    }
    let commands: Vec<String> = to_run.iter().map(|(c, _, _)| c.clone()).collect();
    let outcomes = run_in_sandbox(&commands);
    assert_eq!(
        outcomes.len(),
        to_run.len(),
        "the driver answered for every command"
    );

    let mut misses = Vec::new();
    let mut with_computed = 0;
    let mut started = 0;
    for ((cmd, names, computed), Outcome { programs, .. }) in to_run.iter().zip(&outcomes) {
        started += programs.len();
        for program in programs {
            if names.contains(program) {
                continue;
            }
            if *computed {
                with_computed += 1;
                continue;
            }
            misses.push(format!(
                "{cmd:?}: bash ran `{program}`, parser reported {names:?}"
            ));
        }
    }
    let timed_out = outcomes.iter().filter(|o| o.timed_out).count();
    eprintln!(
        "parser differential: {} commands compared ({} generated, {} corpus lines kept), \
         {} not understood (not run), {} programs started, {} covered only by a part not \
         understood (computed name or unfollowed wrapper), {} timed out, {} misses",
        to_run.len(),
        generated.len(),
        corpus.len(),
        not_understood,
        started,
        with_computed,
        timed_out,
        misses.len()
    );
    assert!(
        to_run.len() >= 500,
        "too few commands compared: {}",
        to_run.len()
    );
    assert!(started >= 500, "too few programs started: {started}");
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}
