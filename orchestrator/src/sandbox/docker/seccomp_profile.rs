//! The container-wide seccomp profile in Docker's JSON format, generated from the same
//! policy file the agent compiles for itself (`policies/seccomp/default.json`), so the two
//! layers never disagree about what is denied.
//!
//! Mapping, and where it is not one-to-one:
//! - `default_action: allow` → `defaultAction: SCMP_ACT_ALLOW`; `errno_eperm` / `errno_enosys`
//!   → `SCMP_ACT_ERRNO` with `errnoRet` 1 / 38; `kill_process` → `SCMP_ACT_KILL_PROCESS`.
//! - `abi.foreign_arch`: the profile lists only `SCMP_ARCH_X86_64`; libseccomp gives calls of
//!   any other architecture (i386 via int 0x80) its bad-arch action, which kills. x32 calls
//!   (bit 0x40000000) are also outside the x86_64 table libseccomp generates for, so they hit
//!   the same path; the agent's own filter checks that bit explicitly as well.
//! - `when_any` (a list of conjunctions): Docker ANDs the `args` of one entry when they
//!   name different arguments and ORs separate entries of the same name, so each
//!   conjunction becomes one entry. Comparisons of ONE argument in one entry Docker ORs
//!   (it makes a rule of each): "family ≠ AF_UNIX and ≠ AF_INET and ≠ AF_INET6" would
//!   refuse every family. A conjunction of `ne` on one dword argument (a value outside an
//!   allowed set) therefore becomes the set's complement, the 32-bit values outside it
//!   as aligned blocks, one `SCMP_CMP_MASKED_EQ` entry each (see [`outside`]).
//! - `width: dword`: Docker's comparisons are 64-bit. `eq` on a dword becomes
//!   `SCMP_CMP_MASKED_EQ` with mask 0xffffffff (so high garbage bits cannot dodge a match);
//!   `masked_eq` keeps its mask (the value's high bits are zero, same result); `ne` stays a
//!   64-bit `SCMP_CMP_NE`, which only denies more (a value with high bits set is never
//!   equal, so it is refused: fail closed).
//! - `network: denied|granted` rules are included according to the session's grant.
//! - `processes: children` rules are left out: the profile binds every process of the
//!   container, the agent included, and the agent installs those rules on its children.
//! - Landlock, seccomp and prctl are not in the deny list, so the agent can confine itself
//!   inside the container (its own filter stacks on this one).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::sandbox::SandboxError;

/// The policy, compiled in: a profile must never depend on the working directory.
const POLICY: &str = include_str!("../../../../policies/seccomp/default.json");

