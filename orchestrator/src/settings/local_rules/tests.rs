//! The local settings file edited in place: rules added and removed, other keys kept,
//! bad files left alone, planted links refused, trust kept only when it was current.

use super::*;
use serde_json::json;

fn content(ws: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(local_file(ws)).unwrap()).unwrap()
}

/// The names in `.claude` (no temporary file may be left behind).
fn names(ws: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(ws.join(DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect()
}

#[test]
fn adds_a_rule_creating_the_file_and_keeps_other_keys() {
    let ws = tempfile::tempdir().unwrap();
    let done = add_local_allow_rule(ws.path(), "Bash(make test)", None).unwrap();
    assert!(done.changed && !done.still_trusted, "{done:?}");
    assert_eq!(
        content(ws.path()),
        json!({"permissions": {"allow": ["Bash(make test)"]}})
    );
    std::fs::write(
        local_file(ws.path()),
        r#"{"env": {"A": "1"}, "permissions": {"deny": ["Read(.env)"], "allow": ["Read"]}}"#,
    )
    .unwrap();
    assert!(
        add_local_allow_rule(ws.path(), "Edit(/src/a.rs)", None)
            .unwrap()
            .changed
    );
    assert!(
        !add_local_allow_rule(ws.path(), "Edit(/src/a.rs)", None)
            .unwrap()
            .changed
    );
    assert_eq!(
        content(ws.path()),
        json!({"env": {"A": "1"}, "permissions": {
            "deny": ["Read(.env)"], "allow": ["Read", "Edit(/src/a.rs)"]}})
    );
    assert_eq!(names(ws.path()), vec![std::ffi::OsString::from(NAME)]);
}

#[test]
fn removes_a_rule_from_its_list_creating_nothing() {
    let ws = tempfile::tempdir().unwrap();
    let done = remove_local_rule(ws.path(), RuleList::Deny, "Read(.env)", None).unwrap();
    assert!(!done.changed);
    assert!(
        !ws.path().join(DIR).exists(),
        "nothing made to remove nothing"
    );
    std::fs::create_dir(ws.path().join(DIR)).unwrap();
    std::fs::write(
        local_file(ws.path()),
        r#"{"model": "m", "permissions": {"deny": ["Read(.env)", "Bash(rm *)"]}}"#,
    )
    .unwrap();
    let remove = |list, rule| {
        remove_local_rule(ws.path(), list, rule, None)
            .unwrap()
            .changed
    };
    assert!(remove(RuleList::Deny, "Read(.env)"));
    assert!(!remove(RuleList::Allow, "Bash(rm *)"));
    assert!(!remove(RuleList::Ask, "Bash(rm *)"));
    assert_eq!(
        content(ws.path()),
        json!({"model": "m", "permissions": {"deny": ["Bash(rm *)"]}})
    );
}

#[test]
fn bad_files_are_reported_and_left_alone() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(DIR)).unwrap();
    for bad in ["{not json", "[1]", r#"{"permissions": {"allow": "Read"}}"#] {
        std::fs::write(local_file(ws.path()), bad).unwrap();
        let err = add_local_allow_rule(ws.path(), "Read", None).unwrap_err();
        assert!(
            matches!(err, LocalRuleError::Invalid { .. }),
            "{bad}: {err}"
        );
        assert_eq!(std::fs::read_to_string(local_file(ws.path())).unwrap(), bad);
    }
    let bad = r#"{"permissions": {"deny": "Read"}}"#;
    std::fs::write(local_file(ws.path()), bad).unwrap();
    assert!(remove_local_rule(ws.path(), RuleList::Deny, "Read", None).is_err());
    assert_eq!(std::fs::read_to_string(local_file(ws.path())).unwrap(), bad);
    assert_eq!(names(ws.path()), vec![std::ffi::OsString::from(NAME)]);
    assert!(add_local_allow_rule(ws.path(), "Bash(unclosed", None).is_err());
}

#[test]
fn planted_links_are_not_followed() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    // `.claude` a link to a directory outside: refused, nothing written there.
    std::os::unix::fs::symlink(outside.path(), ws.path().join(DIR)).unwrap();
    assert!(add_local_allow_rule(ws.path(), "Bash", None).is_err());
    assert!(remove_local_rule(ws.path(), RuleList::Allow, "Bash", None).is_err());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    // The file a link to a file outside: refused, the target untouched.
    std::fs::remove_file(ws.path().join(DIR)).unwrap();
    std::fs::create_dir(ws.path().join(DIR)).unwrap();
    let target = outside.path().join("victim.json");
    std::fs::write(&target, r#"{"permissions": {"allow": ["Bash"]}}"#).unwrap();
    std::os::unix::fs::symlink(&target, local_file(ws.path())).unwrap();
    assert!(add_local_allow_rule(ws.path(), "Edit", None).is_err());
    assert!(remove_local_rule(ws.path(), RuleList::Allow, "Bash", None).is_err());
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        r#"{"permissions": {"allow": ["Bash"]}}"#
    );
}

#[test]
fn a_trusted_workspace_stays_trusted_through_its_users_edits() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    std::fs::create_dir(ws.join(DIR)).unwrap();
    std::fs::write(
        ws.join(LOCAL_FILE),
        r#"{"model": "m", "permissions": {"allow": ["Read"]}}"#,
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = TrustStore::at(home.path());
    crate::trust::trust_workspace(&store, &ws).unwrap();
    let current = || crate::trust::current_fingerprint(&ws).unwrap();
    let done = add_local_allow_rule(&ws, "Bash(npm test:*)", Some(&store)).unwrap();
    assert!(done.changed && done.still_trusted, "{done:?}");
    assert_eq!(content(&ws)["model"], "m");
    assert_eq!(content(&ws)["permissions"]["allow"][1], done.rule);
    assert_eq!(store.recorded(&ws).unwrap().unwrap().files, current());
    let done = remove_local_rule(&ws, RuleList::Allow, "Read", Some(&store)).unwrap();
    assert!(done.changed && done.still_trusted, "{done:?}");
    assert_eq!(store.recorded(&ws).unwrap().unwrap().files, current());
    // A change the user did not make through Cordon still untrusts: the edit after it
    // does not re-trust.
    std::fs::write(
        ws.join(crate::settings::PROJECT_FILE),
        r#"{"env": {"A": "1"}}"#,
    )
    .unwrap();
    let done = add_local_allow_rule(&ws, "Edit", Some(&store)).unwrap();
    assert!(done.changed && !done.still_trusted, "{done:?}");
    assert_ne!(store.recorded(&ws).unwrap().unwrap().files, current());
}

#[test]
fn an_untrusted_workspace_stays_untrusted() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = TrustStore::at(home.path());
    let done = add_local_allow_rule(ws.path(), "Edit", Some(&store)).unwrap();
    assert!(done.changed && !done.still_trusted);
    assert!(store.recorded(ws.path()).unwrap().is_none());
}
