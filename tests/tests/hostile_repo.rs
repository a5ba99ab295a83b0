//! The hostile-repository suite: `cordon run` with the scripted model on both backends,
//! then the host checked the way a user would (owners, modes, ACLs, what git and a
//! rewind do afterwards). One submodule per topic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod rewind;
