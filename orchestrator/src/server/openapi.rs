//! The OpenAPI 3.1 document served at `/v1/openapi.json`: the routes, their bodies and
//! their answers, written by hand next to the API (a test checks that every routed path
//! appears here).

use serde_json::{Value, json};

fn error_responses() -> Value {
    json!({
        "400": {"$ref": "#/components/responses/Error"},
        "401": {"$ref": "#/components/responses/Error"},
        "404": {"$ref": "#/components/responses/Error"},
        "409": {"$ref": "#/components/responses/Error"},
        "429": {"$ref": "#/components/responses/Error"}
    })
}

fn op(summary: &str, body: Option<&str>, ok: &str) -> Value {
    let mut responses = error_responses();
    responses[ok] = json!({"description": "success"});
    let mut op = json!({"summary": summary, "responses": responses});
    if let Some(schema) = body {
        op["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}
        });
    }
    op
}

/// The paths the router serves under `/v1` (and the two health routes).
pub const PATHS: &[&str] = &[
    "/healthz",
    "/readyz",
    "/v1/openapi.json",
    "/v1/sessions",
    "/v1/sessions/{id}",
    "/v1/sessions/{id}/messages",
    "/v1/sessions/{id}/events",
    "/v1/sessions/{id}/permissions/{request_id}",
    "/v1/sessions/{id}/interrupt",
    "/v1/sessions/{id}/fork",
    "/v1/sessions/{id}/rewind",
    "/v1/sessions/{id}/exec",
    "/v1/sessions/{id}/files/{path}",
    "/v1/sessions/{id}/archive",
];

pub fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Cordon server API", "version": env!("CARGO_PKG_VERSION")},
        "security": [{"bearer": []}],
        "paths": {
            "/healthz": {"get": {"summary": "liveness", "security": [], "responses": {"200": {"description": "alive"}}}},
            "/readyz": {"get": {"summary": "readiness (the database answers)", "security": [], "responses": {"200": {"description": "ready"}, "503": {"description": "not ready"}}}},
            "/v1/openapi.json": {"get": op("this document", None, "200")},
            "/v1/sessions": {
                "post": op("create a session", Some("SessionConfig"), "201"),
                "get": {"summary": "list sessions (query: state, labels=k=v,k2=v2, cursor, limit)", "responses": error_responses()}
            },
            "/v1/sessions/{id}": {
                "get": op("a session", None, "200"),
                "delete": op("end a session", None, "200")
            },
            "/v1/sessions/{id}/messages": {"post": op("queue a user message", Some("Message"), "202")},
            "/v1/sessions/{id}/events": {"get": op("the session's events (SSE; Last-Event-ID or ?after=N resumes)", None, "200")},
            "/v1/sessions/{id}/permissions/{request_id}": {"post": op("answer a permission request", Some("PermissionAnswer"), "200")},
            "/v1/sessions/{id}/interrupt": {"post": op("interrupt the turn under way", None, "200")},
            "/v1/sessions/{id}/fork": {"post": op("a new session with a copy of this conversation", None, "201")},
            "/v1/sessions/{id}/rewind": {"post": op("list checkpoints ({}), or restore the workspace to before a user message ({\"to\": uuid})", Some("Rewind"), "200")},
            "/v1/sessions/{id}/exec": {"post": op("run a command in the sandbox (SSE: output, exit)", Some("Exec"), "200")},
            "/v1/sessions/{id}/archive": {
                "get": op("the workspace as a tarball", None, "200"),
                "put": {"summary": "unpack a tarball into the workspace (regular files and directories)", "responses": error_responses()}
            },
            "/v1/sessions/{id}/files/{path}": {
                "get": op("a workspace file", None, "200"),
                "put": {"summary": "write a workspace file (raw body)", "responses": error_responses()}
            }
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {"Error": {"description": "an error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
                "SessionConfig": {"type": "object", "additionalProperties": false, "properties": {
                    "workspace": {"type": "string", "description": "a path beneath the tenant's workspace root; absent: a new empty one"},
                    "backend": {"enum": ["local", "docker"]},
                    "image": {"type": "string"},
                    "model": {"type": "string"},
                    "permission_mode": {"enum": ["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]},
                    "settings": {"type": "object"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "ttl_seconds": {"type": "integer", "minimum": 0},
                    "idle_seconds": {"type": "integer", "minimum": 0}
                }},
                "Message": {"type": "object", "additionalProperties": false, "required": ["content"], "properties": {"content": {"type": "string"}}},
                "PermissionAnswer": {"type": "object", "additionalProperties": false, "required": ["decision"], "properties": {
                    "decision": {"enum": ["allow", "deny"]}, "always": {"type": "boolean"}, "message": {"type": "string"}}},
                "Rewind": {"type": "object", "additionalProperties": false, "properties": {"to": {"type": "string"}}},
                "Exec": {"type": "object", "additionalProperties": false, "required": ["command"], "properties": {
                    "command": {"type": "string"}, "timeout_ms": {"type": "integer"}, "env": {"type": "object", "additionalProperties": {"type": "string"}}}}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_routed_path_is_documented() {
        let doc = super::document();
        for path in super::PATHS {
            assert!(doc["paths"].get(*path).is_some(), "{path}");
        }
    }
}
