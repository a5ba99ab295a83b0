//! Wrappers looked through, left unresolved, or plain.

use crate::permissions::bash_rules::{Part, split};

/// The innermost command of every part, rendered (U+0000 for unknown words).
fn inner(cmd: &str) -> Vec<String> {
    split(cmd)
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
        .iter()
        .map(Part::rendered)
        .collect()
}

/// Issue 9: wrappers that evaded deny rules now expose the command they run.
#[test]
fn wrapped_commands_are_exposed() {
    for cmd in [
        "exec -a x rm x",
        "exec -cl rm x",
        "exec -ax rm x",
        "setsid rm x",
        "setsid -fw rm x",
        "setsid --fork --wa rm x",
        "flock /tmp/l rm x",
        "flock -x -w 5 /tmp/l rm x",
        "flock --nb /tmp/l rm x",
        "flock /tmp/l -c 'rm x'",
        "ionice -c 3 rm x",
        "ionice -c3 -n7 -t rm x",
        "taskset 0x1 rm x",
        "taskset -c 0 rm x",
        "chrt -f 10 rm x",
        "chrt 0 rm x",
        "chrt --idle 0 rm x",
        "nice -5 rm x",
        "nice --adj=5 rm x",
        "nice -n5 rm x",
        "timeout --sig=KILL 5 rm x",
        "timeout -k5 -sKILL 5 rm x",
        "timeout --fore 5 rm x",
        "env -i rm x",
        "env -u A rm x",
        "env - A=1 rm x",
        "env --ignore-e rm x",
        "stdbuf -o0 -eL rm x",
        "nohup rm x",
        "command rm x",
        "command -p rm x",
        "time -p rm x",
        "sudo rm x",
        "sudo -u root -E rm x",
        "sudo --user=root A=1 rm x",
        "doas -u root rm x",
        "unshare -r rm x",
        "unshare --mount --net rm x",
        "eval 'rm x'",
        "eval rm x",
        "eval -- rm x",
        "trap 'rm x' EXIT",
        "trap -- 'rm x' INT TERM",
        "find . -exec rm x \\;",
        "find . -name a -ok rm x ';' -print",
        "bash -c 'rm x'",
        "sh -euc 'rm x'",
        "timeout 5 env -i nice -n 1 setsid bash -c 'exec -a y rm x'",
    ] {
        assert!(
            inner(cmd).iter().any(|p| p == "rm x"),
            "{cmd}: {:?}",
            inner(cmd)
        );
    }
    assert_eq!(
        inner("find . -execdir rm {} +"),
        ["rm \u{0}", "find . -execdir rm {} +"]
    );
    assert_eq!(
        inner("find . | xargs -I{} rm -- {}"),
        ["find .", "rm -- \u{0}"]
    );
    assert_eq!(inner("xargs -i rm {}"), ["rm \u{0}"]);
}

/// Forms that run nothing else stay plain commands.
#[test]
fn forms_that_run_nothing_else() {
    for cmd in [
        "command -v rm",
        "ionice -p 1",
        "taskset -p 1",
        "chrt -p 1",
        "trap - INT",
        "trap -l",
        "trap INT",
        "flock 9",
        "xargs",
        "eval",
        "env",
        "alias",
        "find . -name x",
    ] {
        let parts = split(cmd).unwrap();
        assert_eq!(parts.len(), 1, "{cmd}");
        assert!(parts[0].wrappers.is_empty(), "{cmd}");
        assert!(parts[0].unresolved.is_none(), "{cmd}");
    }
}

