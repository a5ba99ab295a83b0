use std::os::unix::fs::symlink;

use super::*;
use crate::fsops::testutil::{Fixture, fixture, s};
use crate::search::testutil::file;

fn tree() -> Fixture {
    let f = fixture();
    file(
        &f.root,
        "src/main.rs",
        "fn main() {\n    let x = 1;\n    println!(\"hello\");\n}\n",
        100,
    );
    file(
        &f.root,
        "src/lib.rs",
        "pub fn hello() {}\n// Hello again\n",
        10,
    );
    file(&f.root, "notes.txt", "hello world\nbye\n", 200);
    file(&f.root, ".hidden.txt", "hello hidden\n", 300);
    file(&f.root, "target/out.rs", "hello built\n", 1);
    file(&f.root, ".gitignore", "target/\n", 1000);
    std::fs::write(f.root.join("bin.dat"), b"hello\0binary").unwrap();
    f
}

fn req(pattern: &str, mode: OutputMode) -> GrepRequest {
    GrepRequest {
        pattern: pattern.into(),
        output_mode: mode as i32,
        ..Default::default()
    }
}

fn rel(f: &Fixture, output: &str) -> String {
    output.replace(&format!("{}/", s(&f.root)), "")
}

#[test]
fn files_with_matches_lists_newest_first() {
    let f = tree();
    let r = grep(&f.resolver, &f.root, &req("hello", OutputMode::Unspecified)).unwrap();
    assert_eq!(
        rel(&f, &r.output),
        "src/lib.rs\nsrc/main.rs\nnotes.txt\n.hidden.txt\n"
    );
    assert_eq!((r.matched_files, r.matches), (4, 4));
    assert!(!r.truncated);
}

#[test]
fn count_mode_with_case_insensitivity() {
    let f = tree();
    let mut q = req("hello", OutputMode::Count);
    q.case_insensitive = true;
    q.path = "src".into();
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    assert_eq!(rel(&f, &r.output), "src/lib.rs:2\nsrc/main.rs:1\n");
    assert_eq!(r.matches, 3);
}

#[test]
fn content_mode_with_numbers_and_context() {
    let f = fixture();
    file(&f.root, "ctx.txt", "a\nb\nHIT1\nc\nd\ne\nf\nHIT2\ng\n", 1);
    file(&f.root, "two.txt", "HIT3\n", 2);
    let mut q = req("HIT", OutputMode::Content);
    (q.line_numbers, q.before_context, q.after_context) = (true, 1, 1);
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    let want = "ctx.txt-2-b\nctx.txt:3:HIT1\nctx.txt-4-c\n--\nctx.txt-7-f\nctx.txt:8:HIT2\n\
                ctx.txt-9-g\n--\ntwo.txt:1:HIT3\n";
    assert_eq!(rel(&f, &r.output), want);
    q.line_numbers = false;
    (q.before_context, q.after_context) = (0, 0);
    q.path = s(&f.root.join("two.txt"));
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    assert_eq!(rel(&f, &r.output), "two.txt:HIT3\n");
}

#[test]
fn head_limit_and_the_byte_cap_truncate() {
    let f = fixture();
    file(&f.root, "many.txt", &"match this line\n".repeat(30_000), 1);
    let mut q = req("match", OutputMode::Content);
    q.head_limit = 2;
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    assert_eq!(r.output.lines().count(), 2);
    assert!(r.truncated);
    q.head_limit = 0;
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    assert!(r.truncated && r.output.len() <= crate::limits::MAX_GREP_OUTPUT_BYTES);
}

#[test]
fn type_and_glob_filters() {
    let f = tree();
    let mut q = req("hello", OutputMode::FilesWithMatches);
    q.file_type = "rust".into();
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    assert_eq!(rel(&f, &r.output), "src/lib.rs\nsrc/main.rs\n");
    q.file_type = "nosuchtype".into();
    let err = grep(&f.resolver, &f.root, &q).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadPattern);
    assert!(err.message.contains("nosuchtype"));
    q.file_type.clear();
    q.glob = "*.{txt,md}".into();
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    assert_eq!(rel(&f, &r.output), "notes.txt\n.hidden.txt\n");
}

#[test]
fn multiline_matches_across_lines() {
    let f = tree();
    let mut q = req(r"main\(\) \{\n\s+let", OutputMode::Content);
    q.line_numbers = true;
    let err = grep(&f.resolver, &f.root, &q).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadPattern);
    q.multiline = true;
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    assert_eq!(
        rel(&f, &r.output),
        "src/main.rs:1:fn main() {\nsrc/main.rs:2:    let x = 1;\n"
    );
    q.pattern = "fn.*hello".into();
    let r = grep(&f.resolver, &f.root, &q).unwrap();
    assert_eq!(r.matched_files, 2);
}

#[test]
fn bad_regex_and_paths_out_are_refused() {
    let f = tree();
    let err = grep(&f.resolver, &f.root, &req("a(", OutputMode::Content)).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadPattern);
    assert!(
        err.message.contains("invalid regular expression"),
        "{}",
        err.message
    );
    file(&f.outside, "secret.txt", "hello secret\n", 1);
    symlink(&f.outside, f.root.join("out")).unwrap();
    symlink(f.outside.join("secret.txt"), f.root.join("s.txt")).unwrap();
    let r = grep(&f.resolver, &f.root, &req("secret", OutputMode::Content)).unwrap();
    assert_eq!(r.output, "");
    for path in [
        s(&f.outside),
        "out".into(),
        "s.txt".into(),
        "../outside".into(),
    ] {
        let mut q = req("secret", OutputMode::Content);
        q.path = path.clone();
        let err = grep(&f.resolver, &f.root, &q).unwrap_err();
        assert_eq!(err.code, ErrorCode::OutsideSandbox, "{path}");
    }
}
