//! Tests of [`super`]: the path rules as pure functions, the owner rules over a made-up
//! stat, and the opening over real directories.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;

use super::*;

#[test]
fn system_directories_and_everything_in_them_are_refused() {
    for p in [
        "/etc",
        "/etc/cron.d",
        "/var/spool/cron",
        "/var/tmp",
        "/boot",
        "/srv",
        "/srv/www",
        "/sys/fs/cgroup/user.slice/user-1000.slice",
        "/proc/self",
        "/dev/shm",
        "/run/user/1000",
        "/usr/local/src",
        "/lib",
        "/lib64/x",
        "/libx32",
        "/bin",
        "/sbin",
        "/opt/app",
        "/snap/x",
        "/tmp",
        "/tmp/x",
    ] {
        let why = system_dir(Path::new(p)).unwrap_or_else(|| panic!("{p} accepted"));
        assert!(why.contains("system directory"), "{p}: {why}");
    }
    for p in ["/work/p", "/home/u/notes", "/data/x", "/mnt/x"] {
        assert_eq!(system_dir(Path::new(p)), None, "{p}");
    }
}

#[test]
fn homes_their_ancestors_and_their_dot_directories_are_refused() {
    let homes = [PathBuf::from("/home/u")];
    for p in [
        "/home/u",
        "/home",
        "/root",
        "/root/.ssh",
        "/home/u/.ssh",
        "/home/u/.config",
        "/home/u/.config/systemd/user",
        "/home/u/.local/bin",
        "/home/u/.gnupg",
    ] {
        assert!(home_dir(Path::new(p), &homes).is_some(), "{p} accepted");
    }
    for p in [
        "/home/u/notes",
        "/home/u/src/.hidden",
        "/home/uv/.ssh",
        "/root2",
    ] {
        assert_eq!(home_dir(Path::new(p), &homes), None, "{p}");
    }
}

fn fake(entries: &[(&str, u32, u32)]) -> impl FnMut(&Path) -> io::Result<Stat> {
    let map: HashMap<PathBuf, Stat> = entries
        .iter()
        .map(|&(p, uid, mode)| (PathBuf::from(p), Stat { uid, mode }))
        .collect();
    move |p| {
        map.get(p)
            .copied()
            .ok_or_else(|| io::Error::other("no such entry"))
    }
}

const SANE: &[(&str, u32, u32)] = &[
    ("/", 0, 0o755),
    ("/home", 0, 0o755),
    ("/home/u", 1000, 0o700),
];

#[test]
fn a_directory_of_the_workspace_owner_below_safe_ancestors_is_accepted() {
    let own = Stat {
        uid: 1000,
        mode: 0o40755,
    };
    owner_checks(Path::new("/home/u/notes"), own, 1000, fake(SANE)).unwrap();
    let root = Stat {
        uid: 0,
        mode: 0o40700,
    };
    owner_checks(Path::new("/data"), root, 0, fake(SANE)).unwrap();
}

#[test]
fn another_owner_root_or_a_writable_directory_is_refused() {
    let dir = Path::new("/home/u/notes");
    for (own, owner, why) in [
        (
            Stat {
                uid: 0,
                mode: 0o40755,
            },
            1000,
            "owned by uid 0",
        ),
        (
            Stat {
                uid: 1001,
                mode: 0o40755,
            },
            1000,
            "owned by uid 1001",
        ),
        (
            Stat {
                uid: 1000,
                mode: 0o40775,
            },
            1000,
            "group or others may write",
        ),
        (
            Stat {
                uid: 1000,
                mode: 0o40757,
            },
            1000,
            "group or others may write",
        ),
    ] {
        let err = owner_checks(dir, own, owner, fake(SANE)).unwrap_err();
        assert!(err.contains(why), "{own:?}: {err}");
    }
}

#[test]
fn an_ancestor_someone_else_could_change_is_refused() {
    let own = Stat {
        uid: 1000,
        mode: 0o40700,
    };
    let dir = Path::new("/home/u/notes");
    let other = [
        ("/", 0, 0o755),
        ("/home", 1001, 0o755),
        ("/home/u", 1000, 0o700),
    ];
    let err = owner_checks(dir, own, 1000, fake(&other)).unwrap_err();
    assert!(err.contains("ancestor /home is owned by uid 1001"), "{err}");
    let shared = [
        ("/", 0, 0o755),
        ("/home", 0, 0o1777),
        ("/home/u", 1000, 0o700),
    ];
    let err = owner_checks(dir, own, 1000, fake(&shared)).unwrap_err();
    assert!(err.contains("ancestor /home may be written"), "{err}");
    let group = [
        ("/", 0, 0o755),
        ("/home", 0, 0o755),
        ("/home/u", 1000, 0o770),
    ];
    let err = owner_checks(dir, own, 1000, fake(&group)).unwrap_err();
    assert!(err.contains("ancestor /home/u may be written"), "{err}");
}

/// A fixture below the build directory (not /tmp, a system directory here).
fn fixture() -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/unit-fixtures");
    std::fs::create_dir_all(&root).unwrap();
    let dir = tempfile::tempdir_in(root.canonicalize().unwrap()).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

#[test]
fn opening_follows_no_link_and_checks_the_opened_directory() {
    let dir = fixture();
    let me = nix::unistd::geteuid().as_raw();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ancestors_ok = dir.path().ancestors().skip(1).all(|a| {
        let m = std::fs::metadata(a).unwrap();
        (m.uid() == 0 || m.uid() == me) && m.mode() & 0o022 == 0
    });
    if ancestors_ok {
        let (_, (uid, _)) = open_checked(&real, me, &[]).unwrap();
        assert_eq!(uid, me);
        let err = open_checked(&real, me + 1, &[]).unwrap_err();
        assert!(err.contains("not by the workspace's owner"), "{err}");
    }
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let err = open_checked(&link, me, &[]).unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    let err = open_checked(&link.join("sub"), me, &[]).unwrap_err();
    assert!(
        err.contains("symbolic link") || err.contains("does not exist"),
        "{err}"
    );
    std::fs::create_dir(real.join("sub")).unwrap();
    let err = open_checked(&link.join("sub"), me, &[]).unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    std::fs::write(dir.path().join("file"), "").unwrap();
    let err = open_checked(&dir.path().join("file"), me, &[]).unwrap_err();
    assert!(err.contains("not a directory"), "{err}");
    let err = open_checked(Path::new("/etc"), 0, &[]).unwrap_err();
    assert!(err.contains("system directory /etc"), "{err}");
}
