//! Hostile repositories, end to end: what a session writes is data for the host, never
//! code. Each submodule drives `cordon run` with the scripted model and then checks the
//! host the way a user would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hostile_repo/git.rs"]
mod git;
