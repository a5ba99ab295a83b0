//! The sandbox's filesystem view, built inside its own mount namespace: a fresh tmpfs
//! root holding read-only binds of the system dirs, a fresh /proc, a minimal /dev, a
//! private /tmp, the workspace and the additional directories at their own absolute
//! paths, the session's socket dir and the agent binary, then the protected paths
//! read-only. Nothing else of the host is there:
//! no home directories, no /root, no other workspace, no Cordon data directory.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

/// System directories visible read-only (those that exist; symlinks are recreated).
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];
/// Where the new root is assembled, in the init's mount namespace.
const STAGING: &str = "/tmp";
/// Device nodes bound from the host's /dev.
const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
/// move_mount(2) flag: the source is the detached tree behind the fd itself.
pub const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// mount_setattr(2): adds `attrs` to the mount at `path` (and below it when `recursive`).
/// Only ever adds restrictions, so flags the kernel locked stay as they are.
fn set_attrs(
    dirfd: libc::c_int,
    path: &Path,
    flags: libc::c_uint,
    attr: &MountAttr,
) -> io::Result<()> {
    let p = cpath(path)?;
    // SAFETY: p is a valid NUL-terminated string and attr a valid mount_attr that outlives
    // the call; the size argument is its size.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            p.as_ptr(),
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

fn restrict(path: &Path, attrs: u64, recursive: bool) -> io::Result<()> {
    let flags = if recursive {
        libc::AT_RECURSIVE as libc::c_uint
    } else {
        0
    };
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    set_attrs(libc::AT_FDCWD, path, flags, &attr)
}

/// A detached, recursive clone of the tree at `path`, idmapped through `userns`: files
/// owned by the on-disk ids that `userns` maps appear (and are written) as their images.
/// Creating it needs privilege over the filesystem (host root); the sandbox's init then
/// attaches it with [`attach`].
pub fn idmapped_clone(path: &Path, userns: &OwnedFd) -> io::Result<OwnedFd> {
    detached_clone(path, false, Some(userns))
}

/// A detached recursive clone of the mount tree at `path` (open_tree), made read-only
/// when asked and idmapped through `userns` when given. Both only narrow or remap what the
/// clone allows; the original mount is untouched.
pub fn detached_clone(
    path: &Path,
    read_only: bool,
    userns: Option<&OwnedFd>,
) -> io::Result<OwnedFd> {
    clone_at(libc::AT_FDCWD, path, 0, read_only, userns)
}

/// [`detached_clone`] of the directory `dir` is open on (an `O_PATH` fd, say from
/// [`crate::hostside::extra_dir::open_checked`]): the tree cloned is the one that fd
/// refers to, whatever its path leads to by now.
pub fn detached_clone_fd(
    dir: BorrowedFd<'_>,
    read_only: bool,
    userns: Option<&OwnedFd>,
) -> io::Result<OwnedFd> {
    let empty = libc::AT_EMPTY_PATH as libc::c_uint;
    clone_at(dir.as_raw_fd(), Path::new(""), empty, read_only, userns)
}

/// open_tree(dirfd, path, OPEN_TREE_CLONE | AT_RECURSIVE | `extra`), then the attributes.
fn clone_at(
    dirfd: libc::c_int,
    path: &Path,
    extra: libc::c_uint,
    read_only: bool,
    userns: Option<&OwnedFd>,
) -> io::Result<OwnedFd> {
    let p = cpath(path)?;
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | libc::AT_RECURSIVE as libc::c_uint
        | extra;
    // SAFETY: p is a valid C string and dirfd an open fd or AT_FDCWD; open_tree returns a
    // new fd we take ownership of.
    let fd = check(unsafe { libc::syscall(libc::SYS_open_tree, dirfd, p.as_ptr(), flags) })?;
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: fd was just returned by open_tree and is owned by nobody else.
    let tree = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut attr = MountAttr {
        attr_set: 0,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    if read_only {
        attr.attr_set |= MOUNT_ATTR_RDONLY;
    }
    if let Some(ns) = userns {
        attr.attr_set |= MOUNT_ATTR_IDMAP;
        attr.userns_fd = ns.as_raw_fd() as u64;
    }
    if attr.attr_set != 0 {
        let flags = (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint;
        set_attrs(tree.as_raw_fd(), Path::new(""), flags, &attr)?;
    }
    Ok(tree)
}

/// Makes a detached tree (from [`detached_clone`]) `nosuid` and `nodev`, recursively: a
/// setuid file in it runs without its bit and a device node in it opens nothing, wherever
/// the tree is attached. Only adds restrictions.
pub fn seal_detached(tree: &OwnedFd) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint;
    set_attrs(tree.as_raw_fd(), Path::new(""), flags, &attr)
}

/// Attaches a detached mount (from [`idmapped_clone`]) at `target`.
pub fn attach(tree: &OwnedFd, target: &Path) -> io::Result<()> {
    let empty = c"";
    let t = cpath(target)?;
    // SAFETY: both strings are valid C strings; tree is an open mount fd.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// One writable tree (the workspace, an additional directory) and what goes over it.
#[derive(Debug)]
pub struct TreeMount<'a> {
    /// The tree's absolute path, where it appears inside.
    pub path: &'a Path,
    /// The idmapped tree, or `None` to bind `src` plainly.
    pub tree: Option<&'a OwnedFd>,
    /// The source as `/proc/self/fd/N` of an O_PATH fd the init opened before any uid
    /// change (like the other sources, see [`RootSpec`]).
    pub src: PathBuf,
    pub protected: &'a super::protected::Plan,
    /// Files hard-linked to names outside the tree (relative), made read-only.
    pub linked: &'a [PathBuf],
}

/// What goes into the sandbox's root.
#[derive(Debug)]
pub struct RootSpec<'a> {
    /// The workspace; its plan's hidden entries are the denied reads.
    pub workspace: TreeMount<'a>,
    /// The additional directories, each mounted and protected as the workspace is.
    pub additional: &'a [TreeMount<'a>],
    /// Sources as `/proc/self/fd/N` of O_PATH fds the init opened before any uid change
    /// (so host dirs it could not traverse later, like a 0700 `/root`, are no obstacle).
    pub socket_src: &'a Path,
    /// The agent binary, bound read-only at [`super::AGENT_IN_SANDBOX`]; `None` for a
    /// one-shot run, which starts no agent.
    pub agent_src: Option<&'a Path>,
    /// The session's per-command cgroup parent, bound writable at
    /// [`crate::cgroup::EXEC_CGROUP_IN_SANDBOX`] for the agent (its commands cannot
    /// reach it: Landlock).
    pub cgroup_src: Option<&'a Path>,
    pub tmp_size_mib: u64,
    pub masked: &'a [PathBuf],
    /// A resolv.conf to show at /etc/resolv.conf (the egress DNS stub's), if any.
    pub resolv_conf: Option<&'a str>,
    /// The session CA of brokered credentials: its bundle is made on `/run` and shown at
    /// the system bundle's path.
    pub ca: Option<&'a crate::egress::ca::CaTrust>,
    pub host: HostSources<'a>,
}

