//! The seccomp filter, built from `policies/seccomp/default.json` (embedded in the binary so
//! the static agent is self-contained) and compiled with seccompiler.
//!
//! seccompiler gives each filter one match action, so the policy compiles into up to three
//! stacked programs; the kernel runs all of them and the strictest answer wins
//! (kill > errno > allow):
//! 1. an ABI guard: any foreign architecture (i386 `int 0x80`) or an x32 syscall number
//!    (bit 0x40000000) kills the process;
//! 2. the rules whose action is EPERM;
//! 3. the rules whose action is ENOSYS (clone3).
//!
//! seccompiler's own prologue also kills on an architecture mismatch, so programs 2 and 3
//! are safe on their own as well.
//!
//! Rules marked `"processes": "children"` stay out of those programs: they compile into a
//! [`ChildFilter`] that the executor installs in each child between fork and exec, on top
//! of the filter the child inherits (openat2, which the agent itself needs).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use serde::Deserialize;

use super::ConfineError;
use super::names;

/// The default policy, as shipped.
pub const DEFAULT_POLICY: &str = include_str!("../../../policies/seccomp/default.json");

/// A parsed seccomp policy. Unknown fields are refused.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeccompPolicy {
    pub version: u32,
    pub why: String,
    pub default_action: DefaultAction,
    pub abi: AbiPolicy,
    pub rules: Vec<Rule>,
}

/// Only a default-allow deny list is supported (see policies/README.md).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DefaultAction {
    Allow,
}

/// What happens to calls from another ABI: always kill (not configurable).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbiPolicy {
    pub foreign_arch: KillOnly,
    pub x32: KillOnly,
    pub why: String,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KillOnly {
    KillProcess,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub syscalls: Vec<String>,
    pub action: RuleAction,
    pub why: String,
    /// Whether the rule applies with network granted, denied, or always.
    #[serde(default)]
    pub network: NetworkScope,
    /// Whether the rule binds the agent and its children, or the children only.
    #[serde(default)]
    pub processes: Processes,
    /// Alternatives (any may match), each a list of conditions (all must match). Empty:
    /// the call is denied whatever its arguments.
    #[serde(default)]
    pub when_any: Vec<Vec<Condition>>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    ErrnoEperm,
    ErrnoEnosys,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NetworkScope {
    #[default]
    Always,
    Denied,
    Granted,
}

/// Which processes a rule binds.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Processes {
    /// The agent itself (so every thread and child inherits it).
    #[default]
    All,
    /// Only the commands the agent starts: for calls the agent itself must keep.
    Children,
    /// The agent too, unless the sandbox's user namespace caps every namespace count at
    /// zero (see [`super::sys::namespaces_capped`]): then only the commands. For calls
    /// refused because of the namespaces they could create, which the agent needs for
    /// something else (clone3, to start a command inside its cgroup).
    ChildrenWhenNamespacesCapped,
}

