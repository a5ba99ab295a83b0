use std::os::unix::fs::symlink;
use std::sync::mpsc;

use super::*;
use crate::error::ErrorCode;
use crate::fsops::testutil::{Fixture, fixture, s};

fn req(path: &Path, offset: u64, limit: u64) -> ReadRequest {
    ReadRequest {
        path: s(path),
        offset,
        limit,
        raw: false,
    }
}

fn read_code(f: &Fixture, path: &Path) -> ErrorCode {
    read(&f.resolver, &req(path, 0, 0)).unwrap_err().code
}

#[test]
fn whole_file_comes_back_as_numbered_lines() {
    let f = fixture();
    let p = f.root.join("a.txt");
    std::fs::write(&p, "alpha\nbeta\r\ngamma").unwrap();
    let r = read(&f.resolver, &req(&p, 0, 0)).unwrap();
    assert_eq!(r.content, "     1\talpha\n     2\tbeta\n     3\tgamma\n");
    assert_eq!((r.first_line, r.lines_returned, r.total_lines), (1, 3, 3));
    assert!(!r.partial);
    assert_eq!(r.size_bytes, 17);
    assert_eq!(r.sha256, crate::fsops::sha256_hex(b"alpha\nbeta\r\ngamma"));
    assert!(r.mtime_ns > 0);
}

#[test]
fn offset_and_limit_page_and_mark_partial() {
    let f = fixture();
    let p = f.root.join("n.txt");
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&p, text).unwrap();
    let r = read(&f.resolver, &req(&p, 3, 2)).unwrap();
    assert_eq!(r.content, "     3\tline 3\n     4\tline 4\n");
    assert_eq!((r.first_line, r.lines_returned, r.total_lines), (3, 2, 10));
    assert!(r.partial);
    let past = read(&f.resolver, &req(&p, 50, 0)).unwrap();
    assert_eq!((past.content.as_str(), past.total_lines), ("", 10));
}

#[test]
fn long_lines_are_cut_and_the_response_is_capped() {
    let f = fixture();
    let p = f.root.join("long.txt");
    std::fs::write(&p, format!("{}\nshort\n", "é".repeat(3000))).unwrap();
    let r = read(&f.resolver, &req(&p, 0, 0)).unwrap();
    let first = r.content.lines().next().unwrap();
    assert_eq!(first.chars().count(), MAX_READ_LINE_CHARS + 7);
    assert!(!r.partial);
    let big = f.root.join("big.txt");
    std::fs::write(&big, format!("{}\n", "x".repeat(1999)).repeat(500)).unwrap();
    let r = read(&f.resolver, &req(&big, 0, 100_000)).unwrap();
    assert!(r.partial);
    assert!(r.content.len() <= MAX_READ_RESPONSE_BYTES);
    assert!(r.lines_returned > 100 && r.lines_returned < 500);
    assert_eq!(r.total_lines, 500);
}

#[test]
fn empty_file_has_no_lines() {
    let f = fixture();
    let p = f.root.join("empty");
    std::fs::write(&p, "").unwrap();
    let r = read(&f.resolver, &req(&p, 0, 0)).unwrap();
    assert_eq!(
        (r.content.as_str(), r.total_lines, r.lines_returned),
        ("", 0, 0)
    );
    assert!(!r.partial && r.binary_description.is_empty());
}

#[test]
fn binary_files_are_described_not_shown() {
    let f = fixture();
    let p = f.root.join("img.png");
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(&[0u8; 100]);
    std::fs::write(&p, &png).unwrap();
    let r = read(&f.resolver, &req(&p, 0, 0)).unwrap();
    assert_eq!(r.binary_description, "binary file, 108 bytes (PNG image)");
    assert!(r.content.is_empty());
    let noise: Vec<u8> = (0..4096u32)
        .map(|i| (i * 7919 % 251) as u8 | 0x80)
        .collect();
    assert!(is_binary(&noise, true));
}

#[test]
fn mostly_text_with_a_few_invalid_bytes_is_text() {
    let mut latin1 = b"caf\xe9 cr\xe8me br\xfbl\xe9e, ".repeat(20);
    latin1.extend_from_slice(b"plain ascii tail ".repeat(40).as_slice());
    assert!(!is_binary(&latin1, true));
    let mut cut = "ok ".repeat(10).into_bytes();
    cut.extend_from_slice(&"é".as_bytes()[..1]);
    assert!(!is_binary(&cut, false));
}

