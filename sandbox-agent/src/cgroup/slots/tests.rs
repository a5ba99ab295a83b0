use super::*;
use crate::cgroup::SessionLimits;
use crate::cgroup::layout::Layout;
use crate::cgroup::session::remove_dir_tree;
use crate::cgroup::test_support::{
    TestCgroup, hopper_script, parent_name, processes_with, spawn_in,
};

/// Starts a pid hopper in a slot, kills the slot, and checks that nothing survives: not
/// in the slot, not anywhere on the host.
fn hopper_dies(slots: &Arc<ExecSlots>, tag: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let script = hopper_script(tmp.path(), tag);
    let lease = slots.acquire().unwrap();
    let mut first = spawn_in(lease.entry_fd(), &script);
    // Wait until the chain has moved past the first copy; from then on it always has a
    // live member (each copy forks the next before it exits).
    let first_pid = first.id() as i32;
    while processes_with(tag).iter().all(|p| *p == first_pid) {
        std::thread::yield_now();
    }
    assert!(lease.kill_all(), "slot did not empty");
    let _ = first.wait();
    assert_eq!(lease.members(), Some(vec![]));
    assert!(processes_with(tag).is_empty(), "hopper survived");
    drop(lease);
    assert_eq!(slots.lock().len(), 2, "an empty slot goes back to the pool");
}

#[test]
fn cgroup_kill_ends_a_fork_and_exit_hopper() {
    let Some(t) = TestCgroup::new("slots-kill", &SessionLimits::default()) else {
        return;
    };
    let Some((dir, method)) = t.cg.exec_dir() else {
        eprintln!("skipping: no per-command cgroups here");
        return;
    };
    let cfg = ExecCgroupConfig {
        dir: dir.to_path_buf(),
        kill: method,
        slots: 2,
    };
    let slots = Arc::new(ExecSlots::prepare(&cfg, 2).unwrap());
    hopper_dies(&slots, &format!("k{}", std::process::id()));
    drop(slots);
    t.remove_and_check();
}

#[test]
fn the_v1_freezer_ends_a_fork_and_exit_hopper() {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let layout = Layout::detect().unwrap();
    let Some(h) = layout.v1("freezer") else {
        eprintln!("skipping: no v1 freezer here");
        return;
    };
    let parent = h.own_dir().join(parent_name("freezer"));
    let dir = parent.join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = ExecCgroupConfig {
        dir: dir.clone(),
        kill: KillMethod::Freezer,
        slots: 2,
    };
    let slots = Arc::new(ExecSlots::prepare(&cfg, 2).unwrap());
    hopper_dies(&slots, &format!("f{}", std::process::id()));
    drop(slots);
    remove_dir_tree(&parent).unwrap();
    assert!(!parent.exists());
}

#[test]
fn every_slot_busy_means_none_to_acquire() {
    let Some(t) = TestCgroup::new("slots-busy", &SessionLimits::default()) else {
        return;
    };
    let Some((dir, method)) = t.cg.exec_dir() else {
        return;
    };
    let cfg = ExecCgroupConfig {
        dir: dir.to_path_buf(),
        kill: method,
        slots: 2,
    };
    let slots = Arc::new(ExecSlots::prepare(&cfg, 1).unwrap());
    let held = slots.acquire().unwrap();
    assert!(slots.acquire().is_none());
    drop(held);
    assert!(slots.acquire().is_some());
    drop(slots);
    t.remove_and_check();
}

/// Reads a child's stdout to the end and reaps it: (output, exit code).
fn finish(child: crate::exec::clone_into::Spawned) -> (String, i32) {
    use std::io::Read;
    let mut out = String::new();
    std::fs::File::from(child.stdout.unwrap())
        .read_to_string(&mut out)
        .unwrap();
    let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child.pid), None).unwrap();
    let nix::sys::wait::WaitStatus::Exited(_, code) = status else {
        panic!("{status:?}");
    };
    (out, code)
}

