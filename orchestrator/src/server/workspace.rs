//! Where a session's workspace is: beneath `ROOT/<tenant>/`, never outside it. A given
//! path is relative, made of plain names (no `..`, no `.`, no absolute part), must exist,
//! and its canonical form (every symlink resolved) must still lie beneath the tenant's
//! directory, so a link cannot lead out; the sandbox backends then apply the workspace
//! location policy again. Without a path, the session gets a new empty directory.

use std::path::{Component, Path, PathBuf};

use super::errors::ApiError;

/// The canonical workspace for a session `id` of `tenant`.
pub fn resolve(
    root: &Path,
    tenant: &str,
    requested: Option<&str>,
    id: &str,
) -> Result<PathBuf, ApiError> {
    let tenant_root = root.join(tenant);
    crate::paths::private_dir(&tenant_root).map_err(|e| {
        ApiError::internal(format!("creating the tenant's workspace directory: {e}"))
    })?;
    let tenant_root = tenant_root.canonicalize().map_err(|e| {
        ApiError::internal(format!("resolving the tenant's workspace directory: {e}"))
    })?;
    let path = match requested {
        None => {
            let dir = tenant_root.join(id);
            std::fs::create_dir(&dir).map_err(|e| {
                ApiError::internal(format!("creating the session's workspace: {e}"))
            })?;
            dir
        }
        Some(rel) => {
            let rel = plain_relative(rel)?;
            tenant_root.join(rel).canonicalize().map_err(|_| {
                ApiError::bad_request(format!(
                    "workspace {rel:?} does not exist under the workspace root"
                ))
            })?
        }
    };
    // Security: the canonical path has every link resolved; beneath the tenant's root (and
    // not the root itself) or refused.
    if path == tenant_root || !path.starts_with(&tenant_root) || !path.is_dir() {
        return Err(ApiError::bad_request(
            "workspace must be a directory beneath the workspace root",
        ));
    }
    Ok(path)
}

/// A relative path of plain names only.
pub fn plain_relative(rel: &str) -> Result<&Path, ApiError> {
    let path = Path::new(rel);
    let plain = !rel.is_empty()
        && !rel.contains('\0')
        && path.components().all(|c| matches!(c, Component::Normal(_)));
    if plain {
        Ok(path)
    } else {
        Err(ApiError::bad_request(format!(
            "path {rel:?} must be relative and made of plain names (no '..', no leading '/')"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_beneath_the_tenants_root() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("acme/repo")).unwrap();
        std::fs::create_dir_all(root.path().join("other/secret")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("acme/out")).unwrap();
        std::os::unix::fs::symlink(root.path().join("other"), root.path().join("acme/next"))
            .unwrap();
        let ok = resolve(root.path(), "acme", Some("repo"), "id1").unwrap();
        assert!(ok.ends_with("acme/repo"));
        for bad in [
            "../other/secret",
            "/etc",
            "out",
            "next/secret",
            "",
            "missing",
            "repo/../..",
        ] {
            assert!(
                resolve(root.path(), "acme", Some(bad), "id2").is_err(),
                "{bad}"
            );
        }
        let fresh = resolve(root.path(), "acme", None, "id3").unwrap();
        assert!(fresh.ends_with("acme/id3") && fresh.is_dir());
    }
}
