//! Settings in Claude Code's shape, merged from five sources.
//!
//! | source  | file                                                         |
//! |---------|--------------------------------------------------------------|
//! | managed | `/etc/cordon/managed-settings.json` (`CORDON_MANAGED_SETTINGS`) |
//! | cli     | `--settings FILE`, then `--allowedTools` / `--disallowedTools` / `--permission-mode` |
//! | local   | `<workspace>/.claude/settings.local.json`                    |
//! | project | `<workspace>/.claude/settings.json`                          |
//! | user    | `~/.cordon/settings.json` (`CORDON_USER_SETTINGS`)           |
//!
//! Precedence is in that order: a scalar key takes the highest source's value; rule lists
//! merge (all sources' rules apply; deny beats ask beats allow whatever their source).
//!
//! The repository is untrusted, so project and local settings are limited:
//! - they can add rules, but never remove one: a managed deny always applies;
//! - with `allowManagedPermissionRulesOnly` (managed only), only managed rules count, also
//!   over the CLI flags; with `allowManagedHooksOnly`, only managed hooks run;
//! - `defaultMode: bypassPermissions` from project or local settings is ignored (a
//!   repository must not switch prompts off for whoever runs it); user and CLI may set it
//!   unless the managed `disableBypassPermissionsMode: "disable"` forbids it everywhere;
//! - `additionalDirectories` from project or local settings is ignored (it would widen what
//!   acceptEdits allows without asking).
//!
//! `allowManagedPermissionRulesOnly` and `allowManagedHooksOnly` are honoured only from the
//! managed file; elsewhere they are warned about and ignored.

pub mod limits;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::permissions::{
    EngineConfig, PermissionMode, Rule, ScopedRule, paths::PathPattern, split_rule_list,
};

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
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::Cli => "cli",
            Self::Local => "local",
            Self::Project => "project",
            Self::User => "user",
        }
    }

    /// Settings the repository itself provides (untrusted).
    pub fn is_repository(self) -> bool {
        matches!(self, Self::Local | Self::Project)
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The command line's part of the settings.
#[derive(Debug, Clone, Default)]
pub struct CliSettings {
    /// `--settings FILE`.
    pub settings_file: Option<PathBuf>,
    /// `--allowedTools` (each entry may hold several rules).
    pub allowed_tools: Vec<String>,
    /// `--disallowedTools`.
    pub disallowed_tools: Vec<String>,
    /// `--permission-mode`.
    pub permission_mode: Option<PermissionMode>,
    /// `--model`.
    pub model: Option<String>,
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
    pub disable_all_hooks: bool,
    pub workspace: PathBuf,
    pub home: Option<PathBuf>,
    files: Vec<LoadedFile>,
    warnings: Vec<String>,
}

/// The managed settings file (`CORDON_MANAGED_SETTINGS` overrides, for tests).
pub fn managed_path() -> PathBuf {
    std::env::var_os("CORDON_MANAGED_SETTINGS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/cordon/managed-settings.json"))
}

/// The user settings file (`CORDON_USER_SETTINGS` overrides, for tests).
pub fn user_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CORDON_USER_SETTINGS") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cordon/settings.json"))
}

