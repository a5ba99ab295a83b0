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
    let mut first = spawn_in(lease.procs_fd(), &script);
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
    };
    let slots = Arc::new(ExecSlots::prepare(&cfg, 1).unwrap());
    let held = slots.acquire().unwrap();
    assert!(slots.acquire().is_none());
    drop(held);
    assert!(slots.acquire().is_some());
    drop(slots);
    t.remove_and_check();
}