impl Processes {
    /// `All` or `Children`, once it is known whether namespace creation is capped.
    pub fn resolve(self, namespaces_capped: bool) -> Processes {
        match self {
            Processes::ChildrenWhenNamespacesCapped if namespaces_capped => Processes::Children,
            Processes::ChildrenWhenNamespacesCapped => Processes::All,
            p => p,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    pub arg: u8,
    pub width: Width,
    pub op: Op,
    #[serde(default)]
    pub mask: Option<Value>,
    pub value: Value,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Width {
    Dword,
    Qword,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Eq,
    Ne,
    MaskedEq,
}

/// A number or the name of a constant known to [`names::constant`].
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Number(u64),
    Name(String),
}

/// The compiled programs, in installation order.
#[derive(Debug, Clone)]
pub struct SeccompPrograms {
    pub programs: Vec<BpfProgram>,
}

fn policy_err(msg: impl Into<String>) -> ConfineError {
    ConfineError::SeccompPolicy(msg.into())
}

impl Value {
    fn resolve(&self) -> Result<u64, ConfineError> {
        match self {
            Value::Number(n) => Ok(*n),
            Value::Name(name) => names::constant(name)
                .ok_or_else(|| policy_err(format!("unknown constant {name:?}"))),
        }
    }
}

impl SeccompPolicy {
    /// Parses and validates a policy document.
    pub fn parse(text: &str) -> Result<Self, ConfineError> {
        let policy: SeccompPolicy =
            serde_json::from_str(text).map_err(|e| policy_err(e.to_string()))?;
        policy.validate()?;
        Ok(policy)
    }

    /// The embedded default policy.
    pub fn default_policy() -> Result<Self, ConfineError> {
        static PARSED: std::sync::OnceLock<Option<SeccompPolicy>> = std::sync::OnceLock::new();
        super::parsed_once(&PARSED, || Self::parse(DEFAULT_POLICY))
    }

    fn validate(&self) -> Result<(), ConfineError> {
        if self.version != 1 {
            return Err(policy_err(format!("unsupported version {}", self.version)));
        }
        let mut actions: BTreeMap<&str, RuleAction> = BTreeMap::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.why.trim().is_empty() {
                return Err(policy_err(format!("rule {i} has no \"why\"")));
            }
            if rule.syscalls.is_empty() {
                return Err(policy_err(format!("rule {i} names no syscall")));
            }
            for name in &rule.syscalls {
                if names::syscall(name).is_none() && !names::is_foreign_only(name) {
                    return Err(policy_err(format!("rule {i}: unknown syscall {name:?}")));
                }
                // One syscall, one action: a call both EPERM and ENOSYS would be ambiguous.
                if let Some(prev) = actions.insert(name, rule.action)
                    && prev != rule.action
                {
                    return Err(policy_err(format!("{name} has two different actions")));
                }
            }
            for alt in &rule.when_any {
                if alt.is_empty() || alt.len() > 6 {
                    return Err(policy_err(format!(
                        "rule {i}: each alternative needs 1 to 6 conditions"
                    )));
                }
                for cond in alt {
                    cond.to_seccompiler()?;
                }
            }
        }
        Ok(())
    }

    /// Compiles the programs the agent installs on itself, for this build's architecture.
    /// `namespaces_capped`: see [`Processes::ChildrenWhenNamespacesCapped`].
    pub fn compile(
        &self,
        network: bool,
        namespaces_capped: bool,
    ) -> Result<SeccompPrograms, ConfineError> {
        let mut programs = vec![abi_guard()];
        programs.extend(self.compile_rules(network, Processes::All, namespaces_capped)?);
        Ok(SeccompPrograms { programs })
    }

    /// Compiles the children-only rules into the filter each child adds before exec.
    /// Compile it before any fork: installing it must not allocate.
    pub fn compile_children(
        &self,
        network: bool,
        namespaces_capped: bool,
    ) -> Result<ChildFilter, ConfineError> {
        let programs = self.compile_rules(network, Processes::Children, namespaces_capped)?;
        Ok(ChildFilter { programs })
    }

    /// One program per action among the rules that bind `processes`.
    fn compile_rules(
        &self,
        network: bool,
        processes: Processes,
        namespaces_capped: bool,
    ) -> Result<Vec<BpfProgram>, ConfineError> {
        let arch = target_arch()?;
        let mut programs = Vec::new();
        for action in [RuleAction::ErrnoEperm, RuleAction::ErrnoEnosys] {
            let map = self.rule_map(action, network, processes, namespaces_capped)?;
            if map.is_empty() {
                continue;
            }
            let on_match = match action {
                RuleAction::ErrnoEperm => SeccompAction::Errno(libc::EPERM as u32),
                RuleAction::ErrnoEnosys => SeccompAction::Errno(libc::ENOSYS as u32),
            };
            let filter = SeccompFilter::new(map, SeccompAction::Allow, on_match, arch)
                .map_err(ConfineError::SeccompCompile)?;
            programs.push(filter.try_into().map_err(ConfineError::SeccompCompile)?);
        }
        Ok(programs)
    }

    /// syscall number -> rules (empty vector: unconditional) for one action.
    fn rule_map(
        &self,
        action: RuleAction,
        network: bool,
        processes: Processes,
        namespaces_capped: bool,
    ) -> Result<BTreeMap<i64, Vec<SeccompRule>>, ConfineError> {
        let mut map: BTreeMap<i64, Option<Vec<SeccompRule>>> = BTreeMap::new();
        let applies = |scope: NetworkScope| match scope {
            NetworkScope::Always => true,
            NetworkScope::Denied => !network,
            NetworkScope::Granted => network,
        };
        for rule in self.rules.iter().filter(|r| {
            r.action == action
                && r.processes.resolve(namespaces_capped) == processes
                && applies(r.network)
        }) {
            let mut compiled = Vec::new();
            for alt in &rule.when_any {
                let conds = alt
                    .iter()
                    .map(Condition::to_seccompiler)
                    .collect::<Result<Vec<_>, _>>()?;
                compiled.push(SeccompRule::new(conds).map_err(ConfineError::SeccompCompile)?);
            }
            for name in &rule.syscalls {
                let Some(nr) = names::syscall(name) else {
                    continue; // exists on other architectures only
                };
                let entry = map.entry(nr).or_insert_with(|| Some(Vec::new()));
                match (entry.as_mut(), compiled.is_empty()) {
                    // An unconditional rule wins over any conditional one.
                    (_, true) => *entry = None,
                    (Some(rules), false) => rules.extend(compiled.iter().cloned()),
                    (None, false) => {}
                }
            }
        }
        Ok(map
            .into_iter()
            .map(|(nr, rules)| (nr, rules.unwrap_or_default()))
            .collect())
    }
}

impl Condition {
    fn to_seccompiler(&self) -> Result<SeccompCondition, ConfineError> {
        let value = self.value.resolve()?;
        let op = match (self.op, &self.mask) {
            (Op::MaskedEq, Some(mask)) => SeccompCmpOp::MaskedEq(mask.resolve()?),
            (Op::MaskedEq, None) => return Err(policy_err("masked_eq needs a \"mask\"")),
            (_, Some(_)) => return Err(policy_err("\"mask\" only goes with masked_eq")),
            (Op::Eq, None) => SeccompCmpOp::Eq,
            (Op::Ne, None) => SeccompCmpOp::Ne,
        };
        let len = match self.width {
            Width::Dword => {
                if value > u64::from(u32::MAX) {
                    return Err(policy_err("a dword compare needs a 32-bit value"));
                }
                SeccompCmpArgLen::Dword
            }
            Width::Qword => SeccompCmpArgLen::Qword,
        };
        SeccompCondition::new(self.arg, len, op, value).map_err(ConfineError::SeccompCompile)
    }
}

fn target_arch() -> Result<TargetArch, ConfineError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(ConfineError::SeccompCompile)
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x15;
#[cfg(target_arch = "x86_64")]
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;

#[cfg(target_arch = "x86_64")]
const NATIVE_AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const NATIVE_AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
#[cfg(target_arch = "riscv64")]
const NATIVE_AUDIT_ARCH: u32 = 0xC000_00F3; // AUDIT_ARCH_RISCV64

fn ins(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Kills the process on any foreign architecture and, on x86_64, on any x32 syscall
/// number: those would otherwise be checked against the wrong syscall table.
fn abi_guard() -> BpfProgram {
    let kill = libc::SECCOMP_RET_KILL_PROCESS;
    let mut prog = vec![
        ins(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARCH),
        ins(BPF_JMP_JEQ_K, 1, 0, NATIVE_AUDIT_ARCH),
        ins(BPF_RET_K, 0, 0, kill),
    ];
    #[cfg(target_arch = "x86_64")]
    prog.extend([
        ins(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_NR),
        // __X32_SYSCALL_BIT
        ins(BPF_JMP_JGE_K, 0, 1, 0x4000_0000),
        ins(BPF_RET_K, 0, 0, kill),
    ]);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = SECCOMP_DATA_NR;
    prog.push(ins(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
    prog
}

impl SeccompPrograms {
    /// Installs every program on all threads of the process (TSYNC). Sets no_new_privs
    /// first, as the kernel requires for unprivileged filters.
    pub fn apply(&self) -> Result<(), ConfineError> {
        for prog in &self.programs {
            seccompiler::apply_filter_all_threads(prog).map_err(ConfineError::SeccompApply)?;
        }
        Ok(())
    }
}

/// The children-only programs, compiled before fork and installed by each child between
/// fork and exec with [`ChildFilter::install`].
#[derive(Debug, Clone, Default)]
pub struct ChildFilter {
    programs: Vec<BpfProgram>,
}

impl ChildFilter {
    /// Alloc-free: installs every program on the calling thread (a child between fork and
    /// exec is single-threaded). no_new_privs is already set: the child inherits it from
    /// the confined agent, and the kernel refuses the filter otherwise, so a child can
    /// never start without it.
    pub fn install(&self) -> std::io::Result<()> {
        for prog in &self.programs {
            super::sys::install_seccomp_filter(prog)?;
        }
        Ok(())
    }

    /// Whether there is nothing to install.
    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }
}

/// Whether the kernel reports a seccomp filter on this process.
pub fn filter_active() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim() == "2"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
#[path = "seccomp_tests.rs"]
mod tests;