impl Settings {
    /// Loads and merges every source for `workspace`.
    pub fn load(workspace: &Path, cli: CliSettings) -> Result<Settings, SettingsError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::load_from(
            workspace,
            cli,
            &managed_path(),
            user_path().as_deref(),
            home,
        )
    }

    /// [`Settings::load`] with explicit managed and user files.
    pub fn load_from(
        workspace: &Path,
        cli: CliSettings,
        managed: &Path,
        user: Option<&Path>,
        home: Option<PathBuf>,
    ) -> Result<Settings, SettingsError> {
        let mut files = Vec::new();
        let mut warnings = Vec::new();
        let mut read = |source: Source, path: &Path, required: bool| {
            if !required && !path.exists() {
                return Ok(());
            }
            let text = std::fs::read_to_string(path).map_err(|e| SettingsError::Read {
                path: path.to_path_buf(),
                source: e,
            })?;
            let value: Value = serde_json::from_str(&text).map_err(|e| SettingsError::Parse {
                path: path.to_path_buf(),
                source: e,
            })?;
            let origin = path.display().to_string();
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
        read(Source::Managed, managed, false)?;
        if let Some(f) = &cli.settings_file {
            read(Source::Cli, f, true)?;
        }
        read(
            Source::Local,
            &workspace.join(".claude/settings.local.json"),
            false,
        )?;
        read(
            Source::Project,
            &workspace.join(".claude/settings.json"),
            false,
        )?;
        if let Some(u) = user {
            read(Source::User, u, false)?;
        }
        // The flags, as one more CLI "file" after `--settings` (and so above it).
        let flags = cli_flags_value(&cli);
        if let Err(problem) = validate::check(&flags) {
            return Err(SettingsError::Invalid {
                path: "command line".into(),
                problem,
            });
        }
        // Right after the managed file: the flags outrank `--settings FILE`.
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
            home,
            warnings,
            ..Settings::default()
        };
        s.merge(files)?;
        for w in &s.warnings {
            tracing::warn!("settings: {w}");
        }
        Ok(s)
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
            for key in ["allowManagedPermissionRulesOnly", "allowManagedHooksOnly"] {
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
                if f.source.is_repository() {
                    self.warnings.push(format!(
                        "{}: permissions.additionalDirectories ignored: the repository's settings cannot widen where edits are accepted",
                        f.origin
                    ));
                } else {
                    for d in dirs.iter().filter_map(Value::as_str) {
                        let path = crate::permissions::paths::expand_home(d, self.home.as_deref())
                            .map(|p| crate::permissions::paths::absolute(&p, &root));
                        if let Some(p) = path {
                            self.permissions.additional_directories.push((p, f.source));
                        }
                    }
                }
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
            {
                self.disable_all_hooks = true;
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
        if mode == PermissionMode::BypassPermissions {
            if f.source.is_repository() {
                // Security: the repository is untrusted; it must not switch prompts off.
                self.warnings.push(format!(
                    "{}: defaultMode bypassPermissions ignored: a repository's settings cannot disable permission checks",
                    f.origin
                ));
                return;
            }
            if self.permissions.bypass_disabled {
                self.warnings.push(format!(
                    "{}: defaultMode bypassPermissions ignored: disabled by the managed settings",
                    f.origin
                ));
                return;
            }
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

    /// The files that were read (and the CLI flags as `cli`), highest precedence first.
    pub fn files(&self) -> &[LoadedFile] {
        &self.files
    }

    /// The raw `hooks` objects with their source, highest precedence first; only managed
    /// ones with `allowManagedHooksOnly`, none with `disableAllHooks`.
    pub fn hooks_by_source(&self) -> Vec<(Source, Value)> {
        if self.disable_all_hooks {
            return Vec::new();
        }
        self.files
            .iter()
            .filter(|f| !self.allow_managed_hooks_only || f.source == Source::Managed)
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

    /// An engine configuration for a session working in `cwd`.
    pub fn engine_config(&self, cwd: &Path) -> EngineConfig {
        let mut cfg = EngineConfig::new(self.mode(), cwd);
        cfg.home = self.home.clone();
        cfg.allow = self.permissions.allow.clone();
        cfg.ask = self.permissions.ask.clone();
        cfg.deny = self.permissions.deny.clone();
        cfg.additional_directories = self
            .permissions
            .additional_directories
            .iter()
            .map(|(p, _)| p.clone())
            .collect();
        cfg.bypass_disabled = self.permissions.bypass_disabled;
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
    let mut root = serde_json::Map::new();
    if !perms.is_empty() {
        root.insert("permissions".into(), Value::Object(perms));
    }
    if let Some(m) = &cli.model {
        root.insert("model".into(), Value::String(m.clone()));
    }
    Value::Object(root)
}

#[cfg(test)]
mod tests;
