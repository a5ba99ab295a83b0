//! Who sandboxed processes are: uid/gid maps of the sandbox's user namespace, and user
//! namespaces used only as idmaps for the workspace mount.
//!
//! Sandboxed processes never hold the host's root identity, even when Cordon runs as
//! root: inside uid/gid 1000 maps to an unprivileged host id. As host root the launcher
//! gives each session its own range (`uid_base + slot * 65536`, slot derived from the
//! session id): inside 0 (the setup phase, and the owner of the sandbox's own tmpfs files)
//! maps to the range's first id and inside 1000 to first + 1000. Nothing maps to host 0.
//! Unprivileged, the only id a process may map is its own: inside 1000 -> own uid.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::unistd::Pid;

use super::light::Light;
use super::{LaunchError, SANDBOX_GID, SANDBOX_UID};

/// Number of per-session ranges; keeps `base + slots * 65536` below 2^31.
const SLOTS: u32 = 32_000;
const RANGE: u32 = 65_536;

/// The host ids behind the sandbox's ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdPlan {
    /// Host uid/gid behind inside 0; `None` when unprivileged (inside 0 stays unmapped).
    pub root_host: Option<(u32, u32)>,
    /// Host uid/gid behind the sandbox user (inside 1000).
    pub user_host: (u32, u32),
}

impl IdPlan {
    /// Plans ids for `session_id` for a launcher running with `euid`/`egid`.
    pub fn new(session_id: &str, uid_base: u32, euid: u32, egid: u32) -> Self {
        if euid == 0 {
            let first = uid_base.saturating_add(session_slot(session_id) * RANGE);
            let user = first + SANDBOX_UID;
            Self {
                root_host: Some((first, first)),
                user_host: (user, user),
            }
        } else {
            Self {
                root_host: None,
                user_host: (euid, egid),
            }
        }
    }

    /// Whether the launcher runs as host root (and may setgroups, idmap, chown).
    pub fn privileged(&self) -> bool {
        self.root_host.is_some()
    }

    pub fn uid_map(&self) -> String {
        let mut map = String::new();
        if let Some((uid, _)) = self.root_host {
            map.push_str(&format!("0 {uid} 1\n"));
        }
        map.push_str(&format!("{SANDBOX_UID} {} 1\n", self.user_host.0));
        map
    }

    pub fn gid_map(&self) -> String {
        let mut map = String::new();
        if let Some((_, gid)) = self.root_host {
            map.push_str(&format!("0 {gid} 1\n"));
        }
        map.push_str(&format!("{SANDBOX_GID} {} 1\n", self.user_host.1));
        map
    }
}

/// A stable slot for a session id (FNV-1a).
pub fn session_slot(session_id: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in session_id.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % SLOTS
}

/// Writes the maps of the user namespace of `pid`. Unprivileged, setgroups must be denied
/// first (the kernel's rule); privileged, it stays allowed so the init can drop host
/// supplementary groups (root's group 0 among them) with setgroups([]).
pub fn write_maps(
    pid: Pid,
    uid_map: &str,
    gid_map: &str,
    privileged: bool,
) -> Result<(), LaunchError> {
    let write = |name: &str, text: &str| {
        std::fs::write(format!("/proc/{pid}/{name}"), text)
            .map_err(|e| LaunchError::UserNs(format!("writing {name}: {e}")))
    };
    if !privileged {
        write("setgroups", "deny")?;
    }
    write("uid_map", uid_map)?;
    write("gid_map", gid_map)
}