/// Where a mount comes from: a path (often `/proc/self/fd/N`) or a detached mount tree.
#[derive(Debug)]
pub enum Source<'a> {
    Path(PathBuf),
    Tree(&'a OwnedFd),
}

/// The host view's entries with their sources (see [`super::host_view`]).
#[derive(Debug)]
pub struct HostSources<'a> {
    /// Where each entry appears inside, and its source; parents before nested entries.
    pub read_only: &'a [(&'a Path, PathBuf)],
    pub hidden: &'a [PathBuf],
    pub writable: &'a [(&'a Path, Source<'a>)],
    /// Seeded parts of the writable entries: where, the host cache beneath (read-only),
    /// and the directory holding the overlay's `upper/` and `work/`.
    pub seeded: &'a [SeededSource<'a>],
    /// Directories inside the read-only entries given a layer of the session's own.
    pub scratch: &'a [PathBuf],
}

/// One seeded cache's overlay and its two sources.
#[derive(Debug)]
pub struct SeededSource<'a> {
    pub at: &'a Path,
    pub lower: Source<'a>,
    pub layers: Source<'a>,
}

fn io_at(step: &str, path: &Path, e: impl std::fmt::Display) -> String {
    format!("{step} {}: {e}", path.display())
}

/// Inside `staging`, the host path `p` (absolute).
fn under(staging: &Path, p: &Path) -> PathBuf {
    staging.join(p.strip_prefix("/").unwrap_or(p))
}