#[test]
fn fifo_without_writer_is_refused_promptly() {
    let f = fixture();
    let p = f.root.join("fifo");
    nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let (tx, rx) = mpsc::channel();
    let resolver = f.resolver;
    let path = s(&p);
    // Guard against a hang only; no timing is asserted.
    std::thread::spawn(move || {
        let _ = tx.send(read(
            &resolver,
            &ReadRequest {
                path,
                ..Default::default()
            },
        ));
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
    assert_eq!(got.unwrap_err().code, ErrorCode::NotARegularFile);
}

#[test]
fn sockets_directories_and_devices_are_refused() {
    let f = fixture();
    let sock = f.root.join("sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    assert_eq!(read_code(&f, &sock), ErrorCode::NotARegularFile);
    std::fs::create_dir(f.root.join("dir")).unwrap();
    assert_eq!(read_code(&f, &f.root.join("dir")), ErrorCode::IsADirectory);
    assert_eq!(read_code(&f, &f.root), ErrorCode::IsADirectory);
    symlink("/dev/null", f.root.join("null")).unwrap();
    assert_eq!(
        read_code(&f, &f.root.join("null")),
        ErrorCode::OutsideSandbox
    );
}

#[test]
fn symlinks_inside_the_root_are_followed() {
    let f = fixture();
    std::fs::create_dir(f.root.join("sub")).unwrap();
    std::fs::write(f.root.join("sub/t.txt"), "inside\n").unwrap();
    symlink("sub/t.txt", f.root.join("rel")).unwrap();
    symlink(f.root.join("sub/t.txt"), f.root.join("abs")).unwrap();
    symlink("sub", f.root.join("dirlink")).unwrap();
    symlink("../rel", f.root.join("sub/up")).unwrap();
    for name in ["rel", "abs", "dirlink/t.txt", "sub/up", "sub/../sub/t.txt"] {
        let r = read(&f.resolver, &req(&f.root.join(name), 0, 0)).unwrap();
        assert_eq!(r.content, "     1\tinside\n", "{name}");
    }
}

#[test]
fn every_way_out_is_refused() {
    let f = fixture();
    let secret = f.outside.join("secret");
    std::fs::write(&secret, "secret\n").unwrap();
    symlink(&secret, f.root.join("abs_out")).unwrap();
    symlink("../outside/secret", f.root.join("rel_out")).unwrap();
    symlink(&f.outside, f.root.join("dir_out")).unwrap();
    symlink("../outside", f.root.join("reldir_out")).unwrap();
    let magic = format!("/proc/self/root{}", secret.display());
    symlink(&magic, f.root.join("magic")).unwrap();
    let magic_dir = format!("/proc/self/root{}", f.outside.display());
    symlink(&magic_dir, f.root.join("magic_dir")).unwrap();
    symlink("loop", f.root.join("loop")).unwrap();
    let escapes = [
        "abs_out",
        "rel_out",
        "dir_out/secret",
        "reldir_out/secret",
        "magic",
        "magic_dir/secret",
        "../outside/secret",
        "loop",
    ];
    for name in escapes {
        let p = f.root.join(name);
        assert_eq!(read_code(&f, &p), ErrorCode::OutsideSandbox, "{name}");
    }
    assert_eq!(read_code(&f, &secret), ErrorCode::OutsideSandbox);
}

#[test]
fn bad_paths_are_refused() {
    let f = fixture();
    assert_eq!(
        read_code(&f, Path::new("rel/a.txt")),
        ErrorCode::InvalidRequest
    );
    let long = f.root.join("a".repeat(5000));
    assert_eq!(read_code(&f, &long), ErrorCode::TooLarge);
    assert_eq!(read_code(&f, &f.root.join("missing")), ErrorCode::NotFound);
    let sibling = format!("{}x/a", f.root.display());
    assert_eq!(
        read_code(&f, Path::new(&sibling)),
        ErrorCode::OutsideSandbox
    );
}

#[test]
fn line_numbers_are_right_aligned_in_six_columns_and_grow_beyond() {
    let mut out = String::new();
    super::super::numbered(&mut out, 7, "a");
    super::super::numbered(&mut out, 123_456, "b");
    super::super::numbered(&mut out, 12_345_678, "");
    assert_eq!(out, "     7\ta\n123456\tb\n12345678\t\n");
}

#[test]
fn a_raw_read_returns_the_bytes_whole_and_refuses_past_the_cap() {
    let f = fixture();
    let p = f.root.join("pic.png");
    let bytes = b"\x89PNG\r\n\x1a\n\0\0binary";
    std::fs::write(&p, bytes).unwrap();
    let raw = |path: &Path| ReadRequest {
        raw: true,
        ..req(path, 0, 0)
    };
    let r = read(&f.resolver, &raw(&p)).unwrap();
    assert_eq!(r.raw_content, bytes);
    assert_eq!(r.size_bytes, bytes.len() as u64);
    assert_eq!(r.sha256, crate::fsops::sha256_hex(bytes));
    assert!(r.content.is_empty() && r.binary_description.is_empty());
    let big = f.root.join("big.pdf");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(MAX_READ_RAW_BYTES + 1).unwrap();
    let err = read(&f.resolver, &raw(&big)).unwrap_err();
    assert_eq!(err.code, ErrorCode::TooLarge, "{err:?}");
    let paged = ReadRequest {
        offset: 2,
        ..raw(&p)
    };
    assert_eq!(
        read(&f.resolver, &paged).unwrap_err().code,
        ErrorCode::InvalidRequest
    );
}
