//! Host directories outside the workspace that a local sandbox sees: the user's toolchains
//! read-only at their own paths (so `cargo`, pyenv's `python3`, `~/.local/bin` tools run
//! as they do on the host), secrets inside them hidden, and Cordon's own per-user caches
//! writable. The orchestrator decides what goes here (`orchestrator/src/toolchains/`,
//! from `policies/toolchains.json`); the launcher only checks the shape and mounts it.
//!
//! Why this is sound: every read-only entry is bound `ro,nosuid,nodev`, so nothing inside
//! can change the host's toolchains (a poisoned `rustc` would run on the host later);
//! hidden entries are covered before the root is sealed; caches are Cordon's own
//! directories, never the host's tool caches, and are `nosuid,nodev` too. Hard links from
//! the workspace into a read-only bind fail with EXDEV (different mounts).
//!
//! Seeded caches: a part of a cache may show the host's own cache of that tool beneath it,
//! as the read-only lower layer of an overlay whose upper layer is Cordon's. The kernel
//! never writes an overlay's lower layer: a change, a deletion or a hard link inside
//! copies the file up into Cordon's layer first, so nothing a session does reaches the
//! cache the user's own builds trust, and its secrets (if a cache held any) are no more
//! exposed than the policy's read-only roots are. The layers directory (upper and work)
//! lies outside every entry the sandbox sees, so nothing inside can reach the overlay's
//! bookkeeping except through the overlay.
//!
//! Scratch directories: a directory inside a read-only entry that its tool rewrites as it
//! runs (pyenv's shims after `pip install`) is shown as an overlay whose lower layer is the
//! read-only bind and whose upper layer lies on a small tmpfs made inside the sandbox's
//! mount namespace and detached from every path at once. The host's directory is never
//! written (the kernel never writes a lower layer), and what a session writes there is
//! seen by that session only and goes with its namespace. An overlay's lower layer does
//! not carry the mounts beneath it, so a scratch directory may hold no hidden path and no
//! other entry (they would show through).

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::LaunchError;

/// What of the host the sandbox sees beyond its system dirs and workspace.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostView {
    /// Absolute host paths (directories or files) shown read-only and executable at the
    /// same path.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Absolute paths inside `read_only` entries covered by an empty, unreadable file or
    /// directory (credentials that live next to a toolchain).
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// Absolute host directories shown writable at the same path (Cordon's caches).
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// Parts of the writable entries shown as an overlay over a host cache.
    #[serde(default)]
    pub seeded: Vec<SeededCache>,
    /// Directories inside read-only entries that a session may change for itself (a
    /// version manager's shims): an overlay over the read-only bind, its upper layer on a
    /// tmpfs of the sandbox's own, gone with it.
    #[serde(default)]
    pub scratch: Vec<PathBuf>,
}

/// An overlay at `at` (inside a writable entry): the host's `lower` read-only beneath,
/// Cordon's `layers/upper` above, `layers/work` its scratch (same filesystem).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SeededCache {
    pub at: PathBuf,
    pub lower: PathBuf,
    pub layers: PathBuf,
}

impl SeededCache {
    pub fn upper(&self) -> PathBuf {
        self.layers.join("upper")
    }
    pub fn work(&self) -> PathBuf {
        self.layers.join("work")
    }
}

impl HostView {
    pub fn is_empty(&self) -> bool {
        self.read_only.is_empty() && self.writable.is_empty()
    }

