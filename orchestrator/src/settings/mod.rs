//! Settings in Claude Code's shape, merged from five sources.
//!
//! | source  | file                                                         |
//! |---------|--------------------------------------------------------------|
//! | managed | `/etc/cordon/managed-settings.json` (`CORDON_MANAGED_SETTINGS` only where that is absent) |
//! | cli     | `--settings FILE` or `--settings '{...}'`, then `--allowedTools` / `--disallowedTools` / `--permission-mode` |
//! | local   | `<workspace>/.claude/settings.local.json`                    |
//! | project | `<workspace>/.claude/settings.json`                          |
//! | user    | `~/.cordon/settings.json` (`CORDON_USER_SETTINGS`)           |
//!
//! Precedence is in that order: a scalar key takes the highest source's value; rule lists
//! merge (all sources' rules apply; deny beats ask beats allow whatever their source).
//!
//! The workspace's own files (local, project) are the repository's. Until the user trusts
//! the workspace ([`crate::trust`]) they may only narrow: `policies/untrusted-settings.json`
//! says what they keep (deny and ask rules, narrower modes, `disableAllHooks`,
//! `sandbox.autoAllowBashIfSandboxed: false`); everything else (allow rules, acceptEdits
//! and bypassPermissions, hooks, env, additional directories, sandbox and MCP settings) is
//! ignored and listed in [`Settings::ignored`]. Once trusted, they count like the user's.
//! In every case:
//! - a source can add rules, never remove one: a managed deny always applies;
//! - with `allowManagedPermissionRulesOnly` (managed only), only managed rules count, also
//!   over the CLI flags; with `allowManagedHooksOnly`, only managed hooks run;
//! - `disableBypassPermissionsMode: "disable"` (managed only) forbids bypassPermissions;
//! - `trustedDirectories` counts from the user's and the managed settings only, and
//!   `allowHeadlessTrust: false` (managed only) refuses `--trust`.
//!
//! `allowManagedPermissionRulesOnly`, `allowManagedHooksOnly` and `allowHeadlessTrust` are
//! honoured only from the managed file; elsewhere they are warned about and ignored.

mod budget;
pub mod limits;
pub mod local_rules;
pub mod validate;
mod web;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::permissions::{
    EngineConfig, PermissionMode, Rule, ScopedRule, paths::PathPattern, split_rule_list,
};
use crate::trust::{IgnoredSetting, TrustInputs, TrustStore, WorkspaceTrust};
pub use local_rules::{
    LocalRuleEdit, LocalRuleError, RuleList, add_local_allow_rule, local_file, remove_local_rule,
};

/// The workspace's own settings files, relative to it, highest precedence first.
pub const LOCAL_FILE: &str = ".claude/settings.local.json";
pub const PROJECT_FILE: &str = ".claude/settings.json";

/// Where a setting came from, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Managed,
    Cli,
    Local,
    Project,
    User,
}

impl Source {
    /// A `--setting-sources` entry: `user`, `project` or `local`.
    pub fn parse_file_source(name: &str) -> Option<Self> {
        match name {
            "user" => Some(Self::User),
            "project" => Some(Self::Project),
            "local" => Some(Self::Local),
            _ => None,
        }
    }

    /// Whose hooks this source's `disableAllHooks` may switch off: its own rank and below.
    ///
    /// Security: a guard hook (a PreToolUse check, an audit log) is a protection, so
    /// switching it off widens. The operator's flag drops every hook; the user's own
    /// (settings file or command line) drops all but the operator's; a workspace's, trusted
    /// or not, drops only the workspace's. Claude Code's precedence puts the project above
    /// the user, but a repository must not be able to silence the user's guards.
    pub fn hook_rank(self) -> u8 {
        match self {
            Self::Managed => 2,
            Self::Cli | Self::User => 1,
            Self::Local | Self::Project => 0,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::Cli => "cli",
            Self::Local => "local",
            Self::Project => "project",
            Self::User => "user",
        }
    }

