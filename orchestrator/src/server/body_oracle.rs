//! The oracle of the request-body fuzz target (`fuzz/fuzz_targets/server_bodies.rs`), also
//! run as a unit test: any bytes sent as the body of any JSON route, with a valid key, get
//! an answer below 500 in the `{"error": ...}` shape or a success, never a panic.
//!
//! It serves the real router in-process over a throwaway data directory. The tenant's quota
//! allows no session, so a body that parses never starts a sandbox: session routes name a
//! session that does not exist, and creation stops at the quota.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request};
use serde_json::json;
use tower::ServiceExt;

use super::store::{SqliteStore, Store};
use super::{Limits, ServerState, auth, router};
use crate::model::{Credentials, ModelConfig};
use crate::sandbox::BackendKind;

/// The routes that take a body.
const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/sessions"),
    (
        "POST",
        "/v1/sessions/00000000-0000-4000-8000-000000000000/messages",
    ),
    (
        "POST",
        "/v1/sessions/00000000-0000-4000-8000-000000000000/exec",
    ),
    (
        "POST",
        "/v1/sessions/00000000-0000-4000-8000-000000000000/permissions/r1",
    ),
    (
        "PUT",
        "/v1/sessions/00000000-0000-4000-8000-000000000000/files/a.txt",
    ),
    (
        "PUT",
        "/v1/sessions/00000000-0000-4000-8000-000000000000/archive",
    ),
    ("GET", "/v1/sessions?state=idle&labels=a=b&limit=3"),
];

/// A router ready to take fuzzed bodies.
pub struct Oracle {
    runtime: tokio::runtime::Runtime,
    app: Router,
    key: String,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Oracle {
    pub fn new() -> Result<Oracle, String> {
        let data = tempfile::tempdir().map_err(|e| e.to_string())?;
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        let store = SqliteStore::open(data.path()).map_err(|e| e.to_string())?;
        store
            .create_tenant("fuzz", &json!({}), &json!({"max_sessions": 0}))
            .map_err(|e| e.to_string())?;
        let key = auth::new_key("fuzz");
        store.add_key(&key.row).map_err(|e| e.to_string())?;
        let model = ModelConfig::new("http://127.0.0.1:9", Credentials::ApiKey("fuzz".into()));
        let state = Arc::new(ServerState::new(
            Arc::new(store),
            data.path().to_path_buf(),
            root.path().to_path_buf(),
            model,
            BackendKind::Local,
        ));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Oracle {
            runtime,
            app: router(state, Limits::default()),
            key: key.key,
            _dirs: (data, root),
        })
    }

    /// Sends `body` to every route; an error names the route and what came back.
    pub fn check(&self, body: &[u8]) -> Result<(), String> {
        for (method, path) in ROUTES {
            let request = Request::builder()
                .method(Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?)
                .uri(*path)
                .header("authorization", format!("Bearer {}", self.key))
                .header("content-type", "application/json")
                .body(Body::from(body.to_vec()))
                .map_err(|e| e.to_string())?;
            let response = self
                .runtime
                .block_on(self.app.clone().oneshot(request))
                .map_err(|e| format!("{method} {path}: {e}"))?;
            if response.status().is_server_error() {
                return Err(format!(
                    "{method} {path} answered {} to {:?}",
                    response.status(),
                    String::from_utf8_lossy(body)
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_body_gets_a_server_error() {
        let oracle = Oracle::new().unwrap();
        let bodies: &[&[u8]] = &[
            b"",
            b"{",
            b"null",
            b"[]",
            b"\xff\xfe",
            br#"{"content": 5}"#,
            br#"{"content": "hi"}"#,
            br#"{"command": "true", "env": {"": "x"}}"#,
            br#"{"decision": "allow", "always": "yes"}"#,
            br#"{"decision": "allow"}"#,
            br#"{"workspace": "../x", "ttl_seconds": 18446744073709551615}"#,
            br#"{"workspace": "a\u0000b"}"#,
            br#"{"labels": {"a": 1}}"#,
            br#"{"settings": {"permissions": {"allow": 5}}}"#,
            br#"{}"#,
        ];
        for body in bodies {
            oracle.check(body).unwrap();
        }
    }
}
