//! Structured output (`--json-schema`): the model gives its final answer by calling the
//! StructuredOutput tool, whose input schema is the caller's schema. Each call is
//! validated against the whole schema (a JSON Schema validator, not the tools' own
//! subset); a value that does not match comes back to the model as an error naming the
//! mismatch, and the model tries again. The loop ends the run once a value matched, and
//! reminds the model when it ends its turn without one; after [`MAX_RETRIES`] failed
//! attempts the run ends `error_max_structured_output_retries`.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::tools::{Tool, ToolContext, ToolOutput};

pub const NAME: &str = "StructuredOutput";

/// Failed attempts (invalid values, or a turn ended without one) before the run ends.
pub const MAX_RETRIES: u32 = 5;

/// What the system prompt adds when a schema is set.
pub const INSTRUCTION: &str = "When the task is done, give your final answer by calling \
the StructuredOutput tool exactly once, with a value matching its input schema. That call is \
the answer the user receives; text you write besides it is not.";

/// What the model is told when it ended its turn without a value.
pub const REMINDER: &str = "You have not given your final answer yet: call the \
StructuredOutput tool with a value matching its input schema.";

/// A schema that cannot be used, said in terms of the flag.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "--json-schema must describe an object (the tool input the answer is given as), got {0}"
    )]
    NotAnObject(String),
    #[error("--json-schema is not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// The run's state: the value given, and the failed attempts.
#[derive(Debug, Default)]
struct State {
    value: Option<Value>,
    failures: u32,
}

/// The tool, and the loop's handle on what it received.
#[derive(Clone)]
pub struct StructuredOutput {
    schema: Value,
    validator: Arc<jsonschema::Validator>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for StructuredOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredOutput")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl StructuredOutput {
    pub fn new(schema: Value) -> Result<Self, SchemaError> {
        let is_object = schema.get("type").and_then(Value::as_str) == Some("object");
        if !is_object {
            let shown = schema
                .get("type")
                .map_or_else(|| "a schema without \"type\"".to_string(), Value::to_string);
            return Err(SchemaError::NotAnObject(shown));
        }
        let validator =
            jsonschema::validator_for(&schema).map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(Self {
            schema,
            validator: Arc::new(validator),
            state: Arc::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the previous run's value and failures.
    pub fn reset(&self) {
        *self.state() = State::default();
    }

    /// The value given in this run, once one matched.
    pub fn value(&self) -> Option<Value> {
        self.state().value.clone()
    }

    /// Counts a turn that ended without a value; true while another attempt is allowed.
    pub fn missed(&self) -> bool {
        let mut state = self.state();
        state.failures += 1;
        state.failures <= MAX_RETRIES
    }

    /// Counts calls of the tool that were refused (by the tools' own input check or by
    /// the schema here).
    pub fn refused(&self, calls: u32) {
        self.state().failures += calls;
    }

    /// Whether the failed attempts passed the limit.
    pub fn exhausted(&self) -> bool {
        self.state().failures > MAX_RETRIES
    }

    /// Checks a value; on a match it becomes the run's answer.
    fn offer(&self, value: Value) -> Result<(), String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".into() } else { at };
                format!("at {at}: {e}")
            })
            .collect();
        if problems.is_empty() {
            self.state().value = Some(value);
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

#[tonic::async_trait]
impl Tool for StructuredOutput {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Gives the final answer of the task as a value matching this tool's input schema. \
         Call it once, at the end; the value is what the user receives."
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn uses_sandbox(&self) -> bool {
        false
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> ToolOutput {
        match self.offer(input) {
            Ok(()) => ToolOutput::ok("Structured output provided successfully."),
            Err(problems) => ToolOutput::error(format!(
                "the value does not match the required schema ({problems}); call {NAME} \
                 again with a corrected value"
            )),
        }
    }
}

/// The schema the flag gives, parsed from its JSON text.
pub fn parse_flag(text: &str) -> Result<Value, SchemaError> {
    serde_json::from_str(text).map_err(|e| SchemaError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn person() -> Value {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
            "required": ["name", "age"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_matching_value_is_kept_and_a_mismatch_names_the_problem() {
        let out = StructuredOutput::new(person()).unwrap();
        let err = out.offer(json!({"name": "Ada", "age": -1})).unwrap_err();
        assert!(err.contains("/age"), "{err}");
        assert_eq!(out.value(), None);
        out.offer(json!({"name": "Ada", "age": 36})).unwrap();
        assert_eq!(out.value(), Some(json!({"name": "Ada", "age": 36})));
        out.reset();
        assert_eq!(out.value(), None);
    }

    #[test]
    fn retries_are_counted_to_the_limit() {
        let out = StructuredOutput::new(person()).unwrap();
        out.refused(1);
        for _ in 1..MAX_RETRIES {
            assert!(out.missed());
        }
        assert!(!out.exhausted());
        assert!(!out.missed());
        assert!(out.exhausted());
    }

    #[test]
    fn schemas_that_cannot_be_a_tool_input_are_refused() {
        assert!(matches!(
            StructuredOutput::new(json!({"type": "array"})),
            Err(SchemaError::NotAnObject(_))
        ));
        assert!(matches!(
            StructuredOutput::new(json!({"type": "object", "properties": {"a": {"type": 5}}})),
            Err(SchemaError::Invalid(_))
        ));
        assert!(parse_flag("{not json").is_err());
    }
}
