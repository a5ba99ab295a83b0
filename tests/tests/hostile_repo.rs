//! Hostile repositories end to end: each submodule drives `cordon run` with the scripted
//! model on the local sandbox and then checks the host; each submodule is one topic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hostile_repo/parser.rs"]
mod parser;
