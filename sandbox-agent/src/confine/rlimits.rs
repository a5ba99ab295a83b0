//! Resource limits for children, computed before fork and applied between fork and exec
//! with no allocation.

use std::io;

use super::sys;
use crate::config::Rlimits;

/// One limit to set: (resource, value). Fixed-size so applying it never allocates.
type Limit = (libc::__rlimit_resource_t, u64);

/// The limits every child gets, already clamped to the current hard limits (raising a
/// hard limit needs CAP_SYS_RESOURCE, which the sandbox does not have).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildLimits {
    limits: [Option<Limit>; 4],
}

impl ChildLimits {
    /// Computes the limits from the configuration. Core dumps are always off: a dump could
    /// write a process's memory (secrets included) into the workspace.
    pub fn prepare(config: &Rlimits) -> io::Result<Self> {
        let clamp = |resource, wanted: Option<u64>| -> io::Result<Option<Limit>> {
            match wanted {
                None => Ok(None),
                Some(v) => Ok(Some((resource, v.min(sys::hard_rlimit(resource)?)))),
            }
        };
        Ok(Self {
            limits: [
                Some((libc::RLIMIT_CORE, 0)),
                clamp(libc::RLIMIT_NOFILE, config.nofile)?,
                clamp(libc::RLIMIT_FSIZE, config.fsize)?,
                clamp(libc::RLIMIT_NPROC, config.nproc)?,
            ],
        })
    }

    /// Alloc-free: applies every limit to the calling process.
    pub fn apply(&self) -> io::Result<()> {
        for (resource, value) in self.limits.iter().flatten() {
            sys::setrlimit(*resource, *value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_never_exceed_the_hard_limit_and_core_is_zero() {
        let limits = ChildLimits::prepare(&Rlimits {
            nofile: Some(u64::MAX - 1),
            fsize: None,
            nproc: Some(100),
            core: (),
        })
        .unwrap();
        let nofile_hard = sys::hard_rlimit(libc::RLIMIT_NOFILE).unwrap();
        assert_eq!(limits.limits[0], Some((libc::RLIMIT_CORE, 0)));
        assert_eq!(limits.limits[1], Some((libc::RLIMIT_NOFILE, nofile_hard)));
        assert_eq!(limits.limits[2], None);
        assert_eq!(limits.limits[3].map(|l| l.1), Some(100));
    }
}
