//! `sandbox.limits`: a session's memory, process and CPU limits.
//!
//! ```json
//! {"sandbox": {"limits": {"memory": "1g", "pids": 512, "cpus": 1, "disk": "10g",
//!                         "bestEffort": false}}}
//! ```
//!
//! `memory` and `disk` are bytes, or a string with a `k`, `m`, `g` or `t` suffix (binary
//! multiples); `cpus` may be fractional. The defaults are the Docker backend's: 1 GiB,
//! 512, 1 CPU; `disk` (how much the session may grow its workspace, checked after each
//! command, local backend) has none.
//! Unknown keys and out-of-range values are errors: a typo must not leave a limit other
//! than the one the user wrote.
//!
//! Who may set what: the highest of the managed, CLI and user settings gives each value;
//! the repository's own settings (project, local) may only lower a limit, never raise
//! it, and cannot ask for `bestEffort` (starting without limits is the operator's call).

use serde_json::Value;

use super::Settings;
use sandbox_agent::cgroup::SessionLimits;

/// Smallest memory limit accepted: below this the agent itself cannot run.
const MIN_MEMORY: u64 = 32 * 1024 * 1024;
/// Smallest pids limit accepted: the init, the agent's threads and a shell.
const MIN_PIDS: u64 = 32;
const MAX_CPUS: f64 = 1024.0;

/// The values one settings file gives; `None` where it is silent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitValues {
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
    pub cpu_millis: Option<u64>,
    pub disk_bytes: Option<u64>,
    pub best_effort: Option<bool>,
}

/// Parses `sandbox.limits`; the error names the key and the problem.
pub fn parse(value: &Value) -> Result<LimitValues, String> {
    let obj = value
        .as_object()
        .ok_or("sandbox.limits: expected an object")?;
    let mut out = LimitValues::default();
    for (key, v) in obj {
        let path = format!("sandbox.limits.{key}");
        match key.as_str() {
            "memory" => out.memory_bytes = Some(memory(v).map_err(|e| format!("{path}: {e}"))?),
            "disk" => out.disk_bytes = Some(memory(v).map_err(|e| format!("{path}: {e}"))?),
            "pids" => {
                let n = v.as_u64().filter(|n| *n >= MIN_PIDS).ok_or(format!(
                    "{path}: expected an integer of at least {MIN_PIDS}"
                ))?;
                out.pids = Some(n);
            }
            "cpus" => {
                let c = v
                    .as_f64()
                    .filter(|c| *c >= 0.01 && *c <= MAX_CPUS)
                    .ok_or(format!("{path}: expected a number from 0.01 to {MAX_CPUS}"))?;
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let millis = (c * 1000.0).round() as u64;
                out.cpu_millis = Some(millis);
            }
            "bestEffort" => {
                out.best_effort = Some(v.as_bool().ok_or(format!("{path}: expected a boolean"))?);
            }
            _ => {
                return Err(format!(
                    "{path}: unknown key (memory, pids, cpus, disk, bestEffort)"
                ));
            }
        }
    }
    Ok(out)
}

fn memory(v: &Value) -> Result<u64, String> {
    let bytes = match v {
        Value::Number(n) => n.as_u64().ok_or("expected a whole number of bytes")?,
        Value::String(s) => parse_size(s)?,
        _ => return Err("expected bytes or a string such as \"512m\"".into()),
    };
    if bytes < MIN_MEMORY {
        return Err(format!("at least {} MiB", MIN_MEMORY >> 20));
    }
    Ok(bytes)
}

/// "512m", "1G", "1048576", "4k" (binary multiples).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (digits, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        Some('t') => (&t[..t.len() - 1], 40),
        _ => (t.as_str(), 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size such as \"512m\" or \"1g\""))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

impl Settings {
    /// The session limits these settings ask for (see the module docs for who may set
    /// what).
    pub fn sandbox_limits(&self) -> SessionLimits {
        let mut trusted = LimitValues::default();
        let mut repo = LimitValues::default();
        // Files are in precedence order: the first value found wins.
        for f in self.files() {
            let Some(v) = f.value.get("sandbox").and_then(|s| s.get("limits")) else {
                continue;
            };
            let Ok(values) = parse(v) else { continue };
            let into = if f.source.is_repository() {
                &mut repo
            } else {
                &mut trusted
            };
            into.memory_bytes = into.memory_bytes.or(values.memory_bytes);
            into.pids = into.pids.or(values.pids);
            into.cpu_millis = into.cpu_millis.or(values.cpu_millis);
            into.disk_bytes = into.disk_bytes.or(values.disk_bytes);
            into.best_effort = into.best_effort.or(values.best_effort);
        }
        combine(trusted, repo)
    }
}

/// Trusted values over the defaults, then lowered (never raised) by the repository's.
pub fn combine(trusted: LimitValues, repo: LimitValues) -> SessionLimits {
    let d = SessionLimits::default();
    let lower = |t: u64, r: Option<u64>| r.map_or(t, |r| r.min(t));
    SessionLimits {
        memory_bytes: lower(
            trusted.memory_bytes.unwrap_or(d.memory_bytes),
            repo.memory_bytes,
        ),
        pids: lower(trusted.pids.unwrap_or(d.pids), repo.pids),
        cpu_millis: lower(trusted.cpu_millis.unwrap_or(d.cpu_millis), repo.cpu_millis),
        // No trusted budget: the repository's own applies (it can only restrict).
        disk_bytes: match (trusted.disk_bytes, repo.disk_bytes) {
            (Some(t), r) => Some(r.map_or(t, |r| r.min(t))),
            (None, r) => r,
        },
        best_effort: trusted.best_effort.unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_and_cpus_parse_and_bad_values_are_named() {
        let v = parse(&json!({"memory": "512m", "pids": 64, "cpus": 1.5, "disk": "2g"})).unwrap();
        assert_eq!(v.disk_bytes, Some(2 << 30));
        assert_eq!(v.memory_bytes, Some(512 << 20));
        assert_eq!(v.pids, Some(64));
        assert_eq!(v.cpu_millis, Some(1500));
        assert_eq!(
            parse(&json!({"memory": 1 << 30})).unwrap().memory_bytes,
            Some(1 << 30)
        );
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        for (bad, needle) in [
            (json!({"memory": "lots"}), "sandbox.limits.memory"),
            (json!({"memory": "1m"}), "at least 32 MiB"),
            (json!({"pids": 3}), "sandbox.limits.pids"),
            (json!({"cpus": 0}), "sandbox.limits.cpus"),
            (json!({"memroy": "1g"}), "unknown key"),
            (json!([]), "expected an object"),
        ] {
            let err = parse(&bad).unwrap_err();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn the_repository_may_lower_a_limit_but_never_raise_it_or_drop_enforcement() {
        let trusted = LimitValues {
            memory_bytes: Some(2 << 30),
            ..Default::default()
        };
        let repo = LimitValues {
            memory_bytes: Some(256 << 20),
            pids: Some(100_000),
            best_effort: Some(true),
            ..Default::default()
        };
        let l = combine(trusted, repo);
        assert_eq!(l.memory_bytes, 256 << 20);
        assert_eq!(l.pids, 512, "raised by the repository");
        assert_eq!(l.cpu_millis, 1000);
        assert!(!l.best_effort);
        assert_eq!(
            combine(LimitValues::default(), LimitValues::default()),
            SessionLimits::default()
        );
    }
}
