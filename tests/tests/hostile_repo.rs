//! A hostile repository and a hostile model, end to end: `cordon run` with the scripted
//! model, then the host checked the way a user would find it (owners, modes, files
//! outside the workspace, what the host's tools would run). One submodule per class of
//! attack.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hostile_repo/privilege.rs"]
mod privilege;
