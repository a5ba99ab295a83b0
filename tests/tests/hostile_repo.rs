//! The hostile-repository suite: `cordon run` with the scripted model on both backends,
//! then the host checked the way a user would (owners, modes, ACLs, what git and a
//! rewind do afterwards). One submodule per topic, in `hostile_repo/` (a crate root's
//! `mod x;` would look beside this file, hence the paths).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hostile_repo/rewind.rs"]
mod rewind;
