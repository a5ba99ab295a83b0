//! Hostile repositories end to end: a workspace whose own files try to widen what a
//! session may do, driven through `cordon run` on the local sandbox and the scripted model;
//! each submodule is one topic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hostile_repo/trust.rs"]
mod trust;
