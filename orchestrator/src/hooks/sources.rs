//! Where a hook was configured.

/// The provenance of a hook. Only [`HookSource::Managed`] hooks run on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookSource {
    /// The operator's managed settings (cannot be overridden).
    Managed,
    /// `--settings FILE` on the command line.
    Cli,
    /// `.claude/settings.local.json`.
    Local,
    /// `.claude/settings.json` (the repository: untrusted).
    Project,
    /// `~/.cordon/settings.json`.
    User,
    /// Registered by a client (the Agent SDK's hook callbacks).
    Sdk,
}

impl HookSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::Cli => "cli",
            Self::Local => "local",
            Self::Project => "project",
            Self::User => "user",
            Self::Sdk => "sdk",
        }
    }
}

/// ADAPTER, to be removed: the rules helper's `settings::Settings::hooks_by_source()` is
/// not in the tree yet. This reads the raw `"hooks"` objects of the same files, in the
/// same precedence (managed, cli, local, project, user), and managed settings'
/// `allowManagedHooksOnly`. Managed settings: `$CORDON_MANAGED_SETTINGS`, else
/// /etc/cordon/managed-settings.json.
pub mod settings_adapter {
    use std::path::{Path, PathBuf};

    use serde_json::Value;

    use super::HookSource;
    use crate::hooks::HooksError;

    /// The hook sources, and whether only managed hooks may run.
    pub type Sources = (Vec<(HookSource, String, Value)>, bool);

    pub fn hooks_by_source(workspace: &Path, cli: Option<&Path>) -> Result<Sources, HooksError> {
        let managed = std::env::var_os("CORDON_MANAGED_SETTINGS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/etc/cordon/managed-settings.json"));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let files: Vec<(HookSource, Option<PathBuf>)> = vec![
            (HookSource::Managed, Some(managed)),
            (HookSource::Cli, cli.map(Path::to_path_buf)),
            (
                HookSource::Local,
                Some(workspace.join(".claude/settings.local.json")),
            ),
            (
                HookSource::Project,
                Some(workspace.join(".claude/settings.json")),
            ),
            (
                HookSource::User,
                home.map(|h| h.join(".cordon/settings.json")),
            ),
        ];
        let mut out = Vec::new();
        let mut managed_only = false;
        for (source, path) in files {
            let Some(path) = path else { continue };
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let origin = path.display().to_string();
            let value: Value =
                serde_json::from_str(&text).map_err(|e| HooksError::InvalidValue {
                    origin: origin.clone(),
                    path: String::new(),
                    message: format!("not valid JSON: {e}"),
                })?;
            if source == HookSource::Managed {
                managed_only =
                    value.get("allowManagedHooksOnly").and_then(Value::as_bool) == Some(true);
            }
            if let Some(hooks) = value.get("hooks") {
                out.push((source, origin, hooks.clone()));
            }
        }
        Ok((out, managed_only))
    }
}
