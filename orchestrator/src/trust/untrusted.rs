//! What an untrusted workspace's own settings keep: `policies/untrusted-settings.json`,
//! compiled in. Default deny: a key the policy does not honour (or a value it does not
//! list) is dropped and reported as an [`IgnoredSetting`]. Keys are dotted paths at most
//! two levels deep (`permissions.allow`, `sandbox.autoAllowBashIfSandboxed`).

use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Map, Value};

const POLICY: &str = include_str!("../../../policies/untrusted-settings.json");

/// Why a key is dropped when the policy names no reason.
const DEFAULT_WHY: &str = "an untrusted workspace's settings may only narrow what runs";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Policy {
    version: u32,
    #[allow(dead_code)]
    why: String,
    honoured: Vec<Honoured>,
    ignored: Vec<Reason>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Honoured {
    key: String,
    /// Only these values are honoured; absent: any value.
    #[serde(default)]
    values: Option<Vec<Value>>,
    why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reason {
    key: String,
    why: String,
}

/// One setting an untrusted workspace's file set and Cordon ignored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IgnoredSetting {
    /// The file it was in.
    pub file: String,
    /// The key, dotted (`permissions.allow`), with the value when only some values count.
    pub key: String,
    pub why: String,
    /// What the file set it to (shown when the user is asked to trust the workspace; not
    /// in the init record, which names keys only). Null when there is no one value.
    #[serde(skip)]
    pub value: Value,
}

impl std::fmt::Display for IgnoredSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} ({})", self.file, self.key, self.why)
    }
}

fn parse(text: &str) -> Result<Policy, String> {
    let policy: Policy = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if policy.version != 1 {
        return Err(format!("unknown version {}", policy.version));
    }
    for h in &policy.honoured {
        if h.why.trim().is_empty() || h.key.split('.').count() > 2 {
            return Err(format!(
                "{}: every entry needs a why and at most two levels",
                h.key
            ));
        }
    }
    Ok(policy)
}

/// The compiled-in policy. Security: should it ever fail to parse (a test guards it),
/// nothing is honoured: failing closed only narrows.
fn policy() -> &'static Policy {
    static POLICY_CELL: OnceLock<Policy> = OnceLock::new();
    POLICY_CELL.get_or_init(|| {
        parse(POLICY).unwrap_or_else(|e| {
            tracing::error!("policies/untrusted-settings.json: {e}; honouring nothing");
            Policy {
                version: 1,
                why: String::new(),
                honoured: Vec::new(),
                ignored: Vec::new(),
            }
        })
    })
}

impl Policy {
    /// Whether `key` with `value` is honoured; `Err(with value)` when only the value is not.
    fn honours(&self, key: &str, value: &Value) -> Result<(), bool> {
        match self.honoured.iter().find(|h| h.key == key) {
            None => Err(false),
            Some(h) => match &h.values {
                Some(values) if !values.contains(value) => Err(true),
                _ => Ok(()),
            },
        }
    }

    fn has_children(&self, key: &str) -> bool {
        let prefix = format!("{key}.");
        self.honoured.iter().any(|h| h.key.starts_with(&prefix))
    }

    fn why(&self, key: &str) -> String {
        let top = key.split('.').next().unwrap_or(key);
        self.ignored
            .iter()
            .find(|r| r.key == key)
            .or_else(|| self.ignored.iter().find(|r| r.key == top))
            .map(|r| r.why.clone())
            .unwrap_or_else(|| DEFAULT_WHY.to_string())
    }
}

/// `value` (one settings file's JSON) without what an untrusted workspace may not set, and
/// what was dropped.
pub fn restrict(value: &Value, file: &str) -> (Value, Vec<IgnoredSetting>) {
    let policy = policy();
    let mut ignored = Vec::new();
    let Some(root) = value.as_object() else {
        return (Value::Object(Map::new()), ignored);
    };
    let mut kept = Map::new();
    let mut drop = |key: String, value: &Value, with_value: bool| {
        if is_empty(value) {
            return;
        }
        let why = policy.why(&key);
        let key = if with_value {
            format!("{key} = {value}")
        } else {
            key
        };
        ignored.push(IgnoredSetting {
            file: file.to_string(),
            key,
            why,
            value: value.clone(),
        });
    };
    for (key, v) in root {
        match policy.honours(key, v) {
            Ok(()) => {
                kept.insert(key.clone(), v.clone());
            }
            Err(false) if policy.has_children(key) && v.is_object() => {
                let mut sub = Map::new();
                for (child, cv) in v.as_object().into_iter().flatten() {
                    let path = format!("{key}.{child}");
                    match policy.honours(&path, cv) {
                        Ok(()) => {
                            sub.insert(child.clone(), cv.clone());
                        }
                        Err(with_value) => drop(path, cv, with_value),
                    }
                }
                if !sub.is_empty() {
                    kept.insert(key.clone(), Value::Object(sub));
                }
            }
            Err(with_value) => drop(key.clone(), v, with_value),
        }
    }
    ignored.sort_by(|a, b| a.key.cmp(&b.key));
    (Value::Object(kept), ignored)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_compiled_policy_parses() {
        let p = parse(POLICY).unwrap();
        assert!(p.honoured.iter().any(|h| h.key == "permissions.deny"));
    }

    #[test]
    fn only_narrowing_settings_are_kept() {
        let v = json!({
            "$schema": "x",
            "model": "m",
            "permissions": {
                "allow": ["Bash"], "ask": ["Bash(git push *)"], "deny": ["Read(.env)"],
                "defaultMode": "bypassPermissions", "additionalDirectories": ["/"]
            },
            "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "x"}]}]},
            "env": {"BASH_ENV": "./x"},
            "sandbox": {"autoAllowBashIfSandboxed": true, "network": {"allowedDomains": ["*"]}},
            "apiKeyHelper": "steal",
            "disableAllHooks": true,
            "enabledMcpjsonServers": ["x"]
        });
        let (kept, ignored) = restrict(&v, "f");
        assert_eq!(
            kept,
            json!({"$schema": "x", "model": "m", "disableAllHooks": true,
                "permissions": {"ask": ["Bash(git push *)"], "deny": ["Read(.env)"]}})
        );
        let keys: Vec<&str> = ignored.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "apiKeyHelper",
                "enabledMcpjsonServers",
                "env",
                "hooks",
                "permissions.additionalDirectories",
                "permissions.allow",
                "permissions.defaultMode = \"bypassPermissions\"",
                "sandbox.autoAllowBashIfSandboxed = true",
                "sandbox.network",
            ]
        );
        assert!(ignored.iter().all(|i| i.file == "f" && !i.why.is_empty()));
    }

    #[test]
    fn narrowing_values_pass_and_empty_ones_are_not_reported() {
        let v = json!({"permissions": {"defaultMode": "plan", "allow": []},
            "sandbox": {"autoAllowBashIfSandboxed": false}});
        let (kept, ignored) = restrict(&v, "f");
        assert_eq!(
            kept,
            json!({"permissions": {"defaultMode": "plan"},
                "sandbox": {"autoAllowBashIfSandboxed": false}})
        );
        assert!(ignored.is_empty(), "{ignored:?}");
        let (_, ignored) = restrict(&json!({"permissions": {"defaultMode": "acceptEdits"}}), "f");
        assert_eq!(ignored.len(), 1);
    }
}
