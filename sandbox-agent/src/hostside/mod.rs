//! Host-side passes over a workspace, made outside any sandbox while no sandboxed process
//! runs (the launcher before the sandbox starts and after it ended; the orchestrator at a
//! Docker session's destroy). What a session wrote is untrusted data, so every pass walks
//! through directory descriptors and never follows a link.
//!
//! # Layout
//!
//! - [`walk`]: the walk itself (openat, fstatat with `AT_SYMLINK_NOFOLLOW`).
//! - [`privbits`]: the teardown sweep that strips setuid and setgid bits.
//! - [`hardlinks`]: the start-up scan for files hard-linked to names outside.
//! - [`extra_dir`]: which directories may be mounted writable beside the workspace.

pub mod extra_dir;
pub mod hardlinks;
pub mod privbits;
pub mod walk;
