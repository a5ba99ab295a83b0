use super::*;
use serde_json::json;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "s": {"type": "string", "minLength": 1},
            "n": {"type": "integer", "minimum": 1, "maximum": 10},
            "x": {"type": "number", "minimum": 0.5},
            "b": {"type": "boolean"},
            "e": {"type": "string", "enum": ["a", "b"]}
        },
        "required": ["s"],
        "additionalProperties": false
    })
}

#[test]
fn accepts_valid_input_and_null_optionals() {
    validate(
        &schema(),
        &json!({"s": "x", "n": 10, "x": 0.5, "b": false, "e": "b"}),
    )
    .unwrap();
    validate(&schema(), &json!({"s": "x", "n": null})).unwrap();
}

#[test]
fn reports_bounds() {
    assert_eq!(
        validate(&schema(), &json!({"s": "x", "n": 11})).unwrap_err(),
        "`n` must be at most 10, got 11"
    );
    assert_eq!(
        validate(&schema(), &json!({"s": "x", "x": 0.1})).unwrap_err(),
        "`x` must be at least 0.5, got 0.1"
    );
    assert_eq!(
        validate(&schema(), &json!({"s": "x", "x": "1"})).unwrap_err(),
        "`x` must be a number, got a string (\"1\")"
    );
}

#[test]
fn long_values_are_shortened_in_messages() {
    let long = "y".repeat(500);
    let err = validate(&schema(), &json!({"s": "x", "b": long})).unwrap_err();
    assert!(err.len() < 120, "{err}");
    assert!(err.ends_with("…)"), "{err}");
}

#[test]
fn open_schemas_allow_extra_fields() {
    let open = json!({"type": "object", "properties": {}});
    validate(&open, &json!({"anything": 1})).unwrap();
}

#[test]
fn unknown_keywords_are_found_in_nested_properties() {
    let s = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}, "oneOf": []});
    let mut found = unknown_keywords(&s);
    found.sort();
    assert_eq!(found, ["oneOf", "pattern"]);
}
