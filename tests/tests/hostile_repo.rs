//! Hostile repositories end to end: what a repository (or the sandbox working in it) plants
//! must not make the host act outside it. One submodule per topic, under `hostile_repo/`.

#[path = "hostile_repo/interactive.rs"]
mod interactive;