    /// Settings the workspace itself carries (they may only narrow until it is trusted).
    pub fn is_repository(self) -> bool {
        matches!(self, Self::Local | Self::Project)
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `--settings`: a file, or inline JSON (as Claude Code takes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingsArg {
    File(PathBuf),
    Inline(String),
}

impl SettingsArg {
    /// Inline JSON when the argument starts with `{`, else a file's path.
    pub fn parse(arg: &str) -> SettingsArg {
        if arg.trim_start().starts_with('{') {
            SettingsArg::Inline(arg.to_string())
        } else {
            SettingsArg::File(PathBuf::from(arg))
        }
    }
}

/// The command line's part of the settings.
#[derive(Debug, Clone, Default)]
pub struct CliSettings {
    /// `--settings FILE` or `--settings '{...}'`.
    pub settings: Option<SettingsArg>,
    /// `--trust`: trust the workspace for this run.
    pub trust: bool,
    /// `--allowedTools` (each entry may hold several rules).
    pub allowed_tools: Vec<String>,
    /// `--disallowedTools`.
    pub disallowed_tools: Vec<String>,
    /// `--permission-mode`.
    pub permission_mode: Option<PermissionMode>,
    /// `--model`.
    pub model: Option<String>,
    /// `--allow-domain` (`cordon sandbox`): `sandbox.network.allowedDomains` of the CLI layer.
    pub allowed_domains: Vec<String>,
    /// `--add-dir` (absolute paths): `permissions.additionalDirectories` of the CLI layer,
    /// checked as every entry of that setting is before a sandbox mounts it.
    pub additional_directories: Vec<String>,
    /// `--mcp-config`: `mcpServers` of the CLI layer.
    pub mcp_servers: Option<serde_json::Map<String, Value>>,
    /// `--strict-mcp-config`: no MCP server but those of `--mcp-config`.
    pub strict_mcp_config: bool,
    /// `--setting-sources`: which of the user's and the workspace's files are read
    /// (`None`: all; the managed settings and the command line always are).
    pub setting_sources: Option<Vec<Source>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: invalid JSON: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {problem}")]
    Invalid { path: String, problem: String },
    #[error(
        "--trust is refused by the managed settings (allowHeadlessTrust: false); trust the workspace with `cordon trust` instead"
    )]
    TrustFlagRefused,
    #[error("deciding whether the workspace is trusted: {0}")]
    Trust(#[from] Box<crate::trust::TrustError>),
}

/// The merged permission settings, each rule with its origin.
#[derive(Debug, Clone, Default)]
pub struct PermissionSettings {
    pub allow: Vec<ScopedRule>,
    pub ask: Vec<ScopedRule>,
    pub deny: Vec<ScopedRule>,
    /// The mode and the source that set it.
    pub default_mode: Option<(PermissionMode, Source)>,
    pub additional_directories: Vec<(PathBuf, Source)>,
    /// The managed settings disabled bypassPermissions.
    pub bypass_disabled: bool,
    /// `sandbox.autoAllowBashIfSandboxed` and the source that set it.
    pub auto_allow_bash: Option<(bool, Source)>,
}

/// One file that was read.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    pub source: Source,
    /// The file, or `cli` for flags.
    pub origin: String,
    pub value: Value,
}

/// Everything merged.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub permissions: PermissionSettings,
    pub env: BTreeMap<String, String>,
    pub model: Option<String>,
    pub allow_managed_permission_rules_only: bool,
    pub allow_managed_hooks_only: bool,
    /// The highest-ranked source whose `disableAllHooks` counts (see
    /// [`Source::hook_rank`]): it drops the hooks of its own rank and below.
    pub disable_all_hooks: Option<Source>,
    pub workspace: PathBuf,
    pub home: Option<PathBuf>,
    /// `--strict-mcp-config`: only the command line's `mcpServers` count.
    pub strict_mcp_config: bool,
    /// `--setting-sources`: the file sources read (`None`: all); the memory files follow
    /// the same choice.
    pub setting_sources: Option<Vec<Source>>,
    files: Vec<LoadedFile>,
    warnings: Vec<String>,
    trust: WorkspaceTrust,
    ignored: Vec<IgnoredSetting>,
}

