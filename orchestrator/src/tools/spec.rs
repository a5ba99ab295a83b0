//! [`ToolSpec`]: a tool as the model and the permission engine see it: its name (known at
//! run time for MCP and sub-agent tools), description, input schema and permission kind.

use std::sync::Arc;

use serde_json::{Value, json};

pub use crate::permissions::ToolKind;

/// One tool's definition.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by (`Read`, `mcp__time__get_current_time`).
    pub name: Arc<str>,
    pub description: Arc<str>,
    /// JSON Schema of the input, checked before every call.
    pub input_schema: Value,
    /// What it does, as far as the permission rules care.
    pub kind: ToolKind,
    /// It never changes anything (may run concurrently with other such calls).
    pub read_only: bool,
}

impl ToolSpec {
    /// The entry in a Messages API request's `tools` array.
    pub fn definition(&self) -> Value {
        json!({
            "name": &*self.name,
            "description": &*self.description,
            "input_schema": self.input_schema,
        })
    }
}
