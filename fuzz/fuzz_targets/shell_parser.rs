//! Feeds arbitrary text to the permission parser (`bash_rules::split`, which runs the shell
//! parser and looks through wrappers), as a hostile model's Bash command would be. The
//! oracle is `cordon::permissions::parser_oracle::check` (no panic, deterministic, a
//! complete script followed by a command reports it, `bash -c` of a script gives the same
//! commands); it also runs as a unit test over generated token soups.
#![no_main]

use cordon::permissions::parser_oracle::check;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(src) = std::str::from_utf8(data)
        && let Err(failure) = check(src)
    {
        panic!("{failure}");
    }
});
