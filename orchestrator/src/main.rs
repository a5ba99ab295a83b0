//! `cordon`: the command line.
fn main() {}