/// A wrapper this code does not follow: never allowed, and deny rules see every tail
/// and every script-like argument.
#[test]
fn unfollowed_wrappers_are_unresolved_and_searched() {
    for cmd in [
        "strace -f rm x",
        "watch -n 1 rm x",
        "su -c 'rm x'",
        "su root -c 'rm -f x; ls'",
        "timeout --bogus 5 rm x",
        "timeout $T rm x",
        "env -S 'rm x'",
        "env --chdir=/ rm x",
        "env -C sub rm x",
        "sudo -s rm x",
        "sudo -i 'rm x'",
        "bash -l -c 'rm x'",
        "bash --rcfile y -c 'rm x'",
        "setsid $X rm x",
        "xargs --process-slot-var=P rm x",
        "eval rm $X",
        "find . $X rm x ;",
        "xargs -I{} sh -c 'rm {}'",
        "find . -exec sh -c 'rm {}' \\;",
        "hash -p /bin/rm y; y x",
        "'rm' x",
    ] {
        let parts = split(cmd).unwrap();
        let part = parts
            .iter()
            .find(|p| p.unresolved.is_some())
            .unwrap_or_else(|| panic!("{cmd}: nothing unresolved"));
        assert!(
            part.layers()
                .iter()
                .any(|l| l.starts_with("rm ") || l.starts_with("rm\u{1}")),
            "{cmd}: {:?}",
            part.layers()
        );
    }
    for cmd in [
        "unshare -r",
        "alias y='rm x'",
        "alias g=git",
        "trap \"$A\" EXIT",
        "env --ign rm x",
        "flock /tmp/l -c \"$C\"",
    ] {
        assert!(split(cmd).unwrap()[0].unresolved.is_some(), "{cmd}");
    }
    assert!(
        split("PATH=. bash -c 'a; b'")
            .unwrap()
            .iter()
            .all(|p| p.unresolved.is_some())
    );
}

#[test]
fn wrappers_named_by_other_paths_are_unresolved() {
    for cmd in [
        "./timeout 5 rm x",
        "/usr/bin/../bin/timeout 5 rm x",
        "/opt/bin/env rm x",
        "bin/eval rm x",
    ] {
        let p = split(cmd).unwrap();
        assert!(p[0].unresolved.is_some(), "{cmd}");
        assert!(p[0].layers().contains(&"rm x".to_string()), "{cmd}");
    }
    assert!(
        split("/usr/bin/timeout 5 rm x").unwrap()[0]
            .unresolved
            .is_none()
    );
    assert!(split("./build.sh x").unwrap()[0].unresolved.is_none());
}

#[test]
fn commands_named_by_path_are_seen_by_file_name() {
    let p = split("/bin/rm x").unwrap();
    assert_eq!(p[0].layers(), ["/bin/rm x", "rm x"]);
    let p = split("./node_modules/.bin/rm x").unwrap();
    assert!(p[0].layers().contains(&"rm x".to_string()));
}

/// Builtins that evaluate a quoted argument as a subscript run the commands inside it
/// (found by the differential test): those forms are unresolved; the plain forms are not.
#[test]
fn builtins_evaluating_a_subscript_are_unresolved() {
    for cmd in [
        "test -v 'a[$(touch p)]'",
        "[ -v 'a[$(touch p)]' ]",
        "[ ! -R \"$n\" ]",
        "[ \"$op\" \"$x\" ]",
        "printf -v 'a[$(touch p)]' x",
        "printf '-va[$(touch p)]' x",
        "read 'a[$(touch p)]'",
        "unset 'a[$(touch p)]'",
        "declare 'a[$(touch p)]=1'",
        "typeset -n x='a[$(touch p)]'",
        "declare -i x",
        "local -ri x=1",
        "export \"$n\"=1",
        "let 'a[$(touch p)]'",
        "let x",
        "wait -p 'a[$(touch p)]'",
        "builtin printf -v 'a[$(touch p)]' x",
    ] {
        let parts = split(cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        assert!(parts.iter().any(|p| p.unresolved.is_some()), "{cmd}");
    }
    for cmd in [
        "test -f x",
        "[ -v name ]",
        "[ \"$a\" = \"$b\" ]",
        "[ -n \"$x\" ]",
        "printf '%s\\n' \"$x\"",
        "printf -v out '%s' x",
        "read -r line",
        "declare -a list",
        "export A=\"$(pwd)\"",
        "local x=1",
        "unset x",
    ] {
        let parts = split(cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        assert!(parts.iter().all(|p| p.unresolved.is_none()), "{cmd}");
    }
}
