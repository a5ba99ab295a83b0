//! Cordon's orchestrator.

pub mod agent;
pub mod checkpoints;
pub mod control;
pub mod demo;
pub mod doctor;
pub mod hooks;
pub mod model;
pub mod output;
pub mod paths;
pub mod permissions;
pub mod policy_gate;
pub mod sandbox;
pub mod scripted;
pub mod session;
pub mod settings;
pub mod tools;
