//! Hostile repositories end to end: what a repository (or the sandbox working in it) plants
//! must not make the host act outside it, nor widen what a session may do. Driven through
//! `cordon run` with the scripted model; one submodule per topic, under `hostile_repo/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hostile_repo/interactive.rs"]
mod interactive;
#[path = "hostile_repo/trust.rs"]
mod trust;