    /// Refuses anything the mounts could not place safely: relative or unnormalized paths,
    /// `/`, an entry overlapping the workspace or the session's state dir, a hidden path
    /// outside every read-only entry, a writable entry inside a read-only one.
    pub fn validate(&self, workspace: &Path, state_dir: &Path) -> Result<(), LaunchError> {
        let bad = |p: &Path, why: &str| {
            Err(LaunchError::Config(format!(
                "host view entry {}: {why}",
                p.display()
            )))
        };
        for p in self
            .read_only
            .iter()
            .chain(&self.hidden)
            .chain(&self.writable)
        {
            if !normal_absolute(p) {
                return bad(p, "must be absolute, without . or .. components");
            }
            if p == Path::new("/") {
                return bad(p, "the root cannot be an entry");
            }
            for other in [workspace, state_dir] {
                if p.starts_with(other) || other.starts_with(p) {
                    return bad(p, "overlaps the workspace or the session state");
                }
            }
        }
        for p in &self.hidden {
            if !self.read_only.iter().any(|r| p.starts_with(r) && p != r) {
                return bad(p, "hidden paths must lie inside a read-only entry");
            }
        }
        for p in &self.writable {
            if self
                .read_only
                .iter()
                .any(|r| p.starts_with(r) || r.starts_with(p))
            {
                return bad(p, "a writable entry may not overlap a read-only one");
            }
        }
        for s in &self.seeded {
            for p in [&s.at, &s.lower, &s.layers] {
                if !normal_absolute(p) || p == Path::new("/") {
                    return bad(p, "must be absolute, without . or .. components");
                }
                for other in [workspace, state_dir] {
                    if p.starts_with(other) || other.starts_with(p) {
                        return bad(p, "overlaps the workspace or the session state");
                    }
                }
            }
            if !self.writable.iter().any(|w| s.at.starts_with(w)) {
                return bad(&s.at, "a seeded cache must lie inside a writable entry");
            }
            // The sandbox may see the overlay, never its layers: writing the upper or work
            // directory behind the overlay's back is undefined, and the lower is the host's.
            let seen = self.writable.iter().chain(&self.read_only);
            for v in seen {
                for (p, what) in [(&s.layers, "layers"), (&s.lower, "lower layer")] {
                    if p.starts_with(v) || v.starts_with(p) {
                        return bad(p, &format!("a seeded cache's {what} may not be seen"));
                    }
                }
            }
            if s.lower.starts_with(&s.layers) || s.layers.starts_with(&s.lower) {
                return bad(&s.lower, "a seeded cache's layers overlap its lower layer");
            }
        }
        for p in &self.scratch {
            if !normal_absolute(p) {
                return bad(p, "must be absolute, without . or .. components");
            }
            if !self.read_only.iter().any(|r| p.starts_with(r) && p != r) {
                return bad(p, "a scratch directory must lie inside a read-only entry");
            }
            let holds = self
                .hidden
                .iter()
                .chain(&self.writable)
                .chain(
                    self.seeded
                        .iter()
                        .flat_map(|s| [&s.at, &s.lower, &s.layers]),
                )
                .chain(self.read_only.iter().filter(|r| !p.starts_with(r)))
                .any(|q| q.starts_with(p));
            if holds {
                return bad(p, "a scratch directory may not hold another entry");
            }
            for other in [workspace, state_dir] {
                if p.starts_with(other) || other.starts_with(p) {
                    return bad(p, "overlaps the workspace or the session state");
                }
            }
        }
        Ok(())
    }

    /// Read-only entries, parents before the entries nested in them (mount order).
    pub fn read_only_in_mount_order(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> = self.read_only.iter().map(PathBuf::as_path).collect();
        v.sort_by_key(|p| p.components().count());
        v
    }
}