/// Where settings come from besides the workspace and the command line.
#[derive(Debug, Clone)]
pub struct SettingsSources {
    pub managed: PathBuf,
    pub user: Option<PathBuf>,
    /// The user's home (`~` in rules and `trustedDirectories`).
    pub home: Option<PathBuf>,
    /// The record of trusted workspaces (none: nothing was ever trusted).
    pub trust_store: Option<TrustStore>,
}

impl SettingsSources {
    /// The managed and user files, home and trust record of this process's environment.
    pub fn from_env() -> SettingsSources {
        SettingsSources {
            managed: managed_path(),
            user: user_path(),
            home: std::env::var_os("HOME").map(PathBuf::from),
            trust_store: TrustStore::from_env().ok(),
        }
    }

    /// Only a managed file: no user settings, no home, nothing trusted (tests).
    pub fn managed_only(managed: &Path) -> SettingsSources {
        SettingsSources {
            managed: managed.to_path_buf(),
            user: None,
            home: None,
            trust_store: None,
        }
    }
}

/// The operator's managed settings file.
pub const MANAGED_PATH: &str = "/etc/cordon/managed-settings.json";
/// Names another managed file where the operator installed none (tests).
pub const MANAGED_ENV: &str = "CORDON_MANAGED_SETTINGS";

/// The managed settings file: [`MANAGED_PATH`], or `CORDON_MANAGED_SETTINGS` when no file
/// (not even a dangling link) is at [`MANAGED_PATH`].
///
/// Security: the override lets tests, and hosts without an operator, have a managed layer;
/// it can never replace the operator's file, so no one who sets this process's environment
/// can drop the operator's locks. A repository cannot set it at all: settings `env`
/// reaches only the sandbox, never Cordon's own environment.
pub fn managed_path() -> PathBuf {
    managed_path_from(Path::new(MANAGED_PATH), std::env::var_os(MANAGED_ENV))
}

fn managed_path_from(system: &Path, override_path: Option<std::ffi::OsString>) -> PathBuf {
    match override_path {
        Some(p) if std::fs::symlink_metadata(system).is_err() => PathBuf::from(p),
        Some(_) => {
            tracing::warn!(
                "{MANAGED_ENV} ignored: the operator's {} exists",
                system.display()
            );
            system.to_path_buf()
        }
        None => system.to_path_buf(),
    }
}

/// Reads a settings file as text; `None` when it does not exist. The one place settings
/// files are read from disk.
fn read_text(path: &Path) -> Result<Option<String>, SettingsError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SettingsError::Read {
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// The workspace's own settings files (local, project), as text, each `None` when absent
/// or refused (a link, a FIFO, an oversized file: see [`repository_file`]).
pub fn read_repository_files(
    workspace: &Path,
) -> Result<Vec<(&'static str, Option<String>)>, SettingsError> {
    read_repository_files_noting(workspace, &mut Vec::new())
}

/// [`read_repository_files`], saying in `warnings` which files were refused.
fn read_repository_files_noting(
    workspace: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<(&'static str, Option<String>)>, SettingsError> {
    [LOCAL_FILE, PROJECT_FILE]
        .into_iter()
        .map(|rel| {
            Ok((
                rel,
                repository_file(workspace, &workspace.join(rel), warnings)?,
            ))
        })
        .collect()
}

/// The user settings file (`CORDON_USER_SETTINGS` overrides, for tests).
pub fn user_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CORDON_USER_SETTINGS") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cordon/settings.json"))
}

impl Settings {
    /// Loads and merges every source for `workspace` (canonical).
    pub fn load(workspace: &Path, cli: CliSettings) -> Result<Settings, SettingsError> {
        Self::load_from(workspace, cli, &SettingsSources::from_env())
    }

