use super::*;
use crate::cgroup::test_support::{TestCgroup, parent_name};

fn small() -> SessionLimits {
    SessionLimits {
        memory_bytes: 64 * 1024 * 1024,
        pids: 32,
        cpu_millis: 500,
        disk_bytes: None,
        best_effort: false,
    }
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn limits_are_written_and_the_cgroup_is_removed_its_parent_kept() {
    let Some(t) = TestCgroup::new("limits", &small()) else {
        return;
    };
    let e = t.cg.enforced;
    assert!(e.memory && e.pids && e.cpu, "{e:?}");
    let plan = &t.cg.plan;
    let (mem, v2) = plan.limit_dir("memory").unwrap();
    let mem_file = if v2 {
        "memory.max"
    } else {
        "memory.limit_in_bytes"
    };
    assert_eq!(read(mem, mem_file), (64 * 1024 * 1024).to_string());
    let (pids, _) = plan.limit_dir("pids").unwrap();
    assert_eq!(read(pids, "pids.max"), "32");
    let (cpu, v2) = plan.limit_dir("cpu").unwrap();
    if v2 {
        assert_eq!(read(cpu, "cpu.max"), "50000 100000");
    } else {
        assert_eq!(read(cpu, "cpu.cfs_quota_us"), "50000");
    }
    t.remove_and_check();
}

#[test]
fn an_attached_process_counts_and_is_killed_at_removal() {
    let Some(t) = TestCgroup::new("attach", &small()) else {
        return;
    };
    let mut child = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    t.cg.attach(pid).unwrap();
    for dir in t.cg.dirs() {
        assert!(members(&dir).contains(&pid), "{}", dir.display());
    }
    t.remove_and_check();
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
}

#[test]
fn the_exec_parent_is_delegated_and_the_limit_files_are_not() {
    let Some(t) = TestCgroup::new("delegate", &small()) else {
        return;
    };
    let (dir, _) =
        t.cg.exec_dir()
            .expect("this host allows per-command cgroups");
    t.cg.delegate(4242, 4243).unwrap();
    use std::os::unix::fs::MetadataExt;
    let owner = |p: &Path| std::fs::metadata(p).map(|m| (m.uid(), m.gid())).unwrap();
    assert_eq!(owner(dir), (4242, 4243));
    assert_eq!(owner(&dir.join("cgroup.procs")), (4242, 4243));
    let (pids, _) = t.cg.plan.limit_dir("pids").unwrap();
    assert_eq!(owner(&pids.join("pids.max")), (0, 0));
    t.remove_and_check();
}

#[test]
fn a_missing_controller_is_named() {
    let layout = Layout {
        unified: None,
        v1: Default::default(),
    };
    let err = Plan::new(&layout, &parent_name("missing"), "s").unwrap_err();
    assert!(err.to_string().contains("memory, pids, cpu"), "{err}");
}