fn normal_absolute(p: &Path) -> bool {
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(ro: &[&str], hidden: &[&str], writable: &[&str]) -> HostView {
        let v = |s: &[&str]| s.iter().map(PathBuf::from).collect();
        HostView {
            read_only: v(ro),
            hidden: v(hidden),
            writable: v(writable),
            seeded: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn seeded(at: &str, lower: &str, layers: &str) -> HostView {
        let mut v = view(&["/home/u/.rustup"], &[], &["/home/u/.cordon/caches/cargo"]);
        v.seeded.push(SeededCache {
            at: at.into(),
            lower: lower.into(),
            layers: layers.into(),
        });
        v
    }

    #[test]
    fn a_seeded_cache_lies_in_a_writable_entry_and_its_layers_stay_unseen() {
        let layers = "/home/u/.cordon/caches/.seeded/cargo-0";
        check(&seeded(
            "/home/u/.cordon/caches/cargo/registry",
            "/home/u/.cargo/registry",
            layers,
        ))
        .unwrap();
        for v in [
            // Not inside a writable entry.
            seeded("/home/u/elsewhere", "/home/u/.cargo/registry", layers),
            // Layers or lower the sandbox would see.
            seeded(
                "/home/u/.cordon/caches/cargo/registry",
                "/home/u/.cargo/registry",
                "/home/u/.cordon/caches/cargo/layers",
            ),
            seeded(
                "/home/u/.cordon/caches/cargo/registry",
                "/home/u/.rustup/x",
                layers,
            ),
            seeded(
                "/home/u/.cordon/caches/cargo/registry",
                "/home/u/.cordon/caches/cargo",
                layers,
            ),
            // The workspace, relative paths.
            seeded("/home/u/.cordon/caches/cargo/r", "/work/p/cache", layers),
            seeded("/home/u/.cordon/caches/cargo/r", "relative", layers),
            seeded(
                "/home/u/.cordon/caches/cargo/r",
                "/home/u/.cargo/registry",
                "/home/u/.cargo/registry/layers",
            ),
        ] {
            assert!(check(&v).is_err(), "{v:?}");
        }
    }

    fn check(v: &HostView) -> Result<(), LaunchError> {
        v.validate(Path::new("/work/p"), Path::new("/root/.cordon/run/s"))
    }

    #[test]
    fn a_toolchain_view_is_accepted() {
        let v = view(
            &["/home/u/.cargo/bin", "/home/u/.rustup", "/home/u/.pyenv"],
            &["/home/u/.pyenv/secret.txt"],
            &["/home/u/.cordon/caches/cargo"],
        );
        check(&v).unwrap();
        assert_eq!(
            v.read_only_in_mount_order()[0],
            Path::new("/home/u/.rustup")
        );
    }

    #[test]
    fn shapes_that_could_widen_or_misplace_are_refused() {
        for v in [
            view(&["relative/bin"], &[], &[]),
            view(&["/home/u/../../etc"], &[], &[]),
            view(&["/"], &[], &[]),
            view(&["/work"], &[], &[]),
            view(&["/work/p/sub"], &[], &[]),
            view(&["/root/.cordon"], &[], &[]),
            view(&["/home/u/.cargo"], &["/home/u/.ssh/id"], &[]),
            view(&["/home/u/.cargo"], &["/home/u/.cargo"], &[]),
            view(&["/home/u/.cargo"], &[], &["/home/u/.cargo/registry"]),
            view(&[], &[], &["/home"]).with_ro("/home/u/.local/bin"),
        ] {
            assert!(check(&v).is_err(), "{v:?} was accepted");
        }
    }

    #[test]
    fn a_scratch_directory_lies_inside_a_read_only_entry_and_holds_nothing_else() {
        let scratch = |dir: &str, v: HostView| HostView {
            scratch: vec![PathBuf::from(dir)],
            ..v
        };
        let pyenv = || view(&["/home/u/.pyenv"], &[], &[]);
        check(&scratch("/home/u/.pyenv/shims", pyenv())).unwrap();
        for v in [
            // The entry itself, outside every entry, relative.
            scratch("/home/u/.pyenv", pyenv()),
            scratch("/home/u/elsewhere/shims", pyenv()),
            scratch("home/u/.pyenv/shims", pyenv()),
            // A hidden secret or a nested entry inside would show through the overlay.
            scratch(
                "/home/u/.pyenv/shims",
                view(&["/home/u/.pyenv"], &["/home/u/.pyenv/shims/token"], &[]),
            ),
            scratch(
                "/home/u/.pyenv/shims",
                view(&["/home/u/.pyenv", "/home/u/.pyenv/shims/bin"], &[], &[]),
            ),
        ] {
            assert!(check(&v).is_err(), "{v:?} was accepted");
        }
    }

    impl HostView {
        fn with_ro(mut self, p: &str) -> Self {
            self.read_only.push(p.into());
            self
        }
    }
}
