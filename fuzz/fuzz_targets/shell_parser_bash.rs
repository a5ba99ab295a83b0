//! The permission parser against bash itself, the differential test's oracle
//! (`cordon_tests::differential`) on fuzzed input: for a command the parser says it
//! understands and that passes the differential test's safety filter (`harmless`), the
//! real bash runs it inside the sandbox (`cordon sandbox`, never on the host unconfined)
//! with a logging shim in front of every program on PATH, and every program it started must
//! be among the parts the parser reported. One sandbox serves the whole run (a driver fed
//! through a named pipe), so each input costs one bash start, and a finding is reported
//! against the input that caused it.
//!
//! Needs the built `cordon` binary: `$CORDON_BIN`, else `target/debug/cordon` of the
//! repository. The sandbox workspace is a directory under the fuzz binary's own directory
//! (`fuzz/target/.../test-workspaces/`, visible at the same path inside the sandbox).
//! `$CORDON_FUZZ_TIMEOUT` (seconds, default 2) bounds one command. It prints how many
//! inputs bash ran (a power of two, then every 10,000).
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use cordon_tests::Workspace;
use cordon_tests::differential::{BashOracle, Reported, Tally, compare, harmless, reported};
use libfuzzer_sys::fuzz_target;

/// The driver and its workspace, started on the first input that needs them (statics are
/// never dropped: the sandbox ends with the fuzzer, the workspace directory stays).
struct Oracle {
    bash: BashOracle,
    _ws: Workspace,
}

fn oracle() -> &'static Mutex<Oracle> {
    static ORACLE: OnceLock<Mutex<Oracle>> = OnceLock::new();
    ORACLE.get_or_init(|| {
        let cordon = std::env::var_os("CORDON_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/cordon")
            });
        assert!(
            cordon.is_file(),
            "{} is missing: build it (`cargo build --bin cordon`) or set CORDON_BIN",
            cordon.display()
        );
        let timeout = std::env::var("CORDON_FUZZ_TIMEOUT")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(2);
        let ws = Workspace::new();
        let bash = BashOracle::start(&cordon, ws.path(), timeout);
        Mutex::new(Oracle { bash, _ws: ws })
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(cmd) = std::str::from_utf8(data) else {
        return;
    };
    // Only what a rule could allow (understood), and only what is safe to run (the
    // differential test's filter: no writes, no wrappers, nothing that touches the
    // driver's files).
    let Reported::Names { names, computed } = reported(cmd) else {
        return;
    };
    if cmd.contains('\0') || !harmless(cmd) {
        return;
    }
    let outcome = match oracle().lock() {
        Ok(mut o) => o.bash.run(cmd),
        Err(poisoned) => poisoned.into_inner().bash.run(cmd),
    };
    // How many inputs bash really ran (the rest were not understood or not safe to run).
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed) + 1;
    if run.is_power_of_two() || run.is_multiple_of(10_000) {
        eprintln!("shell_parser_bash: {run} inputs run under bash");
    }
    let mut tally = Tally::default();
    compare(cmd, &names, computed, &outcome, &mut tally);
    if !tally.misses.is_empty() {
        panic!("{}", tally.misses.join("\n"));
    }
});
