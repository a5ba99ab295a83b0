//! The Landlock ruleset, built from `policies/landlock/default.json` (embedded) plus the
//! session's writable roots from the configuration.
//!
//! Rights are requested as of [`TARGET_ABI`]; the kernel's actual ABI is measured and
//! every right it cannot enforce is named, so the caller can fail closed.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, PathFd, PathFdError, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use serde::Deserialize;

use super::{ConfineError, sys};
use crate::config::AgentConfig;

/// The default policy, as shipped.
pub const DEFAULT_POLICY: &str = include_str!("../../../policies/landlock/default.json");

/// The ABI whose rights we request and have tested: filesystem rights up to device ioctl
/// (ABI 5), TCP bind/connect (ABI 4), abstract unix socket and signal scopes (ABI 6).
/// ABI 7 adds only audit-logging flags.
pub const TARGET_ABI: ABI = ABI::V7;
const TARGET_ABI_NUMBER: u32 = 7;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandlockPolicy {
    pub version: u32,
    pub why: String,
    pub paths: Vec<PathRule>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRule {
    pub path: PathBuf,
    pub access: PathAccess,
    pub why: String,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PathAccess {
    /// Read files, list directories.
    Read,
    /// Read, list and execute.
    ReadExecute,
    /// Every right (for a single file: read, write, truncate, device ioctl; never execute).
    ReadWrite,
}

/// What the kernel enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockOutcome {
    /// The kernel's Landlock ABI (0: unavailable).
    pub abi: u32,
    pub fully_enforced: bool,
    /// Each right or feature not enforced, in words.
    pub missing: Vec<String>,
    /// Policy paths skipped because they do not exist here.
    pub skipped: Vec<PathBuf>,
}

fn policy_err(msg: impl Into<String>) -> ConfineError {
    ConfineError::LandlockPolicy(msg.into())
}

impl LandlockPolicy {
    pub fn parse(text: &str) -> Result<Self, ConfineError> {
        let policy: LandlockPolicy =
            serde_json::from_str(text).map_err(|e| policy_err(e.to_string()))?;
        if policy.version != 1 {
            return Err(policy_err(format!(
                "unsupported version {}",
                policy.version
            )));
        }
        for rule in &policy.paths {
            if !rule.path.is_absolute() {
                return Err(policy_err(format!(
                    "{}: paths must be absolute",
                    rule.path.display()
                )));
            }
            if rule.why.trim().is_empty() {
                return Err(policy_err(format!("{}: no \"why\"", rule.path.display())));
            }
        }
        Ok(policy)
    }

    pub fn default_policy() -> Result<Self, ConfineError> {
        static PARSED: std::sync::OnceLock<Option<LandlockPolicy>> = std::sync::OnceLock::new();
        super::parsed_once(&PARSED, || Self::parse(DEFAULT_POLICY))
    }
}

fn rights(access: PathAccess, is_dir: bool) -> BitFlags<AccessFs> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let all = AccessFs::from_all(TARGET_ABI);
    let wanted = match access {
        PathAccess::Read => read,
        PathAccess::ReadExecute => read | AccessFs::Execute,
        PathAccess::ReadWrite if is_dir => all,
        PathAccess::ReadWrite => all & !AccessFs::Execute,
    };
    if is_dir {
        wanted
    } else {
        wanted & AccessFs::from_file(TARGET_ABI)
    }
}

