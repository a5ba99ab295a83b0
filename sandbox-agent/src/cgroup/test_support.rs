//! Helpers for the cgroup tests, which run against the real /sys/fs/cgroup: each test
//! makes its own session cgroup under a parent named after the test and removes it.

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::{Layout, SessionCgroup, SessionLimits, slots};

/// The parent every cgroup of test `name` lives under.
pub fn parent_name(name: &str) -> String {
    format!("cordon-test-{name}-{}", std::process::id())
}

/// A session cgroup for test `name`, removed (parent included) when dropped. `None` when
/// this host or user cannot make one: the test is skipped, saying why.
pub struct TestCgroup {
    pub cg: SessionCgroup,
}

impl TestCgroup {
    pub fn new(name: &str, limits: &SessionLimits) -> Option<TestCgroup> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipping {name}: needs root to make cgroups");
            return None;
        }
        let layout = Layout::detect().unwrap();
        let cg = SessionCgroup::create_in(&layout, &parent_name(name), "s", limits)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        Some(TestCgroup { cg })
    }

    /// Removes the cgroup and checks nothing of it is left (the parent stays for the next
    /// session, as Cordon's own does; the test's own parent goes with the drop).
    pub fn remove_and_check(self) {
        let dirs = self.cg.dirs();
        self.cg.remove();
        for d in &dirs {
            assert!(!d.exists(), "{} left behind", d.display());
            assert!(
                d.parent().unwrap().exists(),
                "parent of {} removed",
                d.display()
            );
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        self.cg.remove();
        // The test's own parent (Cordon's stays for the next session).
        for d in self.cg.dirs() {
            if let Some(parent) = d.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

/// Writes a script that starts a copy of itself in the background and exits, forever:
/// a pid hopper. Its path carries `tag` so survivors can be found in /proc.
pub fn hopper_script(dir: &Path, tag: &str) -> PathBuf {
    let path = dir.join(format!("hop-{tag}.sh"));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"sh \"$0\" &\n"))
        .unwrap();
    path
}

/// Starts `sh script` inside the cgroup whose `cgroup.procs` (or v1 `tasks`) is open as
/// `entry_fd`.
pub fn spawn_in(entry_fd: i32, script: &Path) -> Child {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg(script);
    // SAFETY: the hook only calls the alloc-free `enter` (one write).
    unsafe {
        cmd.pre_exec(move || slots::enter(entry_fd));
    }
    cmd.spawn().unwrap()
}

/// Host processes whose command line contains `tag`.
pub fn processes_with(tag: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(tag))
        })
        .collect()
}
