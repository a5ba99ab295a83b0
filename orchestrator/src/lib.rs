//! Cordon's orchestrator.
