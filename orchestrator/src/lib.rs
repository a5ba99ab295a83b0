//! Cordon's orchestrator.

pub mod sandbox;
