//! `GET/PUT /v1/sessions/{id}/files/{path}`: a workspace file, read and written on the host
//! beneath the workspace and never through a link (openat2 `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS` to read, held directory descriptors and `O_NOFOLLOW` to write), so
//! nothing the sandbox planted can redirect the server. The session's Read and Edit deny
//! rules hold here as they hold for the model's tools.

use std::path::Path;

use axum::http::StatusCode;
use serde_json::json;

use crate::permissions::{Decision, Engine};
use sandbox_agent::beneath::Beneath;
use sandbox_agent::beneath::{ReadError as WorkspaceFsError, WorkspaceReader as Workspace};

use super::errors::ApiError;
use super::workspace::plain_relative;

/// The largest file served or accepted.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Refuses a path the session's rules deny for `tool` (Read or Edit).
fn check_rules(engine: &Engine, tool: &str, abs: &Path) -> Result<(), ApiError> {
    let input = json!({"file_path": abs.display().to_string()});
    let verdict = engine.decide(tool, &input, tool == "Read");
    if verdict.decision == Decision::Deny {
        return Err(ApiError::forbidden(format!(
            "{tool} of {} is denied: {}",
            abs.display(),
            verdict.reason
        )));
    }
    Ok(())
}

/// The bytes of `rel` in `workspace`.
pub fn read(engine: &Engine, workspace: &Path, rel: &str) -> Result<Vec<u8>, ApiError> {
    let rel = plain_relative(rel)?;
    check_rules(engine, "Read", &workspace.join(rel))?;
    let ws = Workspace::open(workspace).map_err(|e| ApiError::internal(e.to_string()))?;
    match ws.read_bytes(rel, MAX_FILE_BYTES) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(ApiError::not_found("file")),
        Err(WorkspaceFsError::TooLarge { .. }) => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the file is larger than {MAX_FILE_BYTES} bytes"),
        )),
        Err(e @ (WorkspaceFsError::Link { .. } | WorkspaceFsError::NotRegular { .. })) => {
            Err(ApiError::bad_request(e.to_string()))
        }
        Err(e) => Err(ApiError::internal(e.to_string())),
    }
}

/// Writes `content` at `rel` in `workspace` (parents made as needed).
pub fn write(engine: &Engine, workspace: &Path, rel: &str, content: &[u8]) -> Result<(), ApiError> {
    let rel = plain_relative(rel)?;
    check_rules(engine, "Edit", &workspace.join(rel))?;
    let tree = Beneath::open(workspace).map_err(|e| ApiError::internal(e.to_string()))?;
    refuse_links_on_the_way(&tree, rel)?;
    tree.write_file(rel, content, false, None)
        .map_err(|e| match e.raw_os_error() {
            // A link on the way, or a directory where the file would go.
            Some(libc::ELOOP | libc::ENOTDIR | libc::EISDIR) => {
                ApiError::bad_request(format!("cannot write {}: {e}", rel.display()))
            }
            _ => ApiError::internal(format!("writing {}: {e}", rel.display())),
        })
}

/// Security: a link (or a file) where a parent directory of `rel` should be is refused,
/// not replaced: opening the existing parents never follows one. Only missing parents
/// may be made afterwards.
pub fn refuse_links_on_the_way(tree: &Beneath, rel: &Path) -> Result<(), ApiError> {
    match tree.parent(rel) {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        Err(e) => Err(ApiError::bad_request(format!(
            "cannot write {}: {e}",
            rel.display()
        ))),
    }
}
