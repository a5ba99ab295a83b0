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
//! quotes and here-documents), every command of the permission rule table
//! (`cordon::permissions::rule_table`: its rows, the bypass attempts generated from its
//! prefixes, the disguises deny rules must catch, the read-only bypasses) and a corpus of lines from this host's real shell scripts
//! (`/usr/bin`, `/etc`, Debian maintainer scripts). Corpus lines are run only when harmless
//! even without a sandbox: no program named by path, no file written, no wrapper or
//! directory change.
// Test code: a failed setup step should panic with its message, which is the report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod differential;

use cordon::permissions::rule_table;
use cordon_tests::differential::{BashOracle, Reported, Tally, compare, harmless, reported};
use cordon_tests::{Workspace, cordon_bin};
use differential::{corpus, generated};

/// How many corpus lines to run.
const CORPUS_LINES: usize = 1200;

/// Seconds a command may run before its processes are killed.
const COMMAND_TIMEOUT: u32 = 5;

#[test]
fn every_program_bash_starts_is_reported() {
    let generated = generated();
    let table = rule_table::commands();
    let kept: Vec<String> = corpus().into_iter().filter(|c| harmless(c)).collect();
    // An even sample, so the run stays short (every line takes a few milliseconds).
    let step = kept.len().div_ceil(CORPUS_LINES).max(1);
    let corpus: Vec<String> = kept.into_iter().step_by(step).collect();
    let mut to_run = Vec::new();
    let mut not_understood = 0;
    for cmd in generated.iter().chain(&table).chain(&corpus) {
        match reported(cmd) {
            Reported::NotUnderstood => not_understood += 1,
            Reported::Names { names, computed } => to_run.push((cmd.clone(), names, computed)),
        }
    }
    let commands: Vec<String> = to_run.iter().map(|(c, _, _)| c.clone()).collect();
    write_seeds(&commands);
    let ws = Workspace::new();
    let outcomes = BashOracle::start(&cordon_bin(), ws.path(), COMMAND_TIMEOUT).run_all(&commands);
    assert_eq!(
        outcomes.len(),
        to_run.len(),
        "the driver answered for every command"
    );

    let mut tally = Tally::default();
    for ((cmd, names, computed), outcome) in to_run.iter().zip(&outcomes) {
        compare(cmd, names, *computed, outcome, &mut tally);
    }
    let Tally {
        started,
        with_computed,
        misses,
    } = tally;
    let timed_out = outcomes.iter().filter(|o| o.timed_out).count();
    eprintln!(
        "parser differential: {} commands compared ({} generated, {} from the rule table, \
         {} corpus lines kept), \
         {} not understood (not run), {} programs started, {} covered only by a part not \
         understood (computed name or unfollowed wrapper), {} timed out, {} misses",
        to_run.len(),
        generated.len(),
        table.len(),
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

/// With `CORDON_DIFFERENTIAL_SEEDS=DIR`, writes every compared command to a file of `DIR`:
/// a seed corpus for the fuzz target `shell_parser_bash` (`fuzz/corpus/shell_parser_bash`).
fn write_seeds(commands: &[String]) {
    let Some(dir) = std::env::var_os("CORDON_DIFFERENTIAL_SEEDS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, cmd) in commands.iter().enumerate() {
        std::fs::write(dir.join(format!("differential-{i:05}")), cmd).unwrap();
    }
}
