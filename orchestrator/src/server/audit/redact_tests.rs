use serde_json::json;

use super::*;

#[test]
fn the_builtin_policy_loads_and_its_examples_hold() {
    let r = Redactor::from_json(POLICY).expect("policy valid");
    assert!(r.max_chars > 0);
    assert!(!r.patterns.is_empty());
}

#[test]
fn a_pattern_whose_example_fails_is_refused() {
    let bad = r#"{"version":1,"why":"w","max_preview_chars":10,
        "secret_keys":{"why":"w","words":[]},
        "patterns":[{"name":"p","regex":"abc","why":"w","mask":["xyz"],"keep":[]}]}"#;
    let err = Redactor::from_json(bad).expect_err("example must fail");
    assert!(err.to_string().contains("should be masked"), "{err}");
}

#[test]
fn secrets_in_commands_are_masked() {
    let r = Redactor::builtin();
    let p = r.preview(&json!({"command": "ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnop curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz' https://x"}));
    assert!(!p.contains("sk-ant-api03"), "{p}");
    assert!(!p.contains("abcdefghijklmnopqrstuvwxyz"), "{p}");
    assert!(p.contains(MASK), "{p}");
    assert!(p.contains("curl"), "{p}");
}

#[test]
fn secret_named_keys_are_masked_whatever_the_value() {
    let r = Redactor::builtin();
    let p = r.preview(&json!({"file_path": "/w/a", "env": {"DB_Password": "plain"}, "api_key": 7}));
    assert!(!p.contains("plain"), "{p}");
    assert!(!p.contains('7'), "{p}");
    assert!(p.contains("/w/a"), "{p}");
}

#[test]
fn private_keys_written_through_write_are_masked() {
    let r = Redactor::builtin();
    let body = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n";
    let p = r.preview(&json!({"file_path": "/w/id_rsa", "content": body}));
    assert!(!p.contains("MIIEow"), "{p}");
}

#[test]
fn long_inputs_are_cut_on_a_char_boundary() {
    let r = Redactor::builtin();
    let p = r.preview_text(&"é".repeat(10_000));
    assert_eq!(p.chars().count(), r.max_chars + 1);
    assert!(p.ends_with('…'));
}

#[test]
fn ordinary_inputs_are_kept_as_they_are() {
    let r = Redactor::builtin();
    let input = json!({"command": "cargo test --workspace", "timeout": 1000});
    assert_eq!(r.preview(&input), input.to_string());
}