#[derive(Debug, Deserialize)]
struct Policy {
    default_action: String,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
struct Rule {
    syscalls: Vec<String>,
    action: String,
    #[serde(default)]
    when_any: Vec<Vec<Cond>>,
    #[serde(default)]
    network: Option<String>,
    #[serde(default)]
    processes: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Cond {
    arg: u32,
    #[serde(default)]
    width: Option<String>,
    op: String,
    value: Value,
    #[serde(default)]
    mask: Option<Value>,
}

/// Generates the Docker profile for a session whose network access is `network`.
pub fn docker_profile(network: bool) -> Result<Value, SandboxError> {
    let bad = |why: String| SandboxError::Docker(format!("seccomp policy: {why}"));
    let policy: Policy = serde_json::from_str(POLICY).map_err(|e| bad(e.to_string()))?;
    let default = action(&policy.default_action).ok_or_else(|| bad("unknown default".into()))?;
    let mut syscalls = Vec::new();
    for rule in &policy.rules {
        match rule.network.as_deref() {
            Some("denied") if network => continue,
            Some("granted") if !network => continue,
            None | Some("denied") | Some("granted") => {}
            Some(other) => return Err(bad(format!("unknown network scope {other}"))),
        }
        // A container-wide profile binds the agent too: rules for the agent's children only
        // (openat2, which the agent itself needs for RESOLVE_BENEATH) stay with the
        // children's own filter, which the agent installs before each exec.
        // clone3 moves to the children only where namespace counts are capped at 0, which
        // no container does: container-wide, as before.
        match rule.processes.as_deref() {
            None | Some("all") | Some("children_when_namespaces_capped") => {}
            Some("children") => continue,
            Some(other) => return Err(bad(format!("unknown processes scope {other}"))),
        }
        let (act, errno) =
            action(&rule.action).ok_or_else(|| bad(format!("unknown action {}", rule.action)))?;
        let conjunctions: Vec<Vec<Value>> = if rule.when_any.is_empty() {
            vec![Vec::new()]
        } else {
            let mut all = Vec::new();
            for conj in &rule.when_any {
                all.extend(docker_conjunction(conj).map_err(bad)?);
            }
            all
        };
        for args in conjunctions {
            let mut entry = json!({ "names": rule.syscalls, "action": act, "args": args });
            if let Some(errno) = errno {
                entry["errnoRet"] = json!(errno);
            }
            syscalls.push(entry);
        }
    }
    Ok(json!({
        "defaultAction": default.0,
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": syscalls,
    }))
}

/// Docker action and errno for a policy action.
fn action(name: &str) -> Option<(&'static str, Option<i64>)> {
    Some(match name {
        "allow" => ("SCMP_ACT_ALLOW", None),
        "errno_eperm" => ("SCMP_ACT_ERRNO", Some(i64::from(libc::EPERM))),
        "errno_enosys" => ("SCMP_ACT_ERRNO", Some(i64::from(libc::ENOSYS))),
        "kill_process" => ("SCMP_ACT_KILL_PROCESS", None),
        _ => return None,
    })
}

/// One policy conjunction as Docker entries' `args` (ORed): one entry, or, where it
/// compares one argument more than once, one per block of [`outside`].
fn docker_conjunction(conj: &[Cond]) -> Result<Vec<Vec<Value>>, String> {
    let repeated = conj
        .iter()
        .find(|c| conj.iter().filter(|o| o.arg == c.arg).count() > 1)
        .map(|c| c.arg);
    let Some(arg) = repeated else {
        return Ok(vec![conj.iter().map(docker_arg).collect::<Result<_, _>>()?]);
    };
    let (same, others): (Vec<&Cond>, Vec<&Cond>) = conj.iter().partition(|c| c.arg == arg);
    if others
        .iter()
        .any(|c| others.iter().filter(|o| o.arg == c.arg).count() > 1)
        || same
            .iter()
            .any(|c| c.op != "ne" || c.width.as_deref() != Some("dword"))
    {
        return Err(format!(
            "argument {arg} is compared more than once; only a set of dword `ne` \
             comparisons can be expressed for Docker"
        ));
    }
    let allowed: Vec<u32> = same
        .iter()
        .map(|c| {
            let v = resolve(&c.value)?;
            u32::try_from(v).map_err(|_| format!("dword value {v:#x} out of range"))
        })
        .collect::<Result<_, String>>()?;
    let rest: Vec<Value> = others
        .iter()
        .map(|c| docker_arg(c))
        .collect::<Result<_, _>>()?;
    Ok(outside(&allowed)
        .into_iter()
        .map(|(mask, value)| {
            let mut args = rest.clone();
            args.push(json!({
                "index": arg, "value": mask, "valueTwo": value, "op": "SCMP_CMP_MASKED_EQ"
            }));
            args
        })
        .collect())
}

/// Every 32-bit value not in `allowed`, as (mask, value) blocks: `x & mask == value`
/// holds exactly for the values of one aligned block. The masks keep to the low 32 bits,
/// which is what the kernel reads of a dword argument, so high garbage bits cannot move a
/// value into or out of a block.
fn outside(allowed: &[u32]) -> Vec<(u64, u64)> {
    let mut sorted: Vec<u64> = allowed.iter().map(|&v| u64::from(v)).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut blocks = Vec::new();
    let mut from = 0u64;
    for end in sorted.iter().copied().chain(std::iter::once(1 << 32)) {
        // The gap [from, end): split into the largest aligned blocks.
        let mut at = from;
        while at < end {
            let align = if at == 0 {
                1 << 32
            } else {
                1u64 << at.trailing_zeros()
            };
            let mut size = align;
            while at + size > end {
                size >>= 1;
            }
            blocks.push((0xffff_ffff & !(size - 1), at));
            at += size;
        }
        from = end + 1;
    }
    blocks
}

fn docker_arg(cond: &Cond) -> Result<Value, String> {
    let value = resolve(&cond.value)?;
    let dword = cond.width.as_deref() == Some("dword");
    let (op, value, two) = match cond.op.as_str() {
        "eq" if dword => ("SCMP_CMP_MASKED_EQ", 0xffff_ffff, value),
        "eq" => ("SCMP_CMP_EQ", value, 0),
        "ne" => ("SCMP_CMP_NE", value, 0),
        "masked_eq" => {
            let mask = cond.mask.as_ref().ok_or("masked_eq without a mask")?;
            ("SCMP_CMP_MASKED_EQ", resolve(mask)?, value)
        }
        "lt" => ("SCMP_CMP_LT", value, 0),
        "le" => ("SCMP_CMP_LE", value, 0),
        "gt" => ("SCMP_CMP_GT", value, 0),
        "ge" => ("SCMP_CMP_GE", value, 0),
        other => return Err(format!("unknown comparison {other}")),
    };
    Ok(json!({ "index": cond.arg, "value": value, "valueTwo": two, "op": op }))
}

/// A number, or the name of a kernel constant the policy uses.
fn resolve(v: &Value) -> Result<u64, String> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    let name = v.as_str().ok_or_else(|| format!("bad value {v}"))?;
    if let Some(hex) = name.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).map_err(|e| format!("{name}: {e}"));
    }
    // The agent's own table: one list of the kernel constants the policy may name.
    sandbox_agent::confine::names::constant(name).ok_or_else(|| format!("unknown constant {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries_for<'a>(profile: &'a Value, name: &str) -> Vec<&'a Value> {
        profile["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["names"].as_array().unwrap().iter().any(|n| n == name))
            .collect()
    }

    #[test]
    fn the_policy_generates_a_profile() {
        let p = docker_profile(false).unwrap();
        assert_eq!(p["defaultAction"], "SCMP_ACT_ALLOW");
        assert_eq!(p["architectures"], json!(["SCMP_ARCH_X86_64"]));
        for denied in [
            "ptrace",
            "mount",
            "unshare",
            "bpf",
            "keyctl",
            "io_uring_setup",
        ] {
            let e = entries_for(&p, denied);
            assert!(!e.is_empty(), "{denied} must be denied");
            assert_eq!(e[0]["action"], "SCMP_ACT_ERRNO");
            assert_eq!(e[0]["errnoRet"], 1);
        }
        assert_eq!(entries_for(&p, "clone3")[0]["errnoRet"], 38);
    }

    #[test]
    fn landlock_and_seccomp_stay_allowed_for_the_agent() {
        let p = docker_profile(false).unwrap();
        for needed in [
            "landlock_create_ruleset",
            "landlock_add_rule",
            "landlock_restrict_self",
            "seccomp",
            "prctl",
        ] {
            assert!(
                entries_for(&p, needed).is_empty(),
                "{needed} must stay allowed"
            );
        }
    }

    #[test]
    fn each_conjunction_is_one_entry_and_dword_eq_is_masked() {
        let p = docker_profile(false).unwrap();
        assert_eq!(entries_for(&p, "clone").len(), 7);
        let ioctl = entries_for(&p, "ioctl");
        assert_eq!(ioctl.len(), 2);
        assert_eq!(ioctl[0]["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
        assert_eq!(ioctl[0]["args"][0]["value"], 0xffff_ffffu64);
        assert_eq!(ioctl[0]["args"][0]["valueTwo"], libc::TIOCSTI);
        let personality = entries_for(&p, "personality");
        assert!(
            personality
                .iter()
                .all(|e| e["args"].as_array().unwrap().len() == 1),
            "{personality:?}"
        );
    }

    #[test]
    fn network_scoped_rules_follow_the_grant() {
        let without = docker_profile(false).unwrap();
        let with = docker_profile(true).unwrap();
        let socket_args = |p: &Value| {
            entries_for(p, "socket")
                .iter()
                .map(|e| e["args"].as_array().unwrap().len())
                .collect::<Vec<_>>()
        };
        assert_eq!(socket_args(&without), vec![1]);
        // "not UNIX, INET or INET6" as the blocks of every other family (Docker ORs
        // comparisons of one argument): one comparison per entry.
        let with_socket = socket_args(&with);
        assert!(with_socket.len() > 3, "{with_socket:?}");
        assert!(with_socket.iter().all(|n| *n == 1), "{with_socket:?}");
    }

    /// What a Docker entry list refuses for `x`: any entry whose masked compare holds.
    fn refused_by(entries: &[&Value], x: u64) -> bool {
        entries.iter().any(|e| {
            e["args"].as_array().unwrap().iter().all(|a| {
                let (mask, value) = (
                    a["value"].as_u64().unwrap(),
                    a["valueTwo"].as_u64().unwrap(),
                );
                a["op"] == "SCMP_CMP_MASKED_EQ" && x & mask == value
            })
        })
    }

    #[test]
    fn a_set_of_allowed_values_refuses_exactly_the_others() {
        let with = docker_profile(true).unwrap();
        let socket = entries_for(&with, "socket");
        for family in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6] {
            let family = u64::try_from(family).unwrap();
            assert!(!refused_by(&socket, family), "{family} allowed");
            // The kernel reads the low 32 bits: high garbage does not change the answer.
            assert!(
                !refused_by(&socket, family | 1 << 40),
                "{family} with high bits"
            );
        }
        for family in [0, 3, 9, 11, 16, 38, 40, 0xffff_ffff] {
            assert!(refused_by(&socket, family), "{family} refused");
        }
        let personality = entries_for(&with, "personality");
        for allowed in [0u64, 8, 0x40000, 0x40008, 0xffff_ffff] {
            assert!(!refused_by(&personality, allowed), "{allowed:#x}");
        }
        for refused in [1u64, 7, 9, 0x400000, 0x40001, 0x0800_0000, 0xffff_fffe] {
            assert!(refused_by(&personality, refused), "{refused:#x}");
        }
    }

    #[test]
    fn outside_covers_the_complement_once() {
        let blocks = outside(&[1, 2, 10]);
        let total: u64 = blocks.iter().map(|(m, _)| (!m & 0xffff_ffff) + 1).sum();
        assert_eq!(total, (1u64 << 32) - 3);
        assert_eq!(outside(&[]), vec![(0, 0)]);
    }

    #[test]
    fn privilege_bits_bind_the_container_and_children_only_rules_stay_out() {
        let p = docker_profile(false).unwrap();
        let chmod = entries_for(&p, "chmod");
        assert!(
            chmod
                .iter()
                .any(|e| e["args"][0]["value"] == json!(libc::S_ISUID)),
            "{chmod:?}"
        );
        assert!(
            entries_for(&p, "openat2").is_empty(),
            "openat2 is the agent's own; its children get ENOSYS from the agent's filter"
        );
    }
}