    /// [`Settings::load`] with explicit sources.
    pub fn load_from(
        workspace: &Path,
        cli: CliSettings,
        sources: &SettingsSources,
    ) -> Result<Settings, SettingsError> {
        let mut files = Vec::new();
        let mut warnings = Vec::new();
        let wanted = |source: Source| {
            cli.setting_sources
                .as_ref()
                .is_none_or(|only| only.contains(&source))
        };
        // Read first (a refused file becomes a warning); parsed below in merge order.
        let mut repository = read_repository_files_noting(workspace, &mut warnings)?;
        for ((_, text), source) in repository.iter_mut().zip([Source::Local, Source::Project]) {
            if !wanted(source) {
                *text = None;
            }
        }
        let mut parse = |source: Source, origin: String, text: &str| {
            let value: Value = serde_json::from_str(text).map_err(|e| SettingsError::Parse {
                path: PathBuf::from(&origin),
                source: e,
            })?;
            for w in validate::check(&value).map_err(|problem| SettingsError::Invalid {
                path: origin.clone(),
                problem,
            })? {
                warnings.push(format!("{origin}: {w}"));
            }
            files.push(LoadedFile {
                source,
                origin,
                value,
            });
            Ok::<(), SettingsError>(())
        };
        let origin = |p: &Path| p.display().to_string();
        if let Some(text) = read_text(&sources.managed)? {
            parse(Source::Managed, origin(&sources.managed), &text)?;
        }
        match &cli.settings {
            Some(SettingsArg::File(f)) => {
                let text = read_text(f)?.ok_or_else(|| SettingsError::Read {
                    path: f.clone(),
                    source: std::io::ErrorKind::NotFound.into(),
                })?;
                parse(Source::Cli, origin(f), &text)?;
            }
            Some(SettingsArg::Inline(json)) => parse(Source::Cli, "--settings".into(), json)?,
            None => {}
        }
        for ((rel, text), source) in repository.iter().zip([Source::Local, Source::Project]) {
            if let Some(text) = text {
                parse(source, origin(&workspace.join(rel)), text)?;
            }
        }
        if let Some(u) = sources.user.as_ref().filter(|_| wanted(Source::User))
            && let Some(text) = read_text(u)?
        {
            parse(Source::User, origin(u), &text)?;
        }
        // The flags, as one more CLI "file" after `--settings` (and so above it).
        let flags = cli_flags_value(&cli);
        if let Err(problem) = validate::check(&flags) {
            return Err(SettingsError::Invalid {
                path: "command line".into(),
                problem,
            });
        }
        // Right after the managed file: the flags outrank `--settings`.
        let at = files
            .iter()
            .position(|f| f.source != Source::Managed)
            .unwrap_or(files.len());
        files.insert(
            at,
            LoadedFile {
                source: Source::Cli,
                origin: "cli".into(),
                value: flags,
            },
        );
        let mut s = Settings {
            workspace: workspace.to_path_buf(),
            home: sources.home.clone(),
            strict_mcp_config: cli.strict_mcp_config,
            setting_sources: cli.setting_sources.clone(),
            warnings,
            ..Settings::default()
        };
        s.trust = s.decide_trust(&files, &repository, &cli, sources)?;
        if !s.trust.is_trusted() {
            s.restrict_repository(&mut files);
        }
        s.merge(files)?;
        for w in &s.warnings {
            tracing::warn!("settings: {w}");
        }
        Ok(s)
    }