/// A user namespace mapping the host owner `owner` (uid, gid) to `to` (the sandbox user's
/// host ids), for idmapped mounts. Each costs a helper process, and the trees of one
/// session (the workspace, its additional directories, Cordon's caches) usually share one
/// owner, so the launcher (one process per session) makes one per owner and mapping and
/// hands out duplicates.
pub fn for_owner(owner: (u32, u32), to: (u32, u32)) -> Result<OwnedFd, LaunchError> {
    type Made = Vec<(((u32, u32), (u32, u32)), OwnedFd)>;
    static MADE: std::sync::Mutex<Made> = std::sync::Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    let dup = |fd: &OwnedFd| {
        fd.try_clone()
            .map_err(|e| LaunchError::UserNs(format!("duplicating the namespace: {e}")))
    };
    if let Some((_, fd)) = made.iter().find(|(k, _)| *k == (owner, to)) {
        return dup(fd);
    }
    let fd = new_userns_fd(
        &format!("{} {} 1\n", owner.0, to.0),
        &format!("{} {} 1\n", owner.1, to.1),
    )?;
    let out = dup(&fd)?;
    made.push(((owner, to), fd));
    Ok(out)
}

/// Creates a user namespace with the given maps and returns an fd to it (used as the
/// idmap of an idmapped mount). A light child (see [`super::light`]: it shares this
/// process's memory, so no page table is copied) is born in the namespace and holds it
/// while the maps are written; it only waits on a pipe, so this is sound in any process.
pub fn new_userns_fd(uid_map: &str, gid_map: &str) -> Result<OwnedFd, LaunchError> {
    let err = |what: &str, e: &dyn std::fmt::Display| LaunchError::UserNs(format!("{what}: {e}"));
    let (go_r, go_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| err("pipe", &e))?;
    let mut holder = Holder {
        go: go_r.as_raw_fd(),
    };
    // SAFETY: `hold` keeps the light-child contract (one read, then return); `holder`
    // lives on this frame until the child is reaped below.
    let child = unsafe {
        Light::spawn(
            libc::CLONE_NEWUSER,
            hold,
            (&raw mut holder).cast::<std::ffi::c_void>(),
        )
    }
    .map_err(|e| err("creating a user namespace (refused by the kernel?)", &e))?;
    let pid = Pid::from_raw(child.pid());
    let result =
        write_maps(pid, uid_map, gid_map, nix::unistd::geteuid().is_root()).and_then(|()| {
            File::open(format!("/proc/{pid}/ns/user"))
                .map(OwnedFd::from)
                .map_err(|e| err("opening the namespace", &e))
        });
    // The child holds a copy of the write end too (its descriptor table is a copy of
    // this one): it is woken by a byte, not by an end of file.
    let _ = File::from(go_w).write_all(&[0]);
    let _ = child.wait();
    drop(go_r);
    result
}

/// What the namespace holder waits on.
struct Holder {
    go: std::ffi::c_int,
}

/// The holder's whole life: one read of the go pipe (a byte, or an error), then it ends,
/// and the namespace with it unless an fd to it was opened.
extern "C" fn hold(arg: *mut std::ffi::c_void) -> std::ffi::c_int {
    // SAFETY: `arg` is the `Holder` `new_userns_fd` keeps alive until this child is
    // reaped; a raw read into a stack byte.
    unsafe {
        let holder = &*arg.cast::<Holder>();
        // Nothing but its read end: a copy of any other descriptor of the launcher's
        // (the write end of this very pipe, a guardian's pipe) would keep it, or a
        // guardian, waiting should the launcher die before the byte.
        super::light::close_all_but(holder.go);
        let mut b = 0u8;
        libc::read(holder.go, (&raw mut b).cast(), 1);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_never_maps_to_host_root() {
        let plan = IdPlan::new("s1", 1_000_000, 0, 0);
        assert!(plan.privileged());
        for line in plan.uid_map().lines().chain(plan.gid_map().lines()) {
            let host: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
            assert!(host >= 1_000_000, "{line}");
        }
        assert!(plan.uid_map().contains("1000 "));
    }

    #[test]
    fn unprivileged_maps_only_itself() {
        let plan = IdPlan::new("s1", 1_000_000, 1234, 99);
        assert_eq!(plan.uid_map(), "1000 1234 1\n");
        assert_eq!(plan.gid_map(), "1000 99 1\n");
    }

    #[test]
    fn sessions_get_distinct_ranges_that_fit() {
        assert_ne!(session_slot("a"), session_slot("b"));
        let plan = IdPlan::new("zzz", 1_000_000, 0, 0);
        assert!(plan.user_host.0 < (1 << 31));
    }
}