/// Opens `path` for a rule; `None` when it does not exist.
fn open(path: &Path) -> Result<Option<(PathFd, bool)>, ConfineError> {
    match PathFd::new(path) {
        Ok(fd) => {
            let is_dir = std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
            Ok(Some((fd, is_dir)))
        }
        Err(PathFdError::OpenCall { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(e) => Err(ConfineError::LandlockPath {
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        }),
    }
}

/// What the kernel's ABI cannot enforce of what we request.
pub fn missing_for_abi(abi: u32, network: bool) -> Vec<String> {
    let mut missing = Vec::new();
    if abi == 0 {
        missing.push("landlock is not available in this kernel (or disabled at boot)".into());
        return missing;
    }
    if abi < 2 {
        missing.push("cross-directory rename/link control (landlock abi 2)".into());
    }
    if abi < 3 {
        missing.push("truncate control (landlock abi 3)".into());
    }
    if abi < 4 && !network {
        missing.push("tcp bind/connect denial (landlock abi 4)".into());
    }
    if abi < 5 {
        missing.push("device ioctl control (landlock abi 5)".into());
    }
    if abi < 6 {
        missing.push("abstract unix socket and signal scoping (landlock abi 6)".into());
    }
    missing
}

/// Restricts the calling thread (and its future children) to the policy plus the
/// configuration's writable roots. Call while single-threaded.
pub fn restrict_self(
    policy: &LandlockPolicy,
    config: &AgentConfig,
) -> Result<LandlockOutcome, ConfineError> {
    let abi = sys::landlock_abi();
    let ruleset_err = ConfineError::LandlockRuleset;
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(ruleset_err)?;
    // With egress only (no local binding), TCP is limited to connecting to the bridge:
    // the namespace has no route out anyway, and this also keeps commands from serving
    // or reaching ports inside the sandbox the policy did not grant.
    let egress_port = config
        .egress
        .as_ref()
        .filter(|e| !e.policy.allow_local_binding)
        .map(|e| e.port);
    if !config.network || egress_port.is_some() {
        // Handled with no rule (or only the bridge's): every other TCP bind and connect
        // is refused.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .map_err(ruleset_err)?;
    }
    let mut created = ruleset
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(ruleset_err)?
        .create()
        .map_err(ruleset_err)?;

    let mut skipped = Vec::new();
    for rule in &policy.paths {
        match open(&rule.path)? {
            Some((fd, is_dir)) => {
                created = created
                    .add_rule(PathBeneath::new(fd, rights(rule.access, is_dir)))
                    .map_err(ruleset_err)?;
            }
            None => skipped.push(rule.path.clone()),
        }
    }
    for path in &config.extra_readable {
        // Vanished since the backend looked (a toolchain removed): nothing to grant.
        if let Some((fd, is_dir)) = open(path)? {
            created = created
                .add_rule(PathBeneath::new(
                    fd,
                    rights(PathAccess::ReadExecute, is_dir),
                ))
                .map_err(ruleset_err)?;
        }
    }
    // The session CA's bundle (certificates only), read by the commands' TLS clients.
    if let Some(ca) = config.egress.as_ref().and_then(|e| e.ca.as_ref())
        && let Some((fd, is_dir)) = open(&ca.bundle)?
    {
        created = created
            .add_rule(PathBeneath::new(fd, rights(PathAccess::Read, is_dir)))
            .map_err(ruleset_err)?;
    }
    for root in config.writable_roots() {
        // A writable root that does not exist is a configuration error, not a skip.
        let (fd, is_dir) = open(&root)?.ok_or_else(|| ConfineError::LandlockPath {
            path: root.clone(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
        created = created
            .add_rule(PathBeneath::new(fd, rights(PathAccess::ReadWrite, is_dir)))
            .map_err(ruleset_err)?;
    }
    if let Some(port) = egress_port {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(ruleset_err)?;
    }
    let status = created.restrict_self().map_err(ruleset_err)?;

    let mut missing = missing_for_abi(abi, config.network);
    let fully_enforced = status.ruleset == RulesetStatus::FullyEnforced;
    if !fully_enforced && missing.is_empty() {
        missing.push(format!(
            "the kernel enforced the landlock ruleset only partially ({:?})",
            status.ruleset
        ));
    }
    if fully_enforced && abi < TARGET_ABI_NUMBER {
        // Nothing we asked for is lacking; only newer, unrequested features are.
        missing.clear();
    }
    Ok(LandlockOutcome {
        abi,
        fully_enforced: fully_enforced && missing.is_empty(),
        missing,
        skipped,
    })
}

#[cfg(test)]
#[path = "landlock_tests.rs"]
mod tests;