    /// Whether the workspace is trusted, from its files as they were just read.
    fn decide_trust(
        &mut self,
        files: &[LoadedFile],
        repository: &[(&'static str, Option<String>)],
        cli: &CliSettings,
        sources: &SettingsSources,
    ) -> Result<WorkspaceTrust, SettingsError> {
        let managed = files.iter().find(|f| f.source == Source::Managed);
        let headless_allowed = managed
            .and_then(|m| m.value.get("allowHeadlessTrust"))
            .and_then(Value::as_bool)
            .unwrap_or(true);
        if cli.trust && !headless_allowed {
            return Err(SettingsError::TrustFlagRefused);
        }
        let mut directories = Vec::new();
        for f in files {
            let Some(dirs) = f.value.get("trustedDirectories").and_then(Value::as_array) else {
                continue;
            };
            if !matches!(f.source, Source::Managed | Source::User) {
                if !f.source.is_repository() {
                    self.warnings.push(format!(
                        "{}: trustedDirectories is honoured only in the user's and the managed settings; ignored",
                        f.origin
                    ));
                }
                continue;
            }
            for d in dirs.iter().filter_map(Value::as_str) {
                match crate::permissions::paths::expand_home(d, self.home.as_deref()) {
                    Some(p) if p.is_absolute() => directories.push(p),
                    _ => self.warnings.push(format!(
                        "{}: trustedDirectories entry {d:?} is not an absolute path; ignored",
                        f.origin
                    )),
                }
            }
        }
        // The settings files are bound by the very bytes parsed above.
        let texts: Vec<(&str, Option<&[u8]>)> = repository
            .iter()
            .map(|(rel, text)| (*rel, text.as_deref().map(str::as_bytes)))
            .collect();
        let inputs = TrustInputs {
            flag: cli.trust,
            directories: &directories,
            store: sources.trust_store.as_ref(),
        };
        let workspace = &self.workspace;
        crate::trust::decide(
            workspace,
            || crate::trust::Fingerprint::of(workspace, &texts),
            &inputs,
        )
        .map_err(|e| SettingsError::Trust(Box::new(e)))
    }

    /// Drops from the repository's files what an untrusted workspace may not set.
    fn restrict_repository(&mut self, files: &mut [LoadedFile]) {
        for f in files.iter_mut().filter(|f| f.source.is_repository()) {
            let (kept, ignored) = crate::trust::untrusted::restrict(&f.value, &f.origin);
            f.value = kept;
            self.ignored.extend(ignored);
        }
        let mcp = self.workspace.join(".mcp.json");
        // An empty file is a running session's placeholder, not a server list.
        if std::fs::symlink_metadata(&mcp).is_ok_and(|m| !m.is_file() || m.len() > 0) {
            // The entries themselves, so that the trust question shows each server's
            // command, url and the `${VAR}`s it would read, as it shows a hook's command.
            let mut warnings = Vec::new();
            let servers = repository_file(&self.workspace, &mcp, &mut warnings)
                .ok()
                .flatten()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .and_then(|v| v.get("mcpServers").cloned())
                .unwrap_or(Value::Null);
            self.ignored.push(IgnoredSetting {
                file: mcp.display().to_string(),
                key: "mcpServers".into(),
                why: "MCP servers are programs the repository chose".into(),
                value: servers,
            });
        }
    }

    fn merge(&mut self, files: Vec<LoadedFile>) -> Result<(), SettingsError> {
        let managed = files.iter().find(|f| f.source == Source::Managed);
        let flag = |key: &str| {
            managed
                .and_then(|m| m.value.get(key))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        self.allow_managed_permission_rules_only = flag("allowManagedPermissionRulesOnly");
        self.allow_managed_hooks_only = flag("allowManagedHooksOnly");
        self.permissions.bypass_disabled = managed
            .and_then(|m| m.value.pointer("/permissions/disableBypassPermissionsMode"))
            .and_then(Value::as_str)
            == Some("disable");
        for f in &files {
            for key in [
                "allowManagedPermissionRulesOnly",
                "allowManagedHooksOnly",
                "allowHeadlessTrust",
            ] {
                if f.source != Source::Managed && f.value.get(key).is_some() {
                    self.warnings.push(format!(
                        "{}: {key} is honoured only in the managed settings; ignored",
                        f.origin
                    ));
                }
            }
        }
        for f in &files {
            let root = self.root_of(f.source);
            let perms = f.value.get("permissions");
            for (list, key) in [("allow", 0), ("ask", 1), ("deny", 2)] {
                let Some(entries) = perms.and_then(|p| p.get(list)).and_then(Value::as_array)
                else {
                    continue;
                };
                if self.allow_managed_permission_rules_only && f.source != Source::Managed {
                    if !entries.is_empty() {
                        self.warnings.push(format!(
                            "{}: permissions.{list} ignored: the managed settings allow only managed rules",
                            f.origin
                        ));
                    }
                    continue;
                }
                for (i, e) in entries.iter().enumerate() {
                    let text = e.as_str().unwrap_or_default();
                    let rule = Rule::parse(text).map_err(|err| SettingsError::Invalid {
                        path: f.origin.clone(),
                        problem: format!("permissions.{list}[{i}]: {err}"),
                    })?;
                    let scoped = ScopedRule::new(rule, f.origin.clone(), root.clone());
                    match key {
                        0 => self.permissions.allow.push(scoped),
                        1 => self.permissions.ask.push(scoped),
                        _ => self.permissions.deny.push(scoped),
                    }
                }
            }
            if let Some(mode) = perms
                .and_then(|p| p.get("defaultMode"))
                .and_then(Value::as_str)
                .and_then(PermissionMode::parse)
            {
                self.offer_mode(mode, f);
            }
            if let Some(dirs) = perms
                .and_then(|p| p.get("additionalDirectories"))
                .and_then(Value::as_array)
            {
                for d in dirs.iter().filter_map(Value::as_str) {
                    let path = crate::permissions::paths::expand_home(d, self.home.as_deref())
                        .map(|p| crate::permissions::paths::absolute(&p, &root));
                    if let Some(p) = path {
                        self.permissions.additional_directories.push((p, f.source));
                    }
                }
            }
            if self.permissions.auto_allow_bash.is_none()
                && let Some(on) = f
                    .value
                    .pointer("/sandbox/autoAllowBashIfSandboxed")
                    .and_then(Value::as_bool)
            {
                self.permissions.auto_allow_bash = Some((on, f.source));
            }
            if self.model.is_none() {
                self.model = f
                    .value
                    .get("model")
                    .and_then(Value::as_str)
                    .map(String::from);
            }
            if let Some(env) = f.value.get("env").and_then(Value::as_object) {
                for (k, v) in env {
                    if let Some(v) = v.as_str() {
                        // Highest precedence first: keep the first value seen.
                        self.env.entry(k.clone()).or_insert_with(|| v.to_string());
                    }
                }
            }
            if f.value.get("disableAllHooks").and_then(Value::as_bool) == Some(true)
                && (f.source == Source::Managed || !self.allow_managed_hooks_only)
                && self
                    .disable_all_hooks
                    .is_none_or(|s| s.hook_rank() < f.source.hook_rank())
            {
                self.disable_all_hooks = Some(f.source);
            }
        }
        self.files = files;
        Ok(())
    }

    /// Takes `mode` from `f` unless a higher source already set one, or `f` may not set it.
    fn offer_mode(&mut self, mode: PermissionMode, f: &LoadedFile) {
        if self.permissions.default_mode.is_some() {
            return;
        }
        // An untrusted repository's acceptEdits or bypassPermissions never gets here: its
        // files were restricted before the merge.
        if mode == PermissionMode::BypassPermissions && self.permissions.bypass_disabled {
            self.warnings.push(format!(
                "{}: defaultMode bypassPermissions ignored: disabled by the managed settings",
                f.origin
            ));
            return;
        }
        self.permissions.default_mode = Some((mode, f.source));
    }

    /// The directory `/` rule anchors resolve to for a source: the workspace for the
    /// repository's files, the CLI and managed settings; the home directory for the user's.
    fn root_of(&self, source: Source) -> PathBuf {
        match (source, &self.home) {
            (Source::User, Some(h)) => h.clone(),
            _ => self.workspace.clone(),
        }
    }

    /// Warnings about unknown keys and ignored values.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Whether the workspace is trusted, and how (or why not).
    pub fn trust(&self) -> &WorkspaceTrust {
        &self.trust
    }

    /// What the untrusted workspace's own settings set and this session ignores.
    pub fn ignored(&self) -> &[IgnoredSetting] {
        &self.ignored
    }

    /// What trusting the workspace would make count, of what its own settings set: the
    /// [`Settings::ignored`] settings less those that the managed (or user) settings drop
    /// even in a trusted workspace (`allowManagedPermissionRulesOnly`,
    /// `allowManagedHooksOnly`, `disableAllHooks`, a disabled bypassPermissions mode).
    pub fn trust_would_enable(&self) -> Vec<IgnoredSetting> {
        let key_is =
            |i: &IgnoredSetting, key: &str| i.key == key || i.key.starts_with(&format!("{key} = "));
        let dropped_anyway = |i: &IgnoredSetting| {
            key_is(i, "permissions.allow") && self.allow_managed_permission_rules_only
                || key_is(i, "hooks")
                    && (self.allow_managed_hooks_only || self.hooks_disabled_for(Source::Project))
                || i.key == "permissions.defaultMode = \"bypassPermissions\""
                    && self.permissions.bypass_disabled
        };
        self.ignored
            .iter()
            .filter(|i| !dropped_anyway(i))
            .cloned()
            .collect()
    }

    /// The one message saying what an untrusted workspace's settings lost, for stderr; `None`
    /// when nothing was ignored.
    pub fn untrusted_notice(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        let changed = match &self.trust {
            WorkspaceTrust::Untrusted {
                reason: crate::trust::UntrustedReason::Changed(files),
            } => format!(" (trusted before; changed since: {})", files.join(", ")),
            WorkspaceTrust::Untrusted {
                reason: crate::trust::UntrustedReason::Unverifiable(why),
            } => format!(" (trusted before; cannot be checked now: {why})"),
            _ => String::new(),
        };
        let mut text = format!(
            "workspace {} is not trusted{changed}; its own settings may only narrow, so these are ignored:",
            self.workspace.display()
        );
        for i in &self.ignored {
            text.push_str(&format!("\n  {i}"));
        }
        text.push_str(&format!(
            "\ntrust it with `cordon trust {}` (or --trust for one run)",
            self.workspace.display()
        ));
        // Every caller shows it on a terminal, and the workspace's path is named by whoever
        // made the directory (a clone takes its remote's name): escaped like all terminal
        // output, so no control sequence reaches the screen. The keys are the policy's own
        // names with their values in JSON, already escaped.
        Some(crate::output::for_terminal(&text).into_owned())
    }

    /// The trust state and the ignored settings, for the stream-json init record.
    pub fn trust_record(&self) -> Value {
        let mut v = serde_json::to_value(&self.trust).unwrap_or(Value::Null);
        if let Some(obj) = v.as_object_mut() {
            obj.insert(
                "ignored".into(),
                serde_json::to_value(&self.ignored).unwrap_or(Value::Null),
            );
        }
        v
    }

    /// `sandbox.autoAllowBashIfSandboxed`: true unless a source set it false.
    pub fn auto_allow_bash(&self) -> bool {
        self.permissions.auto_allow_bash.is_none_or(|(on, _)| on)
    }

    /// The files that were read (and the CLI flags as `cli`), highest precedence first.
    pub fn files(&self) -> &[LoadedFile] {
        &self.files
    }

    /// Whether a `disableAllHooks` drops the hooks of `source` (see [`Source::hook_rank`]).
    pub fn hooks_disabled_for(&self, source: Source) -> bool {
        self.disable_all_hooks
            .is_some_and(|s| s.hook_rank() >= source.hook_rank())
    }

    /// The raw `hooks` objects with their source, highest precedence first; only managed
    /// ones with `allowManagedHooksOnly`, none of those a `disableAllHooks` drops.
    pub fn hooks_by_source(&self) -> Vec<(Source, Value)> {
        self.files
            .iter()
            .filter(|f| !self.allow_managed_hooks_only || f.source == Source::Managed)
            .filter(|f| !self.hooks_disabled_for(f.source))
            .filter_map(|f| f.value.get("hooks").map(|h| (f.source, h.clone())))
            .collect()
    }

    /// The merged permission mode (default when no source set one).
    pub fn mode(&self) -> PermissionMode {
        self.permissions
            .default_mode
            .map(|(m, _)| m)
            .unwrap_or(PermissionMode::Default)
    }

    /// The merged `permissions.additionalDirectories` (absolute; only from the sources
    /// allowed to set them), in order: the rules' working directories and the sandbox's
    /// writable ones beside the workspace.
    pub fn additional_directories(&self) -> Vec<PathBuf> {
        self.permissions
            .additional_directories
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// An engine configuration for a session working in `cwd`.
    pub fn engine_config(&self, cwd: &Path) -> EngineConfig {
        let mut cfg = EngineConfig::new(self.mode(), cwd);
        cfg.home = self.home.clone();
        cfg.allow = self.permissions.allow.clone();
        cfg.ask = self.permissions.ask.clone();
        cfg.deny = self.permissions.deny.clone();
        cfg.additional_directories = self.additional_directories();
        cfg.bypass_disabled = self.permissions.bypass_disabled;
        cfg.auto_allow_bash_if_sandboxed = self.auto_allow_bash();
        cfg
    }

    /// Read and Edit/Write deny rules, compiled for `cwd`: what the kernel binding enforces
    /// (`literal_path()` gives the file when the pattern has no wildcard).
    pub fn read_edit_deny_rules(&self, cwd: &Path) -> Vec<(String, PathPattern)> {
        crate::permissions::Engine::new(self.engine_config(cwd))
            .read_edit_deny_patterns()
            .into_iter()
            .map(|(tool, p, _)| (tool, p))
            .collect()
    }
}

/// A settings file larger than this is not a settings file.
const REPOSITORY_FILE_MAX: u64 = 1024 * 1024;

/// The text of one of the repository's settings files (`path` inside `workspace`), read
/// beneath the workspace and never through a link: a `.claude/settings.json` linked to a
/// host file must not be read on the host. A missing file is `None`; a refused one (a
/// link, a FIFO, too large, not text) is `None` with a warning naming it, so a hostile
/// repository cannot stop a session from starting; other read errors are errors.
pub(crate) fn repository_file(
    workspace: &Path,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, SettingsError> {
    use sandbox_agent::beneath::{ReadError, WorkspaceReader};
    let read_err = |source| SettingsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let ws = match WorkspaceReader::open(workspace) {
        Ok(ws) => ws,
        Err(ReadError::OpenRoot { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(e) => return Err(read_err(std::io::Error::other(e.to_string()))),
    };
    let Some(rel) = ws.relative(path) else {
        return Err(read_err(std::io::Error::other(
            "not a path beneath the workspace",
        )));
    };
    match ws.read_text(rel, REPOSITORY_FILE_MAX) {
        Ok(text) => Ok(text),
        Err(ReadError::Read { source, .. }) => Err(read_err(source)),
        Err(refused) => {
            warnings.push(format!("{refused}; its settings are ignored"));
            Ok(None)
        }
    }
}

/// The CLI flags as a settings object.
fn cli_flags_value(cli: &CliSettings) -> Value {
    let rules = |list: &[String]| -> Vec<Value> {
        list.iter()
            .flat_map(|s| split_rule_list(s))
            .map(Value::String)
            .collect()
    };
    let mut perms = serde_json::Map::new();
    if !cli.allowed_tools.is_empty() {
        perms.insert("allow".into(), Value::Array(rules(&cli.allowed_tools)));
    }
    if !cli.disallowed_tools.is_empty() {
        perms.insert("deny".into(), Value::Array(rules(&cli.disallowed_tools)));
    }
    if let Some(m) = cli.permission_mode {
        perms.insert("defaultMode".into(), Value::String(m.as_str().into()));
    }
    if !cli.additional_directories.is_empty() {
        perms.insert(
            "additionalDirectories".into(),
            serde_json::json!(cli.additional_directories),
        );
    }
    let mut root = serde_json::Map::new();
    if !perms.is_empty() {
        root.insert("permissions".into(), Value::Object(perms));
    }
    if let Some(m) = &cli.model {
        root.insert("model".into(), Value::String(m.clone()));
    }
    if let Some(servers) = &cli.mcp_servers {
        root.insert("mcpServers".into(), Value::Object(servers.clone()));
    }
    if !cli.allowed_domains.is_empty() {
        root.insert(
            "sandbox".into(),
            serde_json::json!({"network": {"allowedDomains": cli.allowed_domains}}),
        );
    }
    Value::Object(root)
}

#[cfg(test)]
mod tests;
