//! Feeds arbitrary bytes as the body of every JSON route of `cordon serve` (the real
//! router, in-process, with a valid key): no panic and no 5xx, whatever the client sends.
//! The oracle is `cordon::server::body_oracle`, also a unit test.
#![no_main]

use std::sync::OnceLock;

use cordon::server::body_oracle::Oracle;
use libfuzzer_sys::fuzz_target;

static ORACLE: OnceLock<Oracle> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let oracle = ORACLE.get_or_init(|| Oracle::new().expect("the oracle's server"));
    if let Err(failure) = oracle.check(data) {
        panic!("{failure}");
    }
});
