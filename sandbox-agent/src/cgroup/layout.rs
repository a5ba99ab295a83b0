//! Which cgroup hierarchies this host mounts and where the calling process sits in each,
//! from `/proc/self/mountinfo` and `/proc/self/cgroup`.
//!
//! Three shapes occur: pure v2 (one `cgroup2` mount holding every controller), pure v1
//! (one `cgroup` mount per controller or group of controllers), and hybrid (v1 mounts for
//! the controllers plus a controller-less `cgroup2` mount, usually at
//! `/sys/fs/cgroup/unified`, which still offers `cgroup.kill`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::CgroupError;

/// One mounted hierarchy and this process's cgroup in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Where the hierarchy is mounted.
    pub mount: PathBuf,
    /// This process's cgroup, relative to the mount (empty: the mount's root).
    pub own: PathBuf,
}

impl Hierarchy {
    /// This process's cgroup directory.
    pub fn own_dir(&self) -> PathBuf {
        self.mount.join(&self.own)
    }
}

/// The hierarchies of this host, as this process sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// The cgroup v2 hierarchy, if mounted.
    pub unified: Option<Hierarchy>,
    /// cgroup v1 hierarchies by controller (co-mounted controllers share one).
    pub v1: BTreeMap<String, Hierarchy>,
}

impl Layout {
    /// Reads the calling process's view.
    pub fn detect() -> Result<Layout, CgroupError> {
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(CgroupError::Layout)?;
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").map_err(CgroupError::Layout)?;
        Ok(Self::parse(&mountinfo, &cgroup))
    }

    /// Builds the layout from the two files' texts. A mount whose root does not contain
    /// this process's cgroup (a foreign view) is left out.
    pub fn parse(mountinfo: &str, cgroup: &str) -> Layout {
        let mut own_v2 = None;
        let mut own_v1: BTreeMap<String, String> = BTreeMap::new();
        for line in cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(ctls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if ctls.is_empty() {
                own_v2 = Some(path.to_string());
            } else {
                for c in ctls.split(',') {
                    own_v1.insert(c.to_string(), path.to_string());
                }
            }
        }
        let mut layout = Layout::default();
        for m in mountinfo.lines().filter_map(MountLine::parse) {
            match m.fstype {
                "cgroup2" => {
                    if layout.unified.is_none()
                        && let Some(h) = own_v2.as_deref().and_then(|o| m.hierarchy(o))
                    {
                        layout.unified = Some(h);
                    }
                }
                "cgroup" => {
                    for opt in m.super_opts.split(',') {
                        if let Some(h) = own_v1.get(opt).and_then(|o| m.hierarchy(o)) {
                            layout.v1.entry(opt.to_string()).or_insert(h);
                        }
                    }
                }
                _ => {}
            }
        }
        layout
    }

    /// The v1 hierarchy of `controller`.
    pub fn v1(&self, controller: &str) -> Option<&Hierarchy> {
        self.v1.get(controller)
    }

    /// Controllers the v2 hierarchy offers at its root.
    pub fn v2_controllers(&self) -> Vec<String> {
        self.unified
            .as_ref()
            .and_then(|h| std::fs::read_to_string(h.mount.join("cgroup.controllers")).ok())
            .map(|t| t.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Whether nothing is mounted at all.
    pub fn is_empty(&self) -> bool {
        self.unified.is_none() && self.v1.is_empty()
    }
}

/// The fields of one mountinfo line we use.
struct MountLine<'a> {
    root: &'a str,
    mount_point: &'a str,
    fstype: &'a str,
    super_opts: &'a str,
}

impl<'a> MountLine<'a> {
    /// "id parent dev root mountpoint opts [optional...] - fstype source superopts".
    fn parse(line: &'a str) -> Option<MountLine<'a>> {
        let (head, tail) = line.split_once(" - ")?;
        let mut head = head.split(' ');
        let root = head.nth(3)?;
        let mount_point = head.next()?;
        let mut tail = tail.split(' ');
        let fstype = tail.next()?;
        let super_opts = tail.nth(1).unwrap_or("");
        Some(MountLine {
            root,
            mount_point,
            fstype,
            super_opts,
        })
    }

    /// The hierarchy with this process's cgroup `own` (absolute in the hierarchy) made
    /// relative to the mount's root.
    fn hierarchy(&self, own: &str) -> Option<Hierarchy> {
        let rel = Path::new(own).strip_prefix(self.root).ok()?;
        Some(Hierarchy {
            mount: PathBuf::from(self.mount_point),
            own: rel.to_path_buf(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "\
24 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
25 24 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime shared:5 - cgroup cgroup rw,cpu
27 25 0:25 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
28 25 0:26 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
29 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
30 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const HYBRID_CGROUP: &str = "\
8:pids:/
6:freezer:/
4:memory:/process_api/abc
1:cpu:/
0::/
";

    #[test]
    fn a_hybrid_host_has_v1_controllers_and_a_bare_unified_mount() {
        let l = Layout::parse(HYBRID_MOUNTS, HYBRID_CGROUP);
        let unified = l.unified.clone().unwrap();
        assert_eq!(unified.mount, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(unified.own, Path::new(""));
        let mem = l.v1("memory").unwrap();
        assert_eq!(
            mem.own_dir(),
            Path::new("/sys/fs/cgroup/memory/process_api/abc")
        );
        assert!(l.v1("pids").is_some() && l.v1("freezer").is_some() && l.v1("cpu").is_some());
        assert!(l.v1("blkio").is_none());
    }

    #[test]
    fn pure_v2_and_a_namespaced_root_resolve_relative_to_the_mount() {
        let mounts = "35 24 0:30 /user.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let l = Layout::parse(mounts, "0::/user.slice/app.scope\n");
        let h = l.unified.unwrap();
        assert_eq!(h.own_dir(), Path::new("/sys/fs/cgroup/app.scope"));
        assert!(l.v1.is_empty());
        // A process outside the mount's root is not in this view.
        let l = Layout::parse(mounts, "0::/system.slice/x\n");
        assert!(l.is_empty());
    }

    #[test]
    fn co_mounted_controllers_share_a_hierarchy() {
        let mounts = "26 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let l = Layout::parse(mounts, "3:cpu,cpuacct:/a\n");
        assert_eq!(l.v1("cpu"), l.v1("cpuacct"));
        assert_eq!(
            l.v1("cpu").unwrap().own_dir(),
            Path::new("/sys/fs/cgroup/cpu,cpuacct/a")
        );
    }

    #[test]
    fn this_host_has_a_layout() {
        let l = Layout::detect().unwrap();
        assert!(!l.is_empty(), "{l:?}");
    }
}
