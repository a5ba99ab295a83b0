//! Tests of [`super`]: links are never followed, and a directory the session made
//! unreadable (as the walking user) is walked after all, while another user's is not.

use std::os::unix::fs::PermissionsExt;

use super::*;
use nix::sys::wait::WaitStatus;

#[test]
fn walks_everything_below_and_never_follows_links() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("a/b/c")).unwrap();
    std::fs::write(r.join("a/b/c/deep"), "x").unwrap();
    std::fs::write(r.join("top"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path(), r.join("a/link")).unwrap();
    let mut seen = Vec::new();
    let counts = walk(r, |e| seen.push((e.rel.to_path_buf(), e.kind()))).unwrap();
    assert_eq!(
        counts,
        Counts {
            dirs: 4,
            files: 2,
            unreadable_dirs: 0,
            reopened_dirs: 0,
        }
    );
    assert!(seen.contains(&("a/b/c/deep".into(), libc::S_IFREG)));
    assert!(seen.contains(&("a/link".into(), libc::S_IFLNK)));
    assert!(!seen.iter().any(|(p, _)| p.ends_with("secret")));
}

#[test]
fn a_symlinked_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/etc", dir.path().join("ws")).unwrap();
    assert!(walk(&dir.path().join("ws"), |_| {}).is_err());
}
/// The user the walks below run as when the tests run as root (CAP_DAC_OVERRIDE never
/// meets EACCES): nobody, as the session's user would be any unprivileged one.
pub(crate) const NOBODY: u32 = 65534;

pub(crate) fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

pub(crate) fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Gives the tree at `p` to [`NOBODY`] (when root), before its modes are set: a chown
/// clears setuid bits.
pub(crate) fn give_to_walker(p: &Path) {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    std::os::unix::fs::lchown(p, Some(NOBODY), Some(NOBODY)).unwrap();
    if std::fs::symlink_metadata(p).unwrap().is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            give_to_walker(&e.unwrap().path());
        }
    }
}

/// Runs `f` in a forked child as the walking user: [`NOBODY`] with no capabilities when
/// the tests run as root, else this user. Its asserts fail the child.
pub(crate) fn as_walker(f: impl FnOnce()) -> WaitStatus {
    crate::confine::in_child(|| {
        if nix::unistd::geteuid().is_root() {
            let (u, g) = (
                nix::unistd::Uid::from_raw(NOBODY),
                nix::unistd::Gid::from_raw(NOBODY),
            );
            nix::unistd::setgroups(&[]).unwrap();
            nix::unistd::setresgid(g, g, g).unwrap();
            // Leaving uid 0 for good drops every capability.
            nix::unistd::setresuid(u, u, u).unwrap();
        }
        f();
        0
    })
}

/// A workspace (below a temp dir the walker may enter) holding `locked/` (mode 000, a file
/// and a mode 311 `inner/` with a file in it), `noexec/` (mode 600: listable, not
/// searchable) and `open/`. Modes are set by the caller.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    std::fs::create_dir_all(ws.join("locked/inner")).unwrap();
    std::fs::write(ws.join("locked/file"), "x").unwrap();
    std::fs::write(ws.join("locked/inner/deep"), "x").unwrap();
    std::fs::create_dir(ws.join("noexec")).unwrap();
    std::fs::write(ws.join("noexec/f"), "x").unwrap();
    std::fs::create_dir(ws.join("open")).unwrap();
    give_to_walker(base.path());
    (base, ws)
}

fn lock(ws: &Path) {
    chmod(&ws.join("locked/inner"), 0o311);
    chmod(&ws.join("locked"), 0o000);
    chmod(&ws.join("noexec"), 0o600);
}

#[test]
fn directories_the_user_made_unreadable_are_walked_and_made_readable_again() {
    let (_base, ws) = workspace();
    lock(&ws);
    // The workspace root itself too: the session may chmod it.
    chmod(&ws, 0o000);
    // Another user's unreadable directory (only root can make one): skipped as before.
    let foreign = nix::unistd::geteuid().is_root().then(|| {
        let f = ws.join("foreign");
        std::fs::create_dir(&f).unwrap();
        std::fs::write(f.join("hidden"), "x").unwrap();
        std::os::unix::fs::lchown(&f, Some(NOBODY - 1), Some(NOBODY - 1)).unwrap();
        chmod(&f, 0o000);
        f
    });
    let status = as_walker(|| {
        let mut seen = Vec::new();
        let counts = walk(&ws, |e| seen.push(e.rel.to_path_buf())).unwrap();
        for p in ["locked/file", "locked/inner/deep", "noexec/f", "open"] {
            assert!(seen.contains(&PathBuf::from(p)), "{p} not walked: {seen:?}");
        }
        assert!(!seen.contains(&PathBuf::from("foreign/hidden")));
        assert_eq!(counts.reopened_dirs, 4, "{counts:?}");
        assert_eq!(counts.unreadable_dirs, u64::from(foreign.is_some()));
    });
    assert_eq!(status, WaitStatus::Exited(status.pid().unwrap(), 0));
    // What the user sees afterwards: their directories are theirs to open again, with
    // the bits they had otherwise kept.
    assert_eq!(mode(&ws), 0o700);
    assert_eq!(mode(&ws.join("locked")), 0o700);
    assert_eq!(mode(&ws.join("locked/inner")), 0o711);
    assert_eq!(mode(&ws.join("noexec")), 0o700);
    assert_eq!(
        mode(&ws.join("open")),
        0o755,
        "a readable one is left alone"
    );
    if let Some(f) = foreign {
        assert_eq!(mode(&f), 0o000, "another user's is never changed");
    }
}

#[test]
fn a_setuid_file_in_a_directory_made_unreadable_loses_its_bit() {
    let (_base, ws) = workspace();
    let suid = ws.join("locked/inner/suid");
    std::fs::write(&suid, "#!/bin/sh\n").unwrap();
    give_to_walker(&suid);
    chmod(&suid, 0o4755);
    lock(&ws);
    let status = as_walker(|| {
        let swept =
            super::super::privbits::sweep(&ws, super::super::privbits::Keep::Nothing).unwrap();
        assert_eq!(swept.stripped, [PathBuf::from("locked/inner/suid")]);
        assert_eq!(swept.counts.reopened_dirs, 3, "{:?}", swept.counts);
    });
    assert_eq!(status, WaitStatus::Exited(status.pid().unwrap(), 0));
    assert_eq!(mode(&suid), 0o755);
}
