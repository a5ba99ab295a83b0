//! Cordon's orchestrator.

pub mod model;
pub mod sandbox;
pub mod tools;
