//! Cordon's orchestrator.

pub mod doctor;
pub mod model;
pub mod paths;
pub mod sandbox;
pub mod tools;
