//! Shared fixtures for the end-to-end tests.

pub mod scripted_model;
