#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::process::CommandExt;

use super::*;

/// `Cpus_allowed_list` of a process's /proc status, as the kernel prints it.
fn allowed_list(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

// Each test runs on a thread of its own: a pin acts on the calling thread only, and the
// harness's threads are shared with other tests.
#[test]
fn a_pin_holds_the_thread_and_nothing_it_starts_keeps_it() {
    std::thread::spawn(|| {
        let before = sched_getaffinity(this_thread()).unwrap();
        let Some(cpu) = pin_here() else {
            eprintln!("this process may use one CPU only: nothing to pin");
            return;
        };
        let now = sched_getaffinity(this_thread()).unwrap();
        assert_eq!(cpus(&now).collect::<Vec<_>>(), vec![cpu]);
        assert_eq!(pinned_cpu(), Some(cpu));
        assert_eq!(original(), Some(before));

        // A thread inherits the pin until it unpins (what `on_thread_start` does).
        let (inherited, unpinned) = std::thread::spawn(|| {
            let inherited = pinned_cpu();
            unpin_current_thread();
            (inherited, sched_getaffinity(this_thread()).unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(inherited, Some(cpu));
        assert_eq!(unpinned, before);

        // A child restored between fork and exec has the process's CPUs; one that is
        // not would have the pin.
        let child_list = |restored: bool| {
            let mut cmd = std::process::Command::new("cat");
            cmd.arg("/proc/self/status");
            if restored {
                let set = original().unwrap();
                // SAFETY: `restore` is one system call on a value owned by the closure.
                unsafe {
                    cmd.pre_exec(move || {
                        restore(&set);
                        Ok(())
                    });
                }
            }
            allowed_list(&String::from_utf8(cmd.output().unwrap().stdout).unwrap())
        };
        let own = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        assert_eq!(child_list(false), allowed_list(&own));
        assert_eq!(child_list(false), cpu.to_string());
        assert_ne!(child_list(true), cpu.to_string());
        assert_eq!(
            cpus(&before).count(),
            child_list(true)
                .split(',')
                .map(|r| match r.split_once('-') {
                    Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
                    None => 1,
                })
                .sum::<usize>()
        );

        // A plain spawn (posix_spawn, no pre_exec) inside `with_every_cpu` has every
        // CPU, and the thread is pinned again after.
        let plain = with_every_cpu(|| {
            std::process::Command::new("cat")
                .arg("/proc/self/status")
                .output()
                .unwrap()
        });
        assert_eq!(
            allowed_list(&String::from_utf8(plain.stdout).unwrap()),
            child_list(true)
        );
        assert_eq!(pinned_cpu(), Some(cpu));

        unpin_current_thread();
        assert_eq!(pinned_cpu(), None);
        assert_eq!(with_every_cpu(pinned_cpu), None);
    })
    .join()
    .unwrap();
}

#[test]
fn a_cpu_outside_the_process_is_refused_and_changes_nothing() {
    std::thread::spawn(|| {
        let before = sched_getaffinity(this_thread()).unwrap();
        let outside = CpuSet::count() - 1;
        if before.is_set(outside).unwrap() {
            eprintln!("this process may use every CPU the kernel knows: none outside");
            return;
        }
        assert!(pin_to(outside).is_err());
        assert_eq!(sched_getaffinity(this_thread()).unwrap(), before);
    })
    .join()
    .unwrap();
}
