//! Hooks: the user's own programs run at the loop's moments, configured exactly as Claude
//! Code configures them (the `"hooks"` object of a settings file).
//!
//! - [`config`]: parses a `"hooks"` object into [`HookEntry`]s (event, matcher, handler).
//! - [`input`]: the JSON each event's hook reads on stdin (Claude Code's field names).
//! - [`output`]: what a hook's exit code and stdout mean ([`HookOutcome`]).
//! - [`runner`]: runs a handler: an operator's (managed) hook on the host, every other hook
//!   inside the session's sandbox through the agent's exec API, a client's callback through
//!   [`HookCallbacks`].
//! - [`Hooks`]: one session's hooks, ready to fire; [`HookObserver`] plugs them into the
//!   loop (UserPromptSubmit, Stop, PreCompact, SessionStart/End); the tool-call events are
//!   fired by [`crate::policy_gate::PolicyGate`].
//!
//! Project and local hooks run only once the user trusts the workspace ([`crate::trust`]):
//! until then the settings loader drops them, SessionStart included. Even trusted, they
//! run in the sandbox: a hook in `.claude/settings.json` is a command the repository
//! chose, so it gets the same confinement as the model's Bash calls; only the operator's
//! managed settings can put a program on the host.
//!
//! SubagentStop fires when a sub-agent (the Agent tool) ends its turn
//! ([`crate::subagents::SubagentObserver`]).

pub mod config;
pub mod input;
mod observer;
pub mod output;
pub mod runner;
pub mod sources;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use serde_json::{Map, Value};

pub use config::{HooksError, parse_hooks};
pub use observer::HookObserver;
pub use output::{HookOutcome, PermissionDecision};
pub use runner::HookRunner;
pub use sources::HookSource;

/// The moments a hook can run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    UserPromptSubmit,
    Stop,
    /// A sub-agent ended its turn.
    SubagentStop,
    SessionStart,
    SessionEnd,
    PreCompact,
    Notification,
}

impl HookEvent {
    pub const ALL: [HookEvent; 9] = [
        Self::PreToolUse,
        Self::PostToolUse,
        Self::UserPromptSubmit,
        Self::Stop,
        Self::SubagentStop,
        Self::SessionStart,
        Self::SessionEnd,
        Self::PreCompact,
        Self::Notification,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::Stop => "Stop",
            Self::SubagentStop => "SubagentStop",
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::PreCompact => "PreCompact",
            Self::Notification => "Notification",
        }
    }

    pub fn parse(name: &str) -> Option<HookEvent> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

/// Where a command hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunsOn {
    /// On the host, as the orchestrator's user: managed (operator) hooks only.
    Host,
    /// Inside the session's sandbox, confined like the Bash tool.
    Sandbox,
}

/// What runs when a hook fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler {
    /// A shell command, given the event's JSON on stdin.
    Command {
        command: String,
        timeout: Duration,
        runs_on: RunsOn,
    },
    /// A client's callback (the Agent SDK's hook functions), through [`HookCallbacks`].
    Callback { id: String },
}

/// The timeout of a command hook that names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Which invocations a hook applies to: a regex on the tool name (PreToolUse,
/// PostToolUse), the trigger (PreCompact: manual|auto) or the source (SessionStart).
#[derive(Debug, Clone)]
pub struct Matcher {
    text: String,
    regex: Option<regex::Regex>,
}

impl Matcher {
    /// Every invocation ("", "*" or no matcher).
    pub fn all() -> Matcher {
        Matcher {
            text: String::new(),
            regex: None,
        }
    }

    /// As Claude Code reads a matcher: a plain name or `A|B` list matches those names
    /// exactly; anything else is a regex searched in the name (`Notebook.*`, `mcp__.*`).
    pub fn parse(text: &str) -> Result<Matcher, regex::Error> {
        let text = text.trim();
        if text.is_empty() || text == "*" {
            return Ok(Matcher::all());
        }
        let plain = text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|');
        let pattern = if plain {
            format!("^(?:{text})$")
        } else {
            text.to_string()
        };
        Ok(Matcher {
            text: text.to_string(),
            regex: Some(regex::Regex::new(&pattern)?),
        })
    }