fn bind(src: &Path, dst: &Path, attrs: u64) -> Result<(), String> {
    mount(
        Some(src),
        dst,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| io_at("bind mount", dst, e))?;
    restrict(dst, attrs, true).map_err(|e| io_at("restricting", dst, e))
}

fn tmpfs(dst: &Path, flags: MsFlags, data: &str) -> Result<(), String> {
    mount(Some("tmpfs"), dst, Some("tmpfs"), flags, Some(data))
        .map_err(|e| io_at("tmpfs on", dst, e))
}

fn mkdir_all(p: &Path) -> Result<(), String> {
    std::fs::create_dir_all(p).map_err(|e| io_at("mkdir", p, e))
}

fn touch(p: &Path) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map(drop)
        .map_err(|e| io_at("creating", p, e))
}

/// Builds the root and pivots into it. Runs in the sandbox's init, with capabilities in
/// its user namespace only. The new root is a tmpfs mounted over `/tmp` of the init's own
/// mount namespace (the host's /tmp is untouched; sources under it were opened before).
pub fn build_root(spec: &RootSpec) -> Result<(), String> {
    let nothing = None::<&str>;
    // Nothing we mount may propagate back to the host.
    mount(
        nothing,
        "/",
        nothing,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        nothing,
    )
    .map_err(|e| format!("making / private: {e}"))?;
    let root = Path::new(STAGING);
    tmpfs(
        root,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        "mode=0755,size=16m",
    )?;
    let ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    for dir in SYSTEM_DIRS {
        let host = Path::new(dir);
        let Ok(meta) = std::fs::symlink_metadata(host) else {
            continue;
        };
        let dst = under(root, host);
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(host).map_err(|e| io_at("readlink", host, e))?;
            std::os::unix::fs::symlink(&target, &dst).map_err(|e| io_at("symlink", &dst, e))?;
        } else if meta.is_dir() {
            mkdir_all(&dst)?;
            bind(host, &dst, ro)?;
        }
    }
    build_proc_dev(root)?;
    let tmp = root.join("tmp");
    mkdir_all(&tmp)?;
    let data = format!("mode=1777,size={}m", spec.tmp_size_mib);
    tmpfs(&tmp, MsFlags::MS_NOSUID | MsFlags::MS_NODEV, &data)?;
    let run = root.join("run");
    mkdir_all(&run)?;
    tmpfs(
        &run,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        "mode=0755,size=1m",
    )?;
    if let Some(text) = spec.resolv_conf {
        resolv_conf(root, &run, text)?;
    }
    if let Some(ca) = spec.ca {
        ca_bundle(root, ca)?;
    }
    let sock = under(root, Path::new(super::SOCKET_DIR_IN_SANDBOX));
    mkdir_all(&sock)?;
    bind(
        spec.socket_src,
        &sock,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
    )?;
    if let Some(src) = spec.cgroup_src {
        let dst = under(root, Path::new(crate::cgroup::EXEC_CGROUP_IN_SANDBOX));
        mkdir_all(&dst)?;
        bind(
            src,
            &dst,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        )?;
    }
    if let Some(agent_src) = spec.agent_src {
        let agent = under(root, Path::new(super::AGENT_IN_SANDBOX));
        if let Some(parent) = agent.parent() {
            mkdir_all(parent)?;
        }
        touch(&agent)?;
        bind(agent_src, &agent, ro)?;
    }
    for tree in std::iter::once(&spec.workspace).chain(spec.additional) {
        mount_tree(root, tree)?;
    }
    for hidden in spec.masked {
        let p = under(root, hidden);
        if p.is_dir() {
            tmpfs(
                &p,
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
                "mode=0000,size=4k",
            )?;
        }
    }
    mount_host_view(root, &spec.host)?;
    // The tmpfs root itself: no new entries once every mount point exists.
    restrict(root, MOUNT_ATTR_RDONLY, false).map_err(|e| io_at("read-only root", root, e))?;
    restrict(&run, MOUNT_ATTR_RDONLY, false).map_err(|e| io_at("read-only", &run, e))?;
    pivot(root)
}