/// clone3(CLONE_INTO_CGROUP): the command is born in its v2 slot (no move), with its
/// streams, directory and environment, and a failed exec comes back as its errno.
#[test]
fn a_command_is_born_in_its_slot() {
    use crate::exec::clone_into::{self, CloneError, Prepared};
    let Some(t) = TestCgroup::new("slots-clone3", &SessionLimits::default()) else {
        return;
    };
    let Some((dir, KillMethod::CgroupKill)) = t.cg.exec_dir() else {
        eprintln!("skipping: no v2 per-command cgroups here");
        return;
    };
    let cfg = ExecCgroupConfig {
        dir: dir.to_path_buf(),
        kill: KillMethod::CgroupKill,
        slots: 1,
    };
    let slots = Arc::new(ExecSlots::prepare(&cfg, 1).unwrap());
    let lease = slots.acquire().unwrap();
    let argv = ["sh", "-c", "cat /proc/self/cgroup; pwd; echo $X"].map(String::from);
    let env = [
        ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ("X".into(), "y".into()),
    ];
    let what = Prepared::new(&argv, &env, Path::new("/tmp"), false).unwrap();
    let child = match clone_into::spawn(lease.cgroup_fd().unwrap(), &what, &|| Ok(())) {
        Ok(c) => c,
        Err(CloneError::Unsupported(e)) => {
            eprintln!("skipping: clone3 into a cgroup refused here: {e}");
            return;
        }
        Err(CloneError::Failed(e)) => panic!("{e}"),
    };
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    let slot_rel = dir.join(lease.name());
    let v2 = out.lines().find(|l| l.starts_with("0::")).unwrap();
    assert!(
        slot_rel.ends_with(v2.trim_start_matches("0::/")),
        "{v2} is not {}",
        slot_rel.display()
    );
    assert!(out.contains("\n/tmp\ny\n"), "{out}");
    let missing = Prepared::new(
        &["no-such-program".to_string()],
        &env,
        Path::new("/"),
        false,
    );
    match clone_into::spawn(lease.cgroup_fd().unwrap(), &missing.unwrap(), &|| Ok(())) {
        Err(CloneError::Failed(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
        other => panic!("{other:?}"),
    }
    assert_eq!(lease.members(), Some(vec![]));
    drop(lease);
    drop(slots);
    t.remove_and_check();
}

/// Regression (the clone3 path was switched off for it): after a slot has been killed,
/// the kernel SIGKILLs every child born in it by clone3, so a killed slot offers no
/// directory for clone3 and its next command, entering by a write, runs to its end.
#[test]
fn the_next_command_of_a_killed_slot_runs() {
    use crate::exec::clone_into::{self, Prepared};
    let Some(t) = TestCgroup::new("slots-killed-next", &SessionLimits::default()) else {
        return;
    };
    let Some((dir, KillMethod::CgroupKill)) = t.cg.exec_dir() else {
        eprintln!("skipping: no v2 per-command cgroups here");
        return;
    };
    let cfg = ExecCgroupConfig {
        dir: dir.to_path_buf(),
        kill: KillMethod::CgroupKill,
        slots: 1,
    };
    let slots = Arc::new(ExecSlots::prepare(&cfg, 1).unwrap());
    let env = [("PATH".to_string(), "/usr/bin:/bin".to_string())];
    let what = Prepared::new(&["true".to_string()], &env, Path::new("/"), false).unwrap();
    // Never killed: born in the slot.
    let lease = slots.acquire().unwrap();
    let fd = lease.cgroup_fd().expect("a fresh v2 slot offers clone3");
    if let Ok(child) = clone_into::spawn(fd, &what, &|| Ok(())) {
        assert_eq!(finish(child).1, 0);
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = |name: &str, body: &str| {
        let path = tmp.path().join(name);
        std::fs::write(&path, body).unwrap();
        path
    };
    let (sleep, exit) = (
        script("sleep.sh", "sleep 30\n"),
        script("exit.sh", "exit 0\n"),
    );
    // A leftover, killed with the slot.
    let mut sleeper = spawn_in(lease.entry_fd(), &sleep);
    assert!(lease.kill_all(), "slot did not empty");
    let _ = sleeper.wait();
    drop(lease);
    let lease = slots.acquire().unwrap();
    assert_eq!(
        lease.cgroup_fd(),
        None,
        "a killed slot must not offer clone3"
    );
    for _ in 0..3 {
        let mut next = spawn_in(lease.entry_fd(), &exit);
        assert!(
            next.wait().unwrap().success(),
            "the next command was killed"
        );
    }
    drop(lease);
    drop(slots);
    t.remove_and_check();
}
