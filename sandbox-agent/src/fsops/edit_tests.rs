use std::os::unix::fs::symlink;

use super::*;
use crate::fsops::testutil::{Fixture, fixture, names, s};

fn req(path: &Path, old: &str, new: &str, all: bool) -> EditRequest {
    EditRequest {
        path: s(path),
        old_string: old.into(),
        new_string: new.into(),
        replace_all: all,
        expected_sha256: String::new(),
    }
}

fn with_file(text: &str) -> (Fixture, std::path::PathBuf) {
    let f = fixture();
    let p = f.root.join("code.rs");
    std::fs::write(&p, text).unwrap();
    (f, p)
}

fn content(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn exact_unique_match_is_replaced_with_a_snippet() {
    let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let (f, p) = with_file(&text);
    let r = edit(&f.resolver, &req(&p, "line 10\n", "ten\nTEN\n", false)).unwrap();
    assert_eq!(r.replacements, 1);
    assert_eq!(r.sha256, sha256_hex(content(&p).as_bytes()));
    assert!(content(&p).contains("line 9\nten\nTEN\nline 11\n"));
    assert!(r.snippet.starts_with("     6\tline 6\n"), "{}", r.snippet);
    assert!(r.snippet.contains("    10\tten\n    11\tTEN\n"));
    assert!(r.snippet.ends_with("    15\tline 14\n"), "{}", r.snippet);
    assert_eq!(names(&f.root), ["code.rs"]);
}

#[test]
fn ambiguous_match_is_refused_unless_replace_all() {
    let (f, p) = with_file("a x a y a\n");
    let err = edit(&f.resolver, &req(&p, "a", "b", false)).unwrap_err();
    assert_eq!(err.code, ErrorCode::EditAmbiguous);
    assert!(err.message.contains("3 times") && err.message.contains("replace_all"));
    assert_eq!(content(&p), "a x a y a\n");
    let r = edit(&f.resolver, &req(&p, "a", "b", true)).unwrap();
    assert_eq!(r.replacements, 3);
    assert_eq!(content(&p), "b x b y b\n");
}

#[test]
fn no_match_no_change_and_empty_old_write_nothing() {
    let (f, p) = with_file("fn main() {\n    body();\n}\n");
    let err = edit(&f.resolver, &req(&p, "fn main() {\n\tbody();", "x", false)).unwrap_err();
    assert_eq!(err.code, ErrorCode::EditNoMatch);
    assert!(err.message.contains("whitespace"), "{}", err.message);
    let err = edit(&f.resolver, &req(&p, "absent", "x", false)).unwrap_err();
    assert_eq!(err.code, ErrorCode::EditNoMatch);
    let err = edit(&f.resolver, &req(&p, "body", "body", false)).unwrap_err();
    assert_eq!(err.code, ErrorCode::EditNoChange);
    let err = edit(&f.resolver, &req(&p, "", "x", false)).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    assert_eq!(content(&p), "fn main() {\n    body();\n}\n");
    assert_eq!(names(&f.root), ["code.rs"]);
}

#[test]
fn expected_sha256_guards_against_a_changed_file() {
    let (f, p) = with_file("v1\n");
    let mut stale = req(&p, "v1", "v2", false);
    stale.expected_sha256 = sha256_hex(b"v0\n");
    let err = edit(&f.resolver, &stale).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    assert!(err.message.contains("changed since it was last read"));
    assert_eq!(content(&p), "v1\n");
    stale.expected_sha256 = sha256_hex(b"v1\n").to_uppercase();
    edit(&f.resolver, &stale).unwrap();
    assert_eq!(content(&p), "v2\n");
}

#[test]
fn edits_through_links_out_and_hard_links_are_refused() {
    let f = fixture();
    let secret = f.outside.join("secret");
    std::fs::write(&secret, "token\n").unwrap();
    symlink(&secret, f.root.join("abs")).unwrap();
    symlink("../outside/secret", f.root.join("rel")).unwrap();
    std::fs::hard_link(&secret, f.root.join("hl")).unwrap();
    for name in ["abs", "rel", "../outside/secret"] {
        let err = edit(
            &f.resolver,
            &req(&f.root.join(name), "token", "pwned", false),
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::OutsideSandbox, "{name}");
    }
    let err = edit(
        &f.resolver,
        &req(&f.root.join("hl"), "token", "pwned", false),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::PermissionDenied);
    assert_eq!(content(&secret), "token\n");
    assert_eq!(names(&f.outside), ["secret"]);
}

#[test]
fn a_symlink_inside_the_root_edits_its_target() {
    let (f, p) = with_file("old\n");
    symlink("code.rs", f.root.join("link")).unwrap();
    edit(&f.resolver, &req(&f.root.join("link"), "old", "new", false)).unwrap();
    assert_eq!(content(&p), "new\n");
    assert!(
        std::fs::symlink_metadata(f.root.join("link"))
            .unwrap()
            .is_symlink()
    );
}
