//! The permission engine: deny rules, then ask rules, then allow rules, then the mode.
//!
//! - Bash commands are parsed and checked part by part (see [`super::bash_rules`]); output
//!   redirections are checked as `Edit` of their file, input redirections and the file
//!   arguments of read-only commands against `Read` deny/ask rules.
//! - Read rules also cover Glob and Grep (`path`); Edit and Write rules cover every editing
//!   tool (Edit, Write, MultiEdit, NotebookEdit).
//! - `WebFetch(domain:x)`: an allow rule matches the host exactly (or by `*` wildcard); deny
//!   and ask rules also match subdomains.
//! - Plan mode denies whatever is not read-only, even when an allow rule matches; dontAsk
//!   turns every "ask" into a denial; bypassPermissions allows what no rule denies or asks.
//! - Every Bash command runs in the sandbox, so with `auto_allow_bash_if_sandboxed` (the
//!   settings' `sandbox.autoAllowBashIfSandboxed`, default true) a command no deny or ask
//!   rule matches runs without asking, its redirections included. A bare `Bash` allow rule
//!   does the same for every command; a specifier rule (`Bash(npm test *)`) is checked part
//!   by part.
//! - What cannot be checked (an unparseable command, a computed command name or redirect
//!   target) is never allowed past a deny or ask rule that might match it: it asks, and in
//!   bypassPermissions (which never asks on its own) a possible deny is a denial.
//!
//! Every [`Verdict`] says why, and which rule from which file decided it.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde_json::Value;

use super::PermissionMode;
use super::bash_rules::{self, Part, spec_matches};
use super::kind::{ToolKind, input_path};
use super::paths::{self, Anchors, PathPattern};
use super::read_only::{command_name, is_read_only, runs_configured_programs};
use super::rules::{Rule, RuleError, split_rule_list, wildcard};
use super::shell::RedirectKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// Which rule decided, and where it was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleOrigin {
    /// The rule as written, e.g. `Bash(npm test *)`.
    pub rule: String,
    /// The settings file it came from, or `cli` for command-line flags.
    pub source: String,
}

impl std::fmt::Display for RuleOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (from {})", self.rule, self.source)
    }
}

/// A decision and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    pub decision: Decision,
    pub reason: String,
    pub rule: Option<RuleOrigin>,
}

impl Verdict {
    fn new(decision: Decision, reason: impl Into<String>, rule: Option<RuleOrigin>) -> Self {
        Self {
            decision,
            reason: reason.into(),
            rule,
        }
    }
}

/// A rule with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedRule {
    pub rule: Rule,
    pub origin: RuleOrigin,
    /// The project root of the settings file (for `/` path anchors).
    pub root: PathBuf,
}

impl ScopedRule {
    pub fn new(rule: Rule, source: impl Into<String>, root: impl Into<PathBuf>) -> Self {
        Self {
            origin: RuleOrigin {
                rule: rule.to_string(),
                source: source.into(),
            },
            rule,
            root: root.into(),
        }
    }
}

/// Everything an [`Engine`] is built from.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub mode: PermissionMode,
    pub allow: Vec<ScopedRule>,
    pub ask: Vec<ScopedRule>,
    pub deny: Vec<ScopedRule>,
    /// The working directory (`./` anchors, acceptEdits scope).
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    /// More directories acceptEdits may edit in.
    pub additional_directories: Vec<PathBuf>,
    /// The operator disabled bypassPermissions.
    pub bypass_disabled: bool,
    /// Bash commands that match no deny or ask rule run without asking (they run in the
    /// sandbox, which is the boundary). Off here, so an engine built from rule lists alone
    /// is strict; the settings turn it on unless `sandbox.autoAllowBashIfSandboxed` is false.
    pub auto_allow_bash_if_sandboxed: bool,
}