/// Shows `text` at /etc/resolv.conf: a file on the sandbox's /run tmpfs bound over the
/// (read-only) host file, or written where the host's link points when that is under /run.
fn resolv_conf(root: &Path, run: &Path, text: &str) -> Result<(), String> {
    let etc = under(root, Path::new("/etc/resolv.conf"));
    let own = run.join("cordon-resolv.conf");
    std::fs::write(&own, text).map_err(|e| io_at("writing", &own, e))?;
    match std::fs::symlink_metadata(&etc) {
        Ok(m) if m.is_file() => bind(
            &own,
            &etc,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        ),
        Ok(m) if m.file_type().is_symlink() => {
            let target = std::fs::read_link(&etc).map_err(|e| io_at("readlink", &etc, e))?;
            let target = Path::new("/etc").join(target);
            let clean: PathBuf = target.components().fold(PathBuf::new(), |mut p, c| {
                match c {
                    std::path::Component::ParentDir => {
                        p.pop();
                    }
                    other => p.push(other),
                }
                p
            });
            if !clean.starts_with("/run") {
                return Err(format!(
                    "/etc/resolv.conf links to {}, outside /run: cannot point it at the DNS stub",
                    clean.display()
                ));
            }
            let dst = under(root, &clean);
            if let Some(parent) = dst.parent() {
                mkdir_all(parent)?;
            }
            std::fs::write(&dst, text).map_err(|e| io_at("writing", &dst, e))
        }
        _ => Err("no /etc/resolv.conf to point at the DNS stub".into()),
    }
}

/// Writes the session CA's bundle (the host's roots, then the CA) where `ca` says, on the
/// sandbox's `/run` tmpfs (read-only once the root is built: no command can change it),
/// and shows it over the system bundle when that is a plain file. Elsewhere (a link, as
/// Fedora's) the variables alone point at it.
fn ca_bundle(root: &Path, ca: &crate::egress::ca::CaTrust) -> Result<(), String> {
    use crate::egress::ca;
    if !ca.bundle.starts_with("/run") || ca.bundle.starts_with(super::SOCKET_DIR_IN_SANDBOX) {
        return Err(format!(
            "the CA bundle {} must be on the sandbox's own /run",
            ca.bundle.display()
        ));
    }
    let own = under(root, &ca.bundle);
    ca::write_bundle(&own, &ca::combined_bundle(root, &ca.cert_pem))
        .map_err(|e| io_at("writing", &own, e))?;
    let system = under(root, Path::new(ca::SYSTEM_BUNDLE));
    match std::fs::symlink_metadata(&system) {
        Ok(m) if m.is_file() => bind(
            &own,
            &system,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        ),
        _ => Ok(()),
    }
}

fn build_proc_dev(root: &Path) -> Result<(), String> {
    let nothing = None::<&str>;
    let proc_dir = root.join("proc");
    mkdir_all(&proc_dir)?;
    // A proc of the sandbox's own pid namespace: only its processes are visible.
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), &proc_dir, Some("proc"), flags, nothing)
        .map_err(|e| io_at("proc on", &proc_dir, e))?;
    let dev = root.join("dev");
    mkdir_all(&dev)?;
    tmpfs(
        &dev,
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        "mode=0755,size=64k",
    )?;
    for node in DEV_NODES {
        let host = Path::new("/dev").join(node);
        if !host.exists() {
            continue;
        }
        let dst = dev.join(node);
        touch(&dst)?;
        bind(&host, &dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC)?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        let dst = dev.join(link);
        std::os::unix::fs::symlink(target, &dst).map_err(|e| io_at("symlink", &dst, e))?;
    }
    let pts = dev.join("pts");
    mkdir_all(&pts)?;
    // A private devpts instance, so tools that want a pty work; optional.
    if let Err(e) = mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    ) {
        tracing::warn!(error = %e, "no devpts in the sandbox");
    }
    let shm = dev.join("shm");
    mkdir_all(&shm)?;
    tmpfs(
        &shm,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        "mode=1777,size=64m",
    )?;
    restrict(&dev, MOUNT_ATTR_RDONLY, false).map_err(|e| io_at("read-only", &dev, e))
}