    /// `target` is what the event matches on; events without one match every hook.
    pub fn matches(&self, target: Option<&str>) -> bool {
        match (&self.regex, target) {
            (None, _) | (_, None) => true,
            (Some(re), Some(t)) => re.is_match(t),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Matcher) -> bool {
        self.text == other.text
    }
}

/// One configured hook, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEntry {
    pub event: HookEvent,
    pub matcher: Matcher,
    pub handler: Handler,
    pub source: HookSource,
    /// The settings file (or "cli", "sdk") it was read from, for messages.
    pub origin: String,
    /// Variables its command gets beside the session's (a plugin's `CLAUDE_PLUGIN_ROOT`).
    pub env: Vec<(String, String)>,
}

impl HookEntry {
    /// "the PreToolUse hook `./check.sh` (project: /w/.claude/settings.json)".
    pub fn describe(&self) -> String {
        let what = match &self.handler {
            Handler::Command { command, .. } => format!("`{command}`"),
            Handler::Callback { id } => format!("callback {id}"),
        };
        format!(
            "the {} hook {what} ({}: {})",
            self.event.as_str(),
            self.source.as_str(),
            self.origin
        )
    }
}

/// All hooks of one session, with their provenance. Shared (`Arc`) by the gate and the
/// observer; a client may register callbacks after the session started.
#[derive(Debug, Default)]
pub struct HookSet {
    entries: RwLock<Vec<HookEntry>>,
}

impl HookSet {
    pub fn new(entries: Vec<HookEntry>) -> HookSet {
        HookSet {
            entries: RwLock::new(entries),
        }
    }

    /// Builds the set from raw `"hooks"` objects and their sources (managed first). Managed
    /// hooks run on the host, all others in the sandbox. When managed settings set
    /// `allowManagedHooksOnly`, hooks from any other source are dropped here too (the
    /// settings loader already does it; this is the second lock on the same door).
    pub fn from_sources(
        sources: &[(HookSource, String, Value)],
        managed_only: bool,
    ) -> Result<HookSet, HooksError> {
        let mut entries = Vec::new();
        for (source, origin, hooks) in sources {
            if managed_only && *source != HookSource::Managed {
                tracing::warn!(%origin, "hooks ignored: managed settings allow managed hooks only");
                continue;
            }
            entries.extend(parse_hooks(hooks, *source, origin)?);
        }
        Ok(HookSet::new(entries))
    }

    /// The session's hooks from its merged settings: `hooks_by_source()` (which already
    /// drops non-managed hooks under `allowManagedHooksOnly` and all under
    /// `disableAllHooks`), with each source's file for messages.
    pub fn from_settings(settings: &crate::settings::Settings) -> Result<HookSet, HooksError> {
        let sources: Vec<(HookSource, String, Value)> = settings
            .hooks_by_source()
            .into_iter()
            .map(|(source, hooks)| {
                let origin = settings
                    .files()
                    .iter()
                    .find(|f| f.source == source)
                    .map(|f| f.origin.clone())
                    .unwrap_or_else(|| source.as_str().to_string());
                (HookSource::from(source), origin, hooks)
            })
            .collect();
        Self::from_sources(&sources, settings.allow_managed_hooks_only)
    }

    /// Adds hooks configured elsewhere than the settings (a plugin's), after the others.
    pub fn extend(&self, entries: Vec<HookEntry>) {
        self.write().extend(entries);
    }