impl EngineConfig {
    pub fn new(mode: PermissionMode, cwd: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            cwd: cwd.into(),
            home: std::env::var_os("HOME").map(PathBuf::from),
            additional_directories: Vec::new(),
            bypass_disabled: false,
            auto_allow_bash_if_sandboxed: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    #[error("bypassPermissions mode is disabled by the managed settings")]
    BypassDisabled,
}

/// A Bash command's verdict with the verdict of each part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashExplanation {
    pub verdict: Verdict,
    /// `(part text, verdict)` per simple command.
    pub parts: Vec<(String, Verdict)>,
    /// Why the command could not be parsed, when it could not.
    pub unparseable: Option<String>,
}

/// The session's permission policy. `mode` changes at run time (plan approval, the SDK's
/// set_permission_mode).
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    mode: RwLock<PermissionMode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathKind {
    Read,
    Edit,
}

fn path_kind(kind: ToolKind) -> Option<PathKind> {
    match kind {
        ToolKind::Read => Some(PathKind::Read),
        ToolKind::Edit => Some(PathKind::Edit),
        _ => None,
    }
}

/// Whether a path rule written for `rule_tool` covers a call of `tool` (of `kind`): `Read`
/// rules cover every reading tool, `Edit` and `Write` rules every editing tool, any other
/// path rule (`Glob(...)`) its own tool only.
fn rule_covers(rule_tool: &str, tool: &str, kind: ToolKind) -> bool {
    match rule_tool {
        "Read" => kind == ToolKind::Read,
        "Edit" | "Write" => kind == ToolKind::Edit,
        other => other == tool,
    }
}

/// Files a redirection may name without writing anything.
const HARMLESS_TARGETS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

impl Engine {
    pub fn new(mut cfg: EngineConfig) -> Self {
        let mut mode = cfg.mode;
        if cfg.bypass_disabled && mode == PermissionMode::BypassPermissions {
            tracing::warn!("bypassPermissions is disabled by the managed settings; using default");
            mode = PermissionMode::Default;
        }
        cfg.cwd = paths::clean(&cfg.cwd);
        Self {
            cfg,
            mode: RwLock::new(mode),
        }
    }