/// Mounts one writable tree at its own path, `nosuid,nodev`, then its protected paths
/// read-only (their ancestors pinned), its hard-linked names read-only and its hidden
/// entries masked: the same for the workspace and every additional directory.
fn mount_tree(root: &Path, spec: &TreeMount) -> Result<(), String> {
    let ws = under(root, spec.path);
    mkdir_all(&ws)?;
    match spec.tree {
        Some(tree) => {
            attach(tree, &ws).map_err(|e| io_at("attaching the idmapped tree at", &ws, e))?
        }
        None => mount(
            Some(spec.src.as_path()),
            &ws,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| io_at("bind mount", &ws, e))?,
    }
    restrict(&ws, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true)
        .map_err(|e| io_at("restricting", &ws, e))?;
    // Ancestors first (read-write, only to pin them in place), then the protected paths.
    for rel in &spec.protected.anchors {
        let p = ws.join(rel);
        bind(&p, &p, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)?;
    }
    for rel in &spec.protected.read_only {
        let p = ws.join(rel);
        bind(
            &p,
            &p,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )?;
    }
    read_only_files(&ws, spec.linked)?;
    hide_denied(root, &ws, &spec.protected.hidden)
}

/// Files hard-linked to names outside the workspace: each name is a read-only bind of
/// itself, so writing through it (or renaming or unlinking it: a mount point cannot be)
/// fails, and the file outside stays as it is (see `hostside::hardlinks`). A name whose
/// path is no longer a regular file reached without links (changed on the host since the
/// scan) is an error: binding would follow it.
fn read_only_files(ws: &Path, names: &[PathBuf]) -> Result<(), String> {
    let ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    for rel in names {
        let p = ws.join(rel);
        let meta = std::fs::symlink_metadata(&p).map_err(|e| io_at("stat", &p, e))?;
        if !meta.file_type().is_file() {
            return Err(io_at("hard-linked file", &p, "changed since the scan"));
        }
        bind(&p, &p, ro)?;
    }
    Ok(())
}

/// Denied-read paths: a file is covered by an empty mode-0000 file (so opening it fails
/// with EACCES rather than reading as empty), a directory by an empty mode-0000 tmpfs;
/// both read-only, so the mask itself cannot be changed or replaced. The sandbox user owns
/// neither and has no capabilities, so the mode holds.
fn hide_denied(
    root: &Path,
    ws: &Path,
    hidden: &[(PathBuf, super::EntryKind)],
) -> Result<(), String> {
    if hidden.is_empty() {
        return Ok(());
    }
    let mask = root.join("run/cordon-denied");
    touch(&mask)?;
    std::fs::set_permissions(&mask, std::os::unix::fs::PermissionsExt::from_mode(0o000))
        .map_err(|e| io_at("chmod", &mask, e))?;
    let ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    for (rel, kind) in hidden {
        let p = ws.join(rel);
        match kind {
            super::EntryKind::File => bind(&mask, &p, ro)?,
            super::EntryKind::Dir => tmpfs(
                &p,
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
                "mode=0000,size=4k",
            )?,
        }
    }
    Ok(())
}

/// The host view: toolchains read-only (executable: they are programs) at their own
/// paths, then the secrets inside them covered, then Cordon's caches writable. Mount
/// points are made on the tmpfs root, which is sealed read-only afterwards.
fn mount_host_view(root: &Path, host: &HostSources) -> Result<(), String> {
    let ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    for (inside, src) in host.read_only {
        let dst = under(root, inside);
        if std::fs::metadata(src)
            .map_err(|e| io_at("stat", inside, e))?
            .is_dir()
        {
            mkdir_all(&dst)?;
        } else {
            if let Some(parent) = dst.parent() {
                mkdir_all(parent)?;
            }
            touch(&dst)?;
        }
        bind(src, &dst, ro)?;
    }
    if !host.hidden.is_empty() {
        let mask = root.join("run/cordon-hidden");
        touch(&mask)?;
        std::fs::set_permissions(&mask, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .map_err(|e| io_at("chmod", &mask, e))?;
        for hidden in host.hidden {
            let p = under(root, hidden);
            // Only what exists is covered: a missing secret has nothing to hide, and a
            // read-only bind cannot grow one during the session.
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => tmpfs(
                    &p,
                    MsFlags::MS_NOSUID
                        | MsFlags::MS_NODEV
                        | MsFlags::MS_NOEXEC
                        | MsFlags::MS_RDONLY,
                    "mode=0000,size=4k",
                )?,
                // Binding onto a symlink would follow it (here, before the pivot, into the
                // host's tree); the orchestrator lists secrets by their resolved paths, so
                // a link's target, if it is in the view at all, is covered by its own entry.
                Ok(m) if m.file_type().is_symlink() => {}
                Ok(_) => bind(&mask, &p, ro | MOUNT_ATTR_NOEXEC)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_at("stat", hidden, e)),
            }
        }
    }
    for (inside, src) in host.writable {
        let dst = under(root, inside);
        mkdir_all(&dst)?;
        match src {
            Source::Tree(tree) => {
                attach(tree, &dst).map_err(|e| io_at("attaching the idmapped cache at", &dst, e))?
            }
            Source::Path(p) => bind(p, &dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)?,
        }
        restrict(&dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true)
            .map_err(|e| io_at("restricting", &dst, e))?;
    }
    let writable: Vec<&Path> = host.writable.iter().map(|(p, _)| *p).collect();
    for (i, seed) in host.seeded.iter().enumerate() {
        // A seed is a convenience: where the kernel cannot make the overlay, the cache
        // part stays Cordon's alone (empty at first) and the session goes on.
        if let Err(e) = mount_seeded(root, i, seed, &writable) {
            tracing::warn!(cache = %seed.at.display(), error = %e, "cache not seeded from the host's");
        }
    }
    for (i, at) in host.scratch.iter().enumerate() {
        // Also a convenience: without the overlay the directory stays read-only, as the
        // rest of its entry (a tool that rewrites it reports that it cannot).
        if let Err(e) = mount_scratch(root, i, at) {
            tracing::warn!(dir = %at.display(), error = %e, "no writable layer of the session's own");
        }
    }
    Ok(())
}

