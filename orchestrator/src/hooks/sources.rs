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
    /// A plugin's `hooks/hooks.json` (`--plugin-dir`: the user's choice, run as the
    /// user's hooks are, in the sandbox).
    Plugin,
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
            Self::Plugin => "plugin",
        }
    }
}

impl From<crate::settings::Source> for HookSource {
    fn from(source: crate::settings::Source) -> HookSource {
        use crate::settings::Source;
        match source {
            Source::Managed => Self::Managed,
            Source::Cli => Self::Cli,
            Source::Local => Self::Local,
            Source::Project => Self::Project,
            Source::User => Self::User,
        }
    }
}