    /// Registers a client callback (the Agent SDK's `hooks` option, sent in `initialize`).
    pub fn add_callback(
        &self,
        event: HookEvent,
        matcher: Option<&str>,
        callback_id: &str,
    ) -> Result<(), HooksError> {
        let matcher =
            Matcher::parse(matcher.unwrap_or("")).map_err(|e| HooksError::InvalidMatcher {
                origin: "sdk".into(),
                path: event.as_str().into(),
                message: e.to_string(),
            })?;
        self.write().push(HookEntry {
            event,
            matcher,
            handler: Handler::Callback {
                id: callback_id.to_string(),
            },
            source: HookSource::Sdk,
            origin: "sdk".into(),
            env: Vec::new(),
        });
        Ok(())
    }

    /// The hooks that fire for `event` on `target` (tool name, trigger, source), in
    /// configuration order; an identical command configured twice runs once.
    pub fn for_event(&self, event: HookEvent, target: Option<&str>) -> Vec<HookEntry> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<HookEntry> = Vec::new();
        for e in entries.iter() {
            if e.event == event
                && e.matcher.matches(target)
                && !out.iter().any(|o| o.handler == e.handler)
            {
                out.push(e.clone());
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<HookEntry>> {
        // A push cannot leave the list half-updated: a poisoned lock is still sound.
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A client that runs hook callbacks (the Agent SDK over the stream-json control protocol).
#[tonic::async_trait]
pub trait HookCallbacks: Send + Sync {
    async fn call(
        &self,
        callback_id: &str,
        input: serde_json::Value,
        tool_use_id: Option<String>,
    ) -> Result<serde_json::Value, String>;
}

/// Told when a command hook starts and when it ended (`--include-hook-events`: the
/// client sees them as `hook_started` and `hook_response` records).
pub trait HookEvents: Send + Sync {
    fn started(&self, hook_id: &str, entry: &HookEntry);
    fn responded(&self, hook_id: &str, entry: &HookEntry, run: &output::HookRun);
}

/// The session facts every hook input carries.
#[derive(Debug, Clone)]
pub struct SessionFacts {
    pub session_id: String,
    pub transcript_path: std::path::PathBuf,
    pub cwd: std::path::PathBuf,
}

/// Reads the session's current permission mode (it can change mid-session).
pub type ModeSource = Arc<dyn Fn() -> String + Send + Sync>;

/// One session's hooks, ready to fire.
pub struct Hooks {
    pub set: Arc<HookSet>,
    pub runner: HookRunner,
    facts: SessionFacts,
    mode: ModeSource,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("set", &self.set)
            .field("facts", &self.facts)
            .finish_non_exhaustive()
    }
}

impl Hooks {
    pub fn new(
        set: Arc<HookSet>,
        runner: HookRunner,
        facts: SessionFacts,
        mode: ModeSource,
    ) -> Self {
        Hooks {
            set,
            runner,
            facts,
            mode,
        }
    }

    /// The hooks that fire for `event` on `target`.
    pub fn matching(&self, event: HookEvent, target: Option<&str>) -> Vec<HookEntry> {
        self.set.for_event(event, target)
    }

    /// The full stdin JSON for `event` with its own `fields`.
    pub fn input_for(&self, event: HookEvent, fields: Map<String, Value>) -> Value {
        input::build(&self.facts, &(self.mode)(), event, fields)
    }

    /// Runs one hook.
    pub async fn run(
        &self,
        entry: &HookEntry,
        fields: Map<String, Value>,
        tool_use_id: Option<&str>,
    ) -> HookOutcome {
        let input = self.input_for(entry.event, fields);
        let outcome = self.runner.run(entry, &input, tool_use_id).await;
        if let Some(notice) = &outcome.notice {
            tracing::warn!(hook = %entry.describe(), "{notice}");
        }
        outcome
    }

    /// Runs every hook for `event` on `target`, in order, each with the same `fields`.
    pub async fn fire(
        &self,
        event: HookEvent,
        target: Option<&str>,
        fields: Map<String, Value>,
    ) -> Vec<(HookEntry, HookOutcome)> {
        let mut out = Vec::new();
        for entry in self.matching(event, target) {
            let outcome = self.run(&entry, fields.clone(), None).await;
            out.push((entry, outcome));
        }
        out
    }
}

#[cfg(test)]
mod tests;