/// Mounts one seeded cache part: its two sources attached at a staging point on the root
/// tmpfs (read-only for the host's cache), the overlay made from them over `seed.at`
/// (`nosuid,nodev`; `userxattr`, the only kind of overlay a user namespace may make),
/// then the staging mounts detached again, so that inside only the overlay remains. The
/// overlay keeps its own private references to its layers.
fn mount_seeded(
    root: &Path,
    i: usize,
    seed: &SeededSource,
    writable: &[&Path],
) -> Result<(), String> {
    let stage = root.join(format!("run/cordon-seed/{i}"));
    let (lower, layers) = (stage.join("lower"), stage.join("layers"));
    mkdir_all(&lower)?;
    mkdir_all(&layers)?;
    // The overlay looks its layers up as the sandbox user (below): the staging dirs must
    // let it through, whatever this process's umask made them.
    for dir in [root.join("run/cordon-seed"), stage.clone()] {
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .map_err(|e| io_at("chmod", &dir, e))?;
    }
    let place = |src: &Source, dst: &Path, attrs: u64| -> Result<(), String> {
        match src {
            Source::Tree(tree) => attach(tree, dst).map_err(|e| io_at("attaching", dst, e))?,
            Source::Path(p) => bind(p, dst, attrs)?,
        }
        restrict(dst, attrs, true).map_err(|e| io_at("restricting", dst, e))
    };
    let unstage = || {
        for p in [&lower, &layers] {
            let _ = umount2(p.as_path(), MntFlags::MNT_DETACH);
        }
    };
    let result = (|| {
        place(
            &seed.lower,
            &lower,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )?;
        place(&seed.layers, &layers, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)?;
        // The mount point lies in a cache a session may write: an earlier session could
        // have left a link there (to host paths, before the pivot). Only a real directory
        // is mounted over; the host made it (create_caches), so it is never made here.
        let dst = under(root, seed.at);
        let cache = writable
            .iter()
            .find(|w| seed.at.starts_with(w))
            .ok_or_else(|| io_at("no writable cache holds", seed.at, "refusing"))?;
        let mut step = under(root, cache);
        for part in seed
            .at
            .strip_prefix(cache)
            .unwrap_or(Path::new(""))
            .components()
        {
            step.push(part);
            match std::fs::symlink_metadata(&step) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(io_at(
                        "not a directory:",
                        &step,
                        "refusing to mount over it",
                    ));
                }
                Err(e) => return Err(io_at("stat", &step, e)),
            }
        }
        // Our own staging paths (no ',' or ':', which the option string would split on).
        overlay_as_sandbox(&dst, &lower, &layers.join("upper"), &layers.join("work"))
            .map_err(|e| io_at("mounting the seeded overlay at", seed.at, e))
    })();
    unstage();
    result
}

