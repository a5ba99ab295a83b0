use std::os::unix::fs::symlink;

use super::*;
use crate::fsops::testutil::{fixture, s};
use crate::search::testutil::file;

fn req(pattern: &str, path: &str, limit: u32) -> GlobRequest {
    GlobRequest {
        pattern: pattern.into(),
        path: path.into(),
        limit,
    }
}

fn names(resp: &GlobResponse, root: &Path) -> Vec<String> {
    resp.paths
        .iter()
        .map(|p| {
            Path::new(p)
                .strip_prefix(root)
                .unwrap()
                .display()
                .to_string()
        })
        .collect()
}

#[test]
fn newest_first_with_gitignore_respected_and_hidden_files_kept() {
    let f = fixture();
    file(&f.root, "old.rs", "", 300);
    file(&f.root, "src/new.rs", "", 10);
    file(&f.root, "src/mid.rs", "", 100);
    file(&f.root, ".hidden/h.rs", "", 200);
    file(&f.root, "target/built.rs", "", 1);
    file(&f.root, ".git/hooks/x.rs", "", 1);
    file(&f.root, ".gitignore", "target/\n", 1000);
    let r = glob(&f.resolver, &f.root, &req("**/*.rs", "", 0)).unwrap();
    assert_eq!(
        names(&r, &f.root),
        ["src/new.rs", "src/mid.rs", ".hidden/h.rs", "old.rs"]
    );
    assert!(!r.truncated);
    let top = glob(&f.resolver, &f.root, &req("*.rs", "", 0)).unwrap();
    assert_eq!(names(&top, &f.root), ["old.rs"]);
    let sub = glob(&f.resolver, &f.root, &req("*.rs", "src", 0)).unwrap();
    assert_eq!(names(&sub, &f.root), ["src/new.rs", "src/mid.rs"]);
}

#[test]
fn limit_truncates() {
    let f = fixture();
    for i in 0..5 {
        file(&f.root, &format!("f{i}.txt"), "", 10 * i);
    }
    let r = glob(&f.resolver, &f.root, &req("*.txt", "", 2)).unwrap();
    assert_eq!(names(&r, &f.root), ["f0.txt", "f1.txt"]);
    assert!(r.truncated);
}

#[test]
fn absolute_patterns_work_beneath_a_root_only() {
    let f = fixture();
    file(&f.root, "src/a.rs", "", 1);
    file(&f.outside, "b.rs", "", 1);
    let pattern = format!("{}/src/*.rs", s(&f.root));
    let r = glob(&f.resolver, Path::new("/"), &req(&pattern, "", 0)).unwrap();
    assert_eq!(names(&r, &f.root), ["src/a.rs"]);
    let literal = format!("{}/src/a.rs", s(&f.root));
    assert_eq!(
        glob(&f.resolver, &f.root, &req(&literal, "", 0))
            .unwrap()
            .paths
            .len(),
        1
    );
    let out = format!("{}/*.rs", s(&f.outside));
    let err = glob(&f.resolver, &f.root, &req(&out, "", 0)).unwrap_err();
    assert_eq!(err.code, ErrorCode::OutsideSandbox);
    let err = glob(&f.resolver, &f.root, &req("*.rs", &s(&f.outside), 0)).unwrap_err();
    assert_eq!(err.code, ErrorCode::OutsideSandbox);
    let err = glob(&f.resolver, &f.root, &req("*.rs", "../outside", 0)).unwrap_err();
    assert_eq!(err.code, ErrorCode::OutsideSandbox);
}

#[test]
fn links_are_not_followed_out_and_bad_patterns_are_reported() {
    let f = fixture();
    file(&f.outside, "secret.rs", "", 1);
    symlink(&f.outside, f.root.join("out")).unwrap();
    symlink(f.outside.join("secret.rs"), f.root.join("s.rs")).unwrap();
    let r = glob(&f.resolver, &f.root, &req("**/*", "", 0)).unwrap();
    assert!(r.paths.is_empty(), "{:?}", r.paths);
    let err = glob(&f.resolver, &f.root, &req("out/*", "out", 0)).unwrap_err();
    assert_eq!(err.code, ErrorCode::OutsideSandbox);
    let err = glob(&f.resolver, &f.root, &req("a[", "", 0)).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadPattern);
}
