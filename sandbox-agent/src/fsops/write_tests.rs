use std::os::unix::fs::{PermissionsExt, symlink};

use super::*;
use crate::fsops::testutil::{Fixture, fixture, names, s};

fn req(path: &Path, content: &str, create_parents: bool) -> WriteRequest {
    WriteRequest {
        path: s(path),
        content: content.as_bytes().to_vec(),
        create_parents,
    }
}

fn write_code(f: &Fixture, path: &Path, parents: bool) -> ErrorCode {
    write(&f.resolver, &req(path, "new", parents))
        .unwrap_err()
        .code
}

#[test]
fn creates_then_replaces_keeping_the_mode_and_leaving_no_temp() {
    let f = fixture();
    let p = f.root.join("a.txt");
    let r = write(&f.resolver, &req(&p, "one\n", false)).unwrap();
    assert!(r.created);
    assert_eq!(
        (r.bytes_written, r.sha256.as_str()),
        (4, sha256_hex(b"one\n").as_str())
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = write(&f.resolver, &req(&p, "two\n", false)).unwrap();
    assert!(!r.created && r.mtime_ns > 0);
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(names(&f.root), ["a.txt"]);
}

#[test]
fn parents_are_created_only_when_asked() {
    let f = fixture();
    let p = f.root.join("x/y/z.txt");
    assert_eq!(write_code(&f, &p, false), ErrorCode::NotFound);
    let err = write(&f.resolver, &req(&p, "z", false)).unwrap_err();
    assert!(err.message.contains("create_parents"), "{}", err.message);
    write(&f.resolver, &req(&p, "z", true)).unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "z");
}

#[test]
fn parents_are_not_created_through_a_link_out() {
    let f = fixture();
    symlink(&f.outside, f.root.join("out")).unwrap();
    symlink("../outside", f.root.join("relout")).unwrap();
    for name in ["out/new/f.txt", "relout/new/f.txt", "../outside/new/f.txt"] {
        assert_eq!(
            write_code(&f, &f.root.join(name), true),
            ErrorCode::OutsideSandbox,
            "{name}"
        );
    }
    assert!(names(&f.outside).is_empty());
}

#[test]
fn a_symlink_inside_the_root_writes_its_target() {
    let f = fixture();
    std::fs::create_dir(f.root.join("sub")).unwrap();
    std::fs::write(f.root.join("sub/t.txt"), "old").unwrap();
    symlink("sub/t.txt", f.root.join("link")).unwrap();
    let r = write(&f.resolver, &req(&f.root.join("link"), "new", false)).unwrap();
    assert!(!r.created);
    assert_eq!(
        std::fs::read_to_string(f.root.join("sub/t.txt")).unwrap(),
        "new"
    );
    assert!(
        std::fs::symlink_metadata(f.root.join("link"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(names(&f.root.join("sub")), ["t.txt"]);
}

#[test]
fn writes_through_links_out_change_nothing_outside() {
    let f = fixture();
    let secret = f.outside.join("secret");
    std::fs::write(&secret, "keep").unwrap();
    symlink(&secret, f.root.join("abs")).unwrap();
    symlink("../outside/secret", f.root.join("rel")).unwrap();
    symlink(f.outside.join("fresh"), f.root.join("dangling")).unwrap();
    let magic = format!("/proc/self/root{}", secret.display());
    symlink(&magic, f.root.join("magic")).unwrap();
    for name in ["abs", "rel", "dangling", "magic", "../outside/secret"] {
        assert_eq!(
            write_code(&f, &f.root.join(name), false),
            ErrorCode::OutsideSandbox,
            "{name}"
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep");
    assert_eq!(names(&f.outside), ["secret"]);
    assert_eq!(names(&f.root), ["abs", "dangling", "magic", "rel"]);
}

#[test]
fn hard_links_are_refused() {
    let f = fixture();
    let secret = f.outside.join("secret");
    std::fs::write(&secret, "keep").unwrap();
    std::fs::hard_link(&secret, f.root.join("hl")).unwrap();
    let err = write(&f.resolver, &req(&f.root.join("hl"), "x", false)).unwrap_err();
    assert_eq!(err.code, ErrorCode::PermissionDenied);
    assert!(err.message.contains("hard links"), "{}", err.message);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep");
    assert_eq!(names(&f.root), ["hl"]);
}

#[test]
fn non_files_and_oversized_content_are_refused() {
    let f = fixture();
    std::fs::create_dir(f.root.join("d")).unwrap();
    assert_eq!(
        write_code(&f, &f.root.join("d"), false),
        ErrorCode::IsADirectory
    );
    let fifo = f.root.join("fifo");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
    assert_eq!(write_code(&f, &fifo, false), ErrorCode::NotARegularFile);
    let big = WriteRequest {
        path: s(&f.root.join("big")),
        content: vec![b'a'; MAX_WRITE_BYTES + 1],
        create_parents: false,
    };
    assert_eq!(
        write(&f.resolver, &big).unwrap_err().code,
        ErrorCode::TooLarge
    );
    assert_eq!(
        write_code(&f, Path::new("relative.txt"), false),
        ErrorCode::InvalidRequest
    );
}

#[test]
fn a_failed_rename_leaves_no_temp_file() {
    let f = fixture();
    let dir = f.root.join("full");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("inner"), "x").unwrap();
    let entry = f.resolver.entry(&dir).unwrap();
    assert!(replace_atomically(&entry, &dir, b"data", None).is_err());
    assert_eq!(names(&f.root), ["full"]);
    assert_eq!(names(&dir), ["inner"]);
}