/// Mounts an overlay of `lower` with `upper` and `work` at `dst`, as the sandbox user.
///
/// The overlay does its own work (its work dir, every copy-up, whiteouts) with the
/// mounter's credentials, and its layers show their owner as the sandbox user only: mount
/// as that user's filesystem ids (the mount capability stays), so what the overlay writes
/// lands as the layer's owner. Restored at once after. The paths are this module's own
/// (no ',' or ':', which the option string would split on).
fn overlay_as_sandbox(dst: &Path, lower: &Path, upper: &Path, work: &Path) -> nix::Result<()> {
    let options = format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        lower.display(),
        upper.display(),
        work.display()
    );
    let uid = nix::unistd::Uid::from_raw(super::SANDBOX_UID);
    let gid = nix::unistd::Gid::from_raw(super::SANDBOX_GID);
    let (old_uid, old_gid) = (nix::unistd::setfsuid(uid), nix::unistd::setfsgid(gid));
    // The fsuid change dropped the filesystem capabilities the overlay's own work needs
    // (its work dir is mode 0000): back, for this mount only (restored with the ids).
    let raised = super::caps::raise_effective();
    let mounted = raised
        .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EPERM)))
        .and_then(|()| {
            mount(
                Some("overlay"),
                dst,
                Some("overlay"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(options.as_str()),
            )
        });
    nix::unistd::setfsuid(old_uid);
    nix::unistd::setfsgid(old_gid);
    mounted
}

/// Gives the directory `at` (inside a read-only entry, already bound) a writable layer of
/// this sandbox's own: an overlay whose lower layer is that read-only bind and whose upper
/// and work directories lie on a small tmpfs staged here and detached right after, so
/// nothing inside reaches them except through the overlay. The host's directory is never
/// written (a lower layer never is), and the layer goes with the mount namespace.
fn mount_scratch(root: &Path, i: usize, at: &Path) -> Result<(), String> {
    let dst = under(root, at);
    // The read-only bind put the host's directory here; the orchestrator only names real
    // directories, and the bind cannot have changed since: still, never mount over a link.
    match std::fs::symlink_metadata(&dst) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(io_at("not a directory:", at, "refusing to mount over it")),
        Err(e) => return Err(io_at("stat", at, e)),
    }
    let stage = root.join(format!("run/cordon-scratch/{i}"));
    mkdir_all(&stage)?;
    // A handful of shims, not a place for data: a small cap keeps a runaway writer from
    // filling memory.
    tmpfs(
        &stage,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        "mode=0755,size=16m",
    )?;
    let result = (|| {
        let (upper, work) = (stage.join("upper"), stage.join("work"));
        for dir in [&upper, &work] {
            std::fs::create_dir(dir).map_err(|e| io_at("mkdir", dir, e))?;
            // The overlay's root takes its owner from the upper directory: the sandbox
            // user's, so its commands may write there.
            std::os::unix::fs::chown(dir, Some(super::SANDBOX_UID), Some(super::SANDBOX_GID))
                .map_err(|e| io_at("chown", dir, e))?;
        }
        overlay_as_sandbox(&dst, &dst, &upper, &work)
            .map_err(|e| io_at("mounting the scratch overlay at", at, e))
    })();
    let _ = umount2(stage.as_path(), MntFlags::MNT_DETACH);
    result
}

/// Makes `root` the root of this mount namespace and drops the old root entirely.
fn pivot(root: &Path) -> Result<(), String> {
    nix::unistd::chdir(root).map_err(|e| io_at("chdir", root, e))?;
    // pivot_root(".", "."): the old root ends up stacked under the new one, then detached.
    nix::unistd::pivot_root(".", ".").map_err(|e| format!("pivot_root: {e}"))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| format!("detaching the old root: {e}"))?;
    nix::unistd::chdir("/").map_err(|e| format!("chdir /: {e}"))
}

/// Whether this host can create idmapped mounts of `path` (needs host root).
pub fn probe_idmap(path: &Path) -> Result<(), super::LaunchError> {
    let map = format!("0 {} 1\n", super::DEFAULT_UID_BASE);
    let ns = super::userns::new_userns_fd(&map, &map)?;
    idmapped_clone(path, &ns)
        .map(drop)
        .map_err(|source| super::LaunchError::Idmap {
            path: path.to_path_buf(),
            source,
        })
}