    /// An engine from command-line style rule lists (each entry may hold several rules).
    pub fn from_lists(
        mode: PermissionMode,
        allow: &[String],
        deny: &[String],
        cwd: &Path,
    ) -> Result<Self, RuleError> {
        let parse = |list: &[String]| -> Result<Vec<ScopedRule>, RuleError> {
            list.iter()
                .flat_map(|s| split_rule_list(s))
                .map(|s| Ok(ScopedRule::new(Rule::parse(&s)?, "cli", cwd)))
                .collect()
        };
        let mut cfg = EngineConfig::new(mode, cwd);
        cfg.allow = parse(allow)?;
        cfg.deny = parse(deny)?;
        Ok(Self::new(cfg))
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    pub fn mode(&self) -> PermissionMode {
        match self.mode.read() {
            Ok(m) => *m,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// Changes the mode; a refused change (bypassPermissions when the operator disabled it)
    /// is logged and leaves the mode as it was. See [`Engine::try_set_mode`].
    pub fn set_mode(&self, mode: PermissionMode) {
        if let Err(e) = self.try_set_mode(mode) {
            tracing::warn!(error = %e, "permission mode not changed");
        }
    }

    /// The same rules judging in `mode` (a sub-agent's own `permissionMode`): a separate
    /// engine, so the session's own mode is untouched. Refused as [`Engine::try_set_mode`]
    /// refuses.
    pub fn with_mode(&self, mode: PermissionMode) -> Result<Engine, ModeError> {
        let engine = Engine {
            cfg: self.cfg.clone(),
            mode: RwLock::new(self.mode()),
        };
        engine.try_set_mode(mode)?;
        Ok(engine)
    }

    pub fn try_set_mode(&self, mode: PermissionMode) -> Result<(), ModeError> {
        if mode == PermissionMode::BypassPermissions && self.cfg.bypass_disabled {
            return Err(ModeError::BypassDisabled);
        }
        match self.mode.write() {
            Ok(mut m) => *m = mode,
            Err(poisoned) => *poisoned.into_inner() = mode,
        }
        Ok(())
    }

    /// Whether a tool is offered to the model at all: a bare-name deny removes it.
    pub fn offers(&self, tool: &str) -> bool {
        !self
            .cfg
            .deny
            .iter()
            .any(|r| r.rule.specifier.is_none() && r.rule.names_tool(tool))
    }

    /// Whether `tool` with `input` may run. `read_only` is the tool's own claim (ignored for
    /// Bash, whose commands are classified after parsing).
    ///
    /// The tool's kind is looked up by name ([`ToolKind::of_name`]); callers that hold the
    /// tool itself use [`Engine::decide_as`] with the kind it reports.
    pub fn decide(&self, tool: &str, input: &Value, read_only: bool) -> Verdict {
        self.decide_as(tool, ToolKind::of_name(tool), input, read_only)
    }

    /// Whether `tool` of `kind` with `input` may run: an [`ToolKind::Exec`] call's command
    /// is checked part by part against `Bash(...)` rules; Read and Edit kinds against path
    /// rules; everything else by name.
    pub fn decide_as(&self, tool: &str, kind: ToolKind, input: &Value, read_only: bool) -> Verdict {
        if kind == ToolKind::Exec {
            let command = input.get("command").and_then(Value::as_str).unwrap_or("");
            return self.explain_bash(command).verdict;
        }
        let verdict = self.decide_tool(tool, kind, input, read_only);
        self.finish(verdict)
    }

    /// dontAsk: nobody will be asked, so "ask" is a denial.
    fn finish(&self, mut v: Verdict) -> Verdict {
        if v.decision == Decision::Ask && self.mode() == PermissionMode::DontAsk {
            v.decision = Decision::Deny;
            v.reason = format!("{} (dontAsk mode denies what would ask)", v.reason);
        }
        v
    }

    fn anchors(&self, rule: &ScopedRule) -> Anchors {
        Anchors {
            cwd: self.cfg.cwd.clone(),
            home: self.cfg.home.clone(),
            root: rule.root.clone(),
        }
    }

    fn path_rule_matches(&self, r: &ScopedRule, spec: &str, path: &Path) -> bool {
        PathPattern::compile(spec, &self.anchors(r)).is_some_and(|p| p.matches(path))
    }

    /// Whether rule `r` matches a non-Bash call. `all_paths`: every candidate path must
    /// match (allow rules); otherwise any (deny and ask rules).
    fn tool_rule_matches(
        &self,
        r: &ScopedRule,
        tool: &str,
        kind: ToolKind,
        input: &Value,
        candidates: &[PathBuf],
        all_paths: bool,
    ) -> bool {
        let Some(spec) = &r.rule.specifier else {
            return r.rule.names_tool(tool);
        };
        if kind.has_path() && ToolKind::path_rule_kind(&r.rule.tool).is_some() {
            if !rule_covers(&r.rule.tool, tool, kind) || candidates.is_empty() {
                return false;
            }
            let hit = |p: &PathBuf| self.path_rule_matches(r, spec, p);
            return if all_paths {
                candidates.iter().all(hit)
            } else {
                candidates.iter().any(hit)
            };
        }
        if r.rule.tool != tool {
            return false;
        }
        if kind == ToolKind::Network {
            let Some(domain) = spec.strip_prefix("domain:") else {
                return false;
            };
            let Some(host) = input
                .get("url")
                .and_then(Value::as_str)
                .and_then(|u| reqwest::Url::parse(u).ok())
                // Security: `evil.com.` (the absolute spelling) is the same host to DNS
                // and must meet the rules written for `evil.com`.
                .and_then(|u| {
                    u.host_str()
                        .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
                })
            else {
                return false;
            };
            let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
            let exact = host == domain || wildcard(&domain, &host);
            // Security: a deny or ask on a domain covers its subdomains too.
            return exact || (!all_paths && host.ends_with(&format!(".{domain}")));
        }
        false
    }

    fn input_paths(&self, kind: ToolKind, input: &Value) -> Vec<PathBuf> {
        if !kind.has_path() {
            return Vec::new();
        }
        match input_path(input) {
            Some(p) => self.resolve_candidates(p),
            // A reading tool without a path (Glob, Grep) searches the working directory.
            None if kind == ToolKind::Read => paths::candidates(&self.cfg.cwd),
            None => Vec::new(),
        }
    }

    fn resolve_candidates(&self, p: &str) -> Vec<PathBuf> {
        match paths::expand_home(p, self.cfg.home.as_deref()) {
            Some(p) => paths::candidates(&paths::absolute(&p, &self.cfg.cwd)),
            None => Vec::new(),
        }
    }

    fn decide_tool(&self, tool: &str, kind: ToolKind, input: &Value, read_only: bool) -> Verdict {
        let candidates = self.input_paths(kind, input);
        if let Some(r) = self
            .cfg
            .deny
            .iter()
            .find(|r| self.tool_rule_matches(r, tool, kind, input, &candidates, false))
        {
            return Verdict::new(
                Decision::Deny,
                format!("denied by rule {}", r.origin),
                Some(r.origin.clone()),
            );
        }
        let mode = self.mode();
        if mode == PermissionMode::Plan && !read_only {
            return Verdict::new(
                Decision::Deny,
                format!(
                    "{tool} is not available in plan mode, which only reads; present the plan with ExitPlanMode instead"
                ),
                None,
            );
        }
        if let Some(r) = self
            .cfg
            .ask
            .iter()
            .find(|r| self.tool_rule_matches(r, tool, kind, input, &candidates, false))
        {
            return Verdict::new(
                Decision::Ask,
                format!("rule {} asks before this call", r.origin),
                Some(r.origin.clone()),
            );
        }
        if let Some(r) = self.allowing_rule(tool, kind, input, &candidates) {
            return Verdict::new(
                Decision::Allow,
                format!("allowed by rule {}", r.origin),
                Some(r.origin.clone()),
            );
        }
        self.mode_verdict(tool, read_only, path_kind(kind), &candidates)
    }

    /// An allow rule for the call; for path tools every candidate (the path and its
    /// symlink target) must be covered by some allow rule.
    fn allowing_rule(
        &self,
        tool: &str,
        kind: ToolKind,
        input: &Value,
        candidates: &[PathBuf],
    ) -> Option<&ScopedRule> {
        let first = self
            .cfg
            .allow
            .iter()
            .find(|r| self.tool_rule_matches(r, tool, kind, input, candidates, true));
        if first.is_some() || candidates.len() < 2 {
            return first;
        }
        let covered = candidates.iter().all(|c| {
            self.cfg.allow.iter().any(|r| {
                self.tool_rule_matches(r, tool, kind, input, std::slice::from_ref(c), true)
            })
        });
        if covered {
            self.cfg
                .allow
                .iter()
                .find(|r| self.tool_rule_matches(r, tool, kind, input, &candidates[..1], true))
        } else {
            None
        }
    }

    fn within_working_dirs(&self, candidates: &[PathBuf]) -> bool {
        !candidates.is_empty()
            && candidates.iter().all(|c| {
                std::iter::once(&self.cfg.cwd)
                    .chain(self.cfg.additional_directories.iter())
                    .any(|d| c.starts_with(paths::clean(d)))
            })
    }

    fn mode_verdict(
        &self,
        tool: &str,
        read_only: bool,
        kind: Option<PathKind>,
        candidates: &[PathBuf],
    ) -> Verdict {
        let mode = self.mode();
        let (decision, reason) = match mode {
            PermissionMode::BypassPermissions => {
                (Decision::Allow, "permission mode bypassPermissions".into())
            }
            _ if read_only => (Decision::Allow, format!("{tool} only reads")),
            PermissionMode::Plan => (
                Decision::Deny,
                format!("{tool} is not available in plan mode, which only reads"),
            ),
            PermissionMode::AcceptEdits
                if kind == Some(PathKind::Edit) && self.within_working_dirs(candidates) =>
            {
                (
                    Decision::Allow,
                    "permission mode acceptEdits allows edits in the working directories".into(),
                )
            }
            PermissionMode::DontAsk => (
                Decision::Deny,
                format!("no rule allows {tool} and dontAsk mode denies what is not pre-allowed"),
            ),
            PermissionMode::AcceptEdits if kind == Some(PathKind::Edit) => (
                Decision::Ask,
                format!("{tool} outside the working directories needs approval"),
            ),
            _ => (
                Decision::Ask,
                format!(
                    "no rule allows {tool} and permission mode {} asks first",
                    mode.as_str()
                ),
            ),
        };
        Verdict::new(decision, reason, None)
    }

    /// A file touched by a Bash command: `Edit` for writes (full decision), `Read` for reads
    /// (deny and ask rules only).
    fn bash_path(&self, kind: PathKind, path: &str, cd_seen: bool) -> Option<Verdict> {
        if HARMLESS_TARGETS.contains(&path) {
            return None;
        }
        let relative = !path.starts_with('/') && !path.starts_with('~');
        if cd_seen && relative {
            let why = format!("`{path}` is relative to a directory the command changes to");
            return Some(match kind {
                PathKind::Edit => self.unverifiable_write(&why),
                PathKind::Read => Verdict::new(Decision::Allow, why, None),
            });
        }
        let candidates = self.resolve_candidates(path);
        if candidates.is_empty() {
            let why = format!("cannot resolve the path `{path}`");
            return Some(match kind {
                PathKind::Edit => self.unverifiable_write(&why),
                PathKind::Read => self
                    .unchecked_against(|r| r.rule.tool == "Read", &why, "the read")
                    .unwrap_or_else(|| Verdict::new(Decision::Ask, why, None)),
            });
        }
        let (tool, tool_kind) = if kind == PathKind::Edit {
            ("Edit", ToolKind::Edit)
        } else {
            ("Read", ToolKind::Read)
        };
        let input = Value::Null;
        if let Some(r) = self
            .cfg
            .deny
            .iter()
            .find(|r| self.tool_rule_matches(r, tool, tool_kind, &input, &candidates, false))
        {
            return Some(Verdict::new(
                Decision::Deny,
                format!("`{path}` is denied by rule {}", r.origin),
                Some(r.origin.clone()),
            ));
        }
        if kind == PathKind::Read {
            return self
                .cfg
                .ask
                .iter()
                .find(|r| self.tool_rule_matches(r, tool, tool_kind, &input, &candidates, false))
                .map(|r| {
                    Verdict::new(
                        Decision::Ask,
                        format!("reading `{path}`: rule {} asks first", r.origin),
                        Some(r.origin.clone()),
                    )
                });
        }
        let mut v = self.decide_tool(
            "Edit",
            ToolKind::Edit,
            &serde_json::json!({"file_path": path}),
            false,
        );
        v.reason = format!("writing `{path}`: {}", v.reason);
        Some(v)
    }

    /// The verdict on a Bash command with its parts.
    pub fn explain_bash(&self, command: &str) -> BashExplanation {
        let mut e = match bash_rules::split(command) {
            Ok(parts) => self.bash_parts(&parts),
            Err(err) => BashExplanation {
                verdict: self.unparseable(command, &err.reason),
                parts: Vec::new(),
                unparseable: Some(err.reason),
            },
        };
        e.verdict = self.finish(e.verdict);
        for (_, v) in &mut e.parts {
            *v = self.finish(v.clone());
        }
        e
    }

    fn bash_rule<'a>(
        &self,
        rules: &'a [ScopedRule],
        pred: impl Fn(&str) -> bool,
    ) -> Option<&'a ScopedRule> {
        rules.iter().find(|r| {
            r.rule.tool == "Bash"
                && match &r.rule.specifier {
                    None => true,
                    Some(spec) => pred(spec),
                }
        })
    }

    /// A command the parser could not read: deny and ask rules are matched against its
    /// raw text; no specifier allow rule ever matches it (a bare `Bash` allow does).
    fn unparseable(&self, command: &str, why: &str) -> Verdict {
        let raw = bash_rules::unparsed_layers(command);
        let raw_matches = |s: &str| raw.iter().any(|l| spec_matches(s, l));
        if let Some(r) = self.bash_rule(&self.cfg.deny, raw_matches) {
            return Verdict::new(
                Decision::Deny,
                format!("denied by rule {}", r.origin),
                Some(r.origin.clone()),
            );
        }
        if self.mode() == PermissionMode::Plan {
            return Verdict::new(
                Decision::Deny,
                format!(
                    "plan mode runs only read-only commands, and this one cannot be parsed ({why})"
                ),
                None,
            );
        }
        if let Some(r) = self.bash_rule(&self.cfg.ask, raw_matches) {
            return Verdict::new(
                Decision::Ask,
                format!("rule {} asks before this command", r.origin),
                Some(r.origin.clone()),
            );
        }
        self.unverifiable_command(&format!(
            "the command cannot be checked part by part ({why})"
        ))
    }

    /// A bare `Bash` allow rule: every command.
    fn bare_bash_allow(&self) -> Option<&ScopedRule> {
        self.cfg
            .allow
            .iter()
            .find(|r| r.rule.tool == "Bash" && r.rule.specifier.is_none())
    }

    /// Whether a Bash command that no rule decides runs without asking: always in
    /// bypassPermissions, never in plan mode (read-only commands only), otherwise when the
    /// sandbox auto-allow is on. Why sound: every command runs in the session's sandbox, so
    /// what it can reach is bounded by the kernel whatever the rules say; rules decide
    /// only what runs inside it.
    fn sandboxed_bash_runs(&self) -> bool {
        match self.mode() {
            PermissionMode::BypassPermissions => true,
            PermissionMode::Plan => false,
            _ => self.cfg.auto_allow_bash_if_sandboxed,
        }
    }

    /// Why a Bash command that no rule decides runs without asking, if it does.
    fn sandboxed_allow(&self) -> Option<Verdict> {
        if let Some(r) = self.bare_bash_allow() {
            return Some(Verdict::new(
                Decision::Allow,
                format!("allowed by rule {} (every command)", r.origin),
                Some(r.origin.clone()),
            ));
        }
        if !self.sandboxed_bash_runs() {
            return None;
        }
        let reason = if self.mode() == PermissionMode::BypassPermissions {
            "permission mode bypassPermissions"
        } else {
            "it runs in the sandbox and no rule asks (sandbox.autoAllowBashIfSandboxed)"
        };
        Some(Verdict::new(Decision::Allow, reason, None))
    }

    /// A command (or part) whose program cannot be known exactly. Security: a deny or ask
    /// rule with a specifier might match what really runs, so it is never allowed past
    /// one (see [`Engine::unchecked_against`]). With no such rule, the sandbox auto-allow, a
    /// bare `Bash` allow or bypassPermissions runs it; no specifier allow rule ever does.
    fn unverifiable_command(&self, why: &str) -> Verdict {
        let rule_could_match = |r: &ScopedRule| r.rule.tool == "Bash" && r.rule.specifier.is_some();
        if let Some(v) = self.unchecked_against(rule_could_match, why, "it") {
            return v;
        }
        if let Some(v) = self.sandboxed_allow() {
            return v;
        }
        // Security: what the parser cannot read is never allowed by a specifier rule.
        Verdict::new(
            Decision::Ask,
            format!("{why}, so no rule can allow it and it needs approval"),
            None,
        )
    }

    /// A write whose file cannot be known (`> "$OUT"`, a relative path after `cd`): as
    /// [`Engine::unverifiable_command`], against the Edit and Write rules. With none, the
    /// verdict is an ask that [`Engine::bash_part`] lifts when the command itself runs
    /// without asking (the sandbox bounds where it can write).
    fn unverifiable_write(&self, why: &str) -> Verdict {
        let rule_could_match = |r: &ScopedRule| matches!(r.rule.tool.as_str(), "Edit" | "Write");
        self.unchecked_against(rule_could_match, why, "the write")
            .unwrap_or_else(|| Verdict::new(Decision::Ask, why, None))
    }

    /// The verdict on something that cannot be checked against the deny or ask rules that
    /// `could_match`: a possible deny asks (bypassPermissions, which never asks on its own,
    /// denies), a possible ask asks; `None` when no such rule exists.
    fn unchecked_against(
        &self,
        could_match: impl Fn(&ScopedRule) -> bool,
        why: &str,
        what: &str,
    ) -> Option<Verdict> {
        let bypass = self.mode() == PermissionMode::BypassPermissions;
        let deny = self.cfg.deny.iter().find(|r| could_match(r));
        let ask = self.cfg.ask.iter().find(|r| could_match(r));
        let (decision, kind, r) = match (deny, ask) {
            (Some(r), _) if bypass => (Decision::Deny, "deny", r),
            (Some(r), _) => (Decision::Ask, "deny", r),
            (None, Some(r)) => (Decision::Ask, "ask", r),
            (None, None) => return None,
        };
        Some(Verdict::new(
            decision,
            format!(
                "{why}, so {what} cannot be checked against the {kind} rule {}",
                r.origin
            ),
            Some(r.origin.clone()),
        ))
    }

    fn bash_parts(&self, parts: &[Part]) -> BashExplanation {
        let mut cd_seen = false;
        let mut out = Vec::new();
        for part in parts {
            let v = self.bash_part(part, cd_seen);
            if part
                .words
                .first()
                .and_then(|w| w.literal())
                .and_then(command_name)
                .is_some_and(|n| matches!(n, "cd" | "pushd" | "popd"))
            {
                cd_seen = true;
            }
            out.push((part.text.clone(), v));
        }
        let worst = out.iter().map(|(_, v)| v.decision).max();
        let verdict = match worst {
            None => Verdict::new(Decision::Allow, "an empty command", None),
            Some(Decision::Allow) if out.len() == 1 => out[0].1.clone(),
            Some(Decision::Allow) => Verdict::new(
                Decision::Allow,
                format!("all {} parts are allowed", out.len()),
                out.iter().find_map(|(_, v)| v.rule.clone()),
            ),
            Some(worst) => match out.iter().find(|(_, v)| v.decision == worst) {
                Some((text, v)) => Verdict::new(
                    worst,
                    if out.len() == 1 {
                        v.reason.clone()
                    } else {
                        format!("part `{text}`: {}", v.reason)
                    },
                    v.rule.clone(),
                ),
                None => Verdict::new(worst, "a part was not allowed", None),
            },
        };
        BashExplanation {
            verdict,
            parts: out,
            unparseable: None,
        }
    }

    fn bash_part(&self, part: &Part, cd_seen: bool) -> Verdict {
        let layers = part.layers();
        let any_layer = |s: &str| layers.iter().any(|l| spec_matches(s, l));
        if let Some(r) = self.bash_rule(&self.cfg.deny, any_layer) {
            return Verdict::new(
                Decision::Deny,
                format!("denied by rule {}", r.origin),
                Some(r.origin.clone()),
            );
        }
        // Files the part touches.
        let mut file_verdicts = Vec::new();
        let read_only = part.unresolved.is_none()
            && is_read_only(&part.words)
            && !(cd_seen && runs_configured_programs(&part.words));
        for redirect in &part.redirects {
            let kind = if redirect.kind.writes() {
                PathKind::Edit
            } else if redirect.kind == RedirectKind::Read {
                PathKind::Read
            } else {
                continue;
            };
            match redirect.target.literal() {
                Some(path) => file_verdicts.extend(self.bash_path(kind, path, cd_seen)),
                None if kind == PathKind::Edit => {
                    file_verdicts.push(self.unverifiable_write(&format!(
                        "it writes to a file whose name is computed (`{}`)",
                        redirect.target.value
                    )))
                }
                None => {}
            }
        }
        if read_only {
            for arg in part.words.iter().skip(1).filter_map(|w| w.literal()) {
                if !arg.starts_with('-') {
                    file_verdicts.extend(self.bash_path(PathKind::Read, arg, cd_seen));
                    // Security: `REV:path` (`git show HEAD:secrets/a`, `git cat-file -p
                    // :0:secrets/a`) prints a file's committed copy, which the kernel's
                    // hiding of the working-tree file does not cover: what follows each
                    // `:` is checked as a read too. (History as a whole, `git log -p`,
                    // still shows what was committed: a Read deny rule guards the file,
                    // not the repository's past.)
                    for (i, _) in arg.match_indices(':') {
                        let named = &arg[i + 1..];
                        if !named.is_empty() && !named.starts_with(':') {
                            file_verdicts.extend(self.bash_path(PathKind::Read, named, cd_seen));
                        }
                    }
                }
            }
        }
        if let Some(v) = file_verdicts.iter().find(|v| v.decision == Decision::Deny) {
            return v.clone();
        }
        let mode = self.mode();
        let writes = part.redirects.iter().any(|r| {
            r.kind.writes()
                && !r
                    .target
                    .literal()
                    .is_some_and(|t| HARMLESS_TARGETS.contains(&t))
        });
        if mode == PermissionMode::Plan && (!read_only || writes) {
            return Verdict::new(
                Decision::Deny,
                "plan mode runs only read-only commands and writes no files",
                None,
            );
        }
        if let Some(r) = self.bash_rule(&self.cfg.ask, any_layer) {
            return Verdict::new(
                Decision::Ask,
                format!("rule {} asks before this command", r.origin),
                Some(r.origin.clone()),
            );
        }
        let command = match &part.unresolved {
            Some(why) => self.unverifiable_command(&format!("no rule can match it exactly: {why}")),
            None => {
                let inner = part.rendered();
                if let Some(r) = self.bash_rule(&self.cfg.allow, |s| spec_matches(s, &inner)) {
                    Verdict::new(
                        Decision::Allow,
                        format!("allowed by rule {}", r.origin),
                        Some(r.origin.clone()),
                    )
                } else if read_only {
                    Verdict::new(Decision::Allow, "a read-only command", None)
                } else {
                    self.sandboxed_allow()
                        .unwrap_or_else(|| self.mode_verdict("Bash", false, None, &[]))
                }
            }
        };
        // A command that runs without asking because it is sandboxed (auto-allow, a bare
        // `Bash` allow, bypassPermissions) also writes where it likes: the mode's asks on
        // its redirections are lifted; deny and ask rules on the files still hold.
        if command.decision == Decision::Allow && self.sandboxed_allow().is_some() {
            for v in &mut file_verdicts {
                if v.decision == Decision::Ask && v.rule.is_none() {
                    v.decision = Decision::Allow;
                    v.reason = format!("{} (a sandboxed command's write)", v.reason);
                }
            }
        }
        // The worst of the command and the files it touches.
        std::iter::once(command)
            .chain(file_verdicts)
            .max_by_key(|v| v.decision)
            .unwrap_or_else(|| Verdict::new(Decision::Ask, "nothing to decide", None))
    }

    /// Read and Edit deny rules as compiled path patterns (for binding in the kernel).
    pub fn read_edit_deny_patterns(&self) -> Vec<(String, PathPattern, RuleOrigin)> {
        self.cfg
            .deny
            .iter()
            .filter(|r| matches!(r.rule.tool.as_str(), "Read" | "Edit" | "Write"))
            .filter_map(|r| {
                let spec = r.rule.specifier.as_ref()?;
                let p = PathPattern::compile(spec, &self.anchors(r))?;
                Some((r.rule.tool.clone(), p, r.origin.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
