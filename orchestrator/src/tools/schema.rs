//! Input validation: every tool input is checked against the tool's hand-written JSON
//! Schema before the tool runs, and a failure names the field and the problem in words a
//! model can act on ("missing required field `old_string`").
//!
//! The validator understands exactly the keywords our schemas use (see [`KNOWN_KEYWORDS`]);
//! a test checks every built-in schema uses no other, so no constraint is silently skipped.
//! Unknown input fields are refused (`additionalProperties: false` everywhere): a typo'd
//! field would otherwise be dropped without the model knowing. An optional field given as
//! `null` counts as absent (models send that for "not set").

use serde_json::{Map, Value};

/// Every schema keyword [`validate`] enforces or deliberately ignores (annotations).
pub const KNOWN_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "description",
    "$schema",
    // Not checked here: a tool with array fields decodes them into typed items itself.
    "items",
];

/// Checks `input` against `schema` (an object schema with typed properties). The error
/// names the first problem found.
pub fn validate(schema: &Value, input: &Value) -> Result<(), String> {
    let Some(fields) = input.as_object() else {
        return Err(format!(
            "input must be a JSON object of fields, got {}",
            kind_of(input)
        ));
    };
    let props = schema.get("properties").and_then(Value::as_object);
    let empty = Map::new();
    let props = props.unwrap_or(&empty);
    for name in required(schema) {
        if fields.get(name).is_none_or(Value::is_null) {
            return Err(format!("missing required field `{name}`"));
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, value) in fields {
        match props.get(name) {
            Some(_) if value.is_null() => {}
            Some(prop) => check_value(name, prop, value)?,
            None if closed => {
                let accepted: Vec<&str> = props.keys().map(String::as_str).collect();
                return Err(format!(
                    "unknown field `{name}` (accepted fields: {})",
                    accepted.join(", ")
                ));
            }
            None => {}
        }
    }
    Ok(())
}

fn required(schema: &Value) -> impl Iterator<Item = &str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn check_value(name: &str, prop: &Value, value: &Value) -> Result<(), String> {
    match prop.get("type").and_then(Value::as_str) {
        Some("string") => check_string(name, prop, value),
        Some("integer") => check_integer(name, prop, value),
        Some("number") => check_number(name, prop, value),
        Some("boolean") if value.is_boolean() => Ok(()),
        Some("boolean") => Err(format!(
            "`{name}` must be true or false, got {}",
            kind_of(value)
        )),
        _ => Ok(()),
    }
}

fn check_string(name: &str, prop: &Value, value: &Value) -> Result<(), String> {
    let Some(s) = value.as_str() else {
        return Err(format!("`{name}` must be a string, got {}", kind_of(value)));
    };
    if let Some(choices) = prop.get("enum").and_then(Value::as_array)
        && !choices.iter().any(|c| c.as_str() == Some(s))
    {
        let list: Vec<String> = choices.iter().map(Value::to_string).collect();
        return Err(format!(
            "`{name}` must be one of {}, got {value}",
            list.join(", ")
        ));
    }
    let min_len = prop.get("minLength").and_then(Value::as_u64).unwrap_or(0);
    if (s.chars().count() as u64) < min_len {
        return Err(format!("`{name}` must not be empty"));
    }
    Ok(())
}

fn check_integer(name: &str, prop: &Value, value: &Value) -> Result<(), String> {
    let min = prop.get("minimum").and_then(Value::as_f64);
    let max = prop.get("maximum").and_then(Value::as_f64);
    let what = match min {
        Some(m) if m >= 1.0 => "a positive integer",
        Some(m) if m >= 0.0 => "a non-negative integer",
        _ => "an integer",
    };
    let n = match value.as_f64() {
        Some(n) if n.fract() == 0.0 => n,
        _ => return Err(format!("`{name}` must be {what}, got {}", kind_of(value))),
    };
    if min.is_some_and(|m| n < m) {
        return Err(format!("`{name}` must be {what}, got {value}"));
    }
    if let Some(m) = max.filter(|m| n > *m) {
        return Err(format!("`{name}` must be at most {m}, got {value}"));
    }
    Ok(())
}

fn check_number(name: &str, prop: &Value, value: &Value) -> Result<(), String> {
    let Some(n) = value.as_f64() else {
        return Err(format!("`{name}` must be a number, got {}", kind_of(value)));
    };
    if let Some(m) = prop
        .get("minimum")
        .and_then(Value::as_f64)
        .filter(|m| n < *m)
    {
        return Err(format!("`{name}` must be at least {m}, got {value}"));
    }
    if let Some(m) = prop
        .get("maximum")
        .and_then(Value::as_f64)
        .filter(|m| n > *m)
    {
        return Err(format!("`{name}` must be at most {m}, got {value}"));
    }
    Ok(())
}

/// "a string (\"10\")", "an array", ...: what the model actually sent.
fn kind_of(value: &Value) -> String {
    let shown = |v: &Value| {
        let mut s = v.to_string();
        if s.len() > 40 {
            let mut end = 40;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            s.push('…');
        }
        s
    };
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => format!("a string ({})", shown(value)),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Lists keywords in `schema` (recursively through `properties`) that [`validate`] does
/// not know: a schema using one would carry a constraint nobody enforces.
pub fn unknown_keywords(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(obj) = schema.as_object() else {
        return out;
    };
    for (key, sub) in obj {
        if !KNOWN_KEYWORDS.contains(&key.as_str()) {
            out.push(key.clone());
        }
        if key == "properties"
            && let Some(props) = sub.as_object()
        {
            for prop in props.values() {
                out.extend(unknown_keywords(prop));
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
