//! `checkpointStoreMaxMiB`: the checkpoint store's size budget per session.
//!
//! The highest non-repository source that sets it wins (managed, CLI, user); the
//! repository's own settings may only lower it, never raise it: a hostile repository must
//! not be able to let the store fill the user's disk.

use serde_json::Value;

use super::Settings;

const KEY: &str = "checkpointStoreMaxMiB";

impl Settings {
    /// The checkpoint store's budget in bytes ([`crate::checkpoints::DEFAULT_BUDGET_BYTES`]
    /// unless the settings say otherwise).
    pub fn checkpoint_budget_bytes(&self) -> u64 {
        let mib = |v: &Value| v.get(KEY).and_then(Value::as_u64);
        let trusted = self
            .files()
            .iter()
            .filter(|f| !f.source.is_repository())
            .find_map(|f| mib(&f.value))
            .map(|m| m.saturating_mul(1024 * 1024));
        let base = trusted.unwrap_or(crate::checkpoints::DEFAULT_BUDGET_BYTES);
        self.files()
            .iter()
            .filter(|f| f.source.is_repository())
            .filter_map(|f| mib(&f.value))
            .map(|m| m.saturating_mul(1024 * 1024))
            .fold(base, u64::min)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LoadedFile, Source};
    use super::*;

    fn with(files: Vec<(Source, Value)>) -> Settings {
        Settings {
            files: files
                .into_iter()
                .map(|(source, value)| LoadedFile {
                    source,
                    origin: source.as_str().into(),
                    value,
                })
                .collect(),
            ..Settings::default()
        }
    }

    #[test]
    fn the_repository_may_lower_the_budget_but_never_raise_it() {
        let default = crate::checkpoints::DEFAULT_BUDGET_BYTES;
        assert_eq!(with(vec![]).checkpoint_budget_bytes(), default);
        let raise = serde_json::json!({ KEY: 1_000_000 });
        assert_eq!(
            with(vec![(Source::Project, raise.clone())]).checkpoint_budget_bytes(),
            default
        );
        let low = serde_json::json!({ KEY: 5 });
        assert_eq!(
            with(vec![(Source::Local, low)]).checkpoint_budget_bytes(),
            5 << 20
        );
        assert_eq!(
            with(vec![(Source::User, raise)]).checkpoint_budget_bytes(),
            1_000_000 << 20
        );
    }
}
