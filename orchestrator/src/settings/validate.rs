//! Checks one settings file's JSON against Claude Code's shape: invalid values are errors
//! naming the JSON path, unknown keys are warnings.

use serde_json::Value;

use crate::permissions::{PermissionMode, Rule};

/// What a known key holds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Bool,
    Number,
    String,
    StringList,
    Object,
    StringMap,
    /// Anything (a key we accept without using it and whose shape varies).
    Any,
}

/// Keys Cordon uses, with their kinds (`permissions` is checked on its own).
const USED: &[(&str, Kind)] = &[
    ("hooks", Kind::Object),
    ("env", Kind::StringMap),
    ("model", Kind::String),
    ("allowManagedPermissionRulesOnly", Kind::Bool),
    ("allowManagedHooksOnly", Kind::Bool),
    ("disableAllHooks", Kind::Bool),
    ("sandbox", Kind::Object),
    ("trustedDirectories", Kind::StringList),
    ("allowHeadlessTrust", Kind::Bool),
    ("checkpointStoreMaxMiB", Kind::Number),
    ("mcpServers", Kind::Object),
    ("enableAllProjectMcpServers", Kind::Bool),
    ("enabledMcpjsonServers", Kind::StringList),
    ("disabledMcpjsonServers", Kind::StringList),
    ("deniedMcpServers", Kind::Any),
    ("webSearch", Kind::Bool),
    ("webFetchModel", Kind::String),
];

/// Claude Code keys Cordon accepts silently and does not use (yet).
const KNOWN_UNUSED: &[(&str, Kind)] = &[
    ("$schema", Kind::String),
    ("cleanupPeriodDays", Kind::Number),
    ("includeCoAuthoredBy", Kind::Bool),
    ("statusLine", Kind::Object),
    ("subagentStatusLine", Kind::Object),
    ("enabledPlugins", Kind::Object),
    ("extraKnownMarketplaces", Kind::Object),
    ("apiKeyHelper", Kind::String),
    ("awsAuthRefresh", Kind::String),
    ("awsCredentialExport", Kind::String),
    ("otelHeadersHelper", Kind::String),
    ("outputStyle", Kind::String),
    ("forceLoginMethod", Kind::String),
    ("forceLoginOrgUUID", Kind::String),
    ("allowedMcpServers", Kind::Any),
    ("companyAnnouncements", Kind::StringList),
    ("spinnerTipsEnabled", Kind::Bool),
    ("alwaysThinkingEnabled", Kind::Bool),
    ("feedbackSurveyState", Kind::Any),
    ("theme", Kind::String),
    ("verbose", Kind::Bool),
    ("autoUpdates", Kind::Bool),
    ("preferredNotifChannel", Kind::String),
];

/// Validates `root`; returns warnings, or the first error as `path: problem`.
pub fn check(root: &Value) -> Result<Vec<String>, String> {
    let Some(obj) = root.as_object() else {
        return Err("(top level): expected an object".into());
    };
    let mut warnings = Vec::new();
    for (key, value) in obj {
        if key == "permissions" {
            check_permissions(value, &mut warnings)?;
        } else if key == "sandbox" {
            check_kind(key, value, Kind::Object)?;
            if let Some(v) = value.get("autoAllowBashIfSandboxed") {
                check_kind("sandbox.autoAllowBashIfSandboxed", v, Kind::Bool)?;
            }
            if let Some(limits) = value.get("limits") {
                super::limits::parse(limits)?;
            }
            if let Some(network) = value.get("network") {
                warnings.extend(crate::network::layers::check(network)?);
            }
        } else if let Some((_, kind)) = USED
            .iter()
            .chain(KNOWN_UNUSED.iter())
            .find(|(k, _)| k == key)
        {
            check_kind(key, value, *kind)?;
        } else {
            warnings.push(format!("{key}: unknown key, ignored"));
        }
    }
    Ok(warnings)
}

fn check_kind(path: &str, value: &Value, kind: Kind) -> Result<(), String> {
    let ok = match kind {
        Kind::Bool => value.is_boolean(),
        Kind::Number => value.is_number(),
        Kind::String => value.is_string(),
        Kind::Object => value.is_object(),
        Kind::Any => true,
        Kind::StringList => {
            let Some(list) = value.as_array() else {
                return Err(format!("{path}: expected an array of strings"));
            };
            for (i, v) in list.iter().enumerate() {
                if !v.is_string() {
                    return Err(format!("{path}[{i}]: expected a string"));
                }
            }
            true
        }
        Kind::StringMap => {
            let Some(map) = value.as_object() else {
                return Err(format!("{path}: expected an object of strings"));
            };
            for (k, v) in map {
                if !v.is_string() {
                    return Err(format!("{path}.{k}: expected a string"));
                }
            }
            true
        }
    };
    if ok {
        Ok(())
    } else {
        let want = match kind {
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            _ => "an object",
        };
        Err(format!("{path}: expected {want}"))
    }
}

fn check_permissions(value: &Value, warnings: &mut Vec<String>) -> Result<(), String> {
    let Some(obj) = value.as_object() else {
        return Err("permissions: expected an object".into());
    };
    for (key, v) in obj {
        let path = format!("permissions.{key}");
        match key.as_str() {
            "allow" | "ask" | "deny" => {
                check_kind(&path, v, Kind::StringList)?;
                for (i, rule) in v.as_array().into_iter().flatten().enumerate() {
                    let text = rule.as_str().unwrap_or_default();
                    Rule::parse(text).map_err(|e| format!("{path}[{i}]: {e}"))?;
                }
            }
            "additionalDirectories" => check_kind(&path, v, Kind::StringList)?,
            "defaultMode" => {
                let s = v
                    .as_str()
                    .ok_or_else(|| format!("{path}: expected a string"))?;
                if PermissionMode::parse(s).is_none() {
                    return Err(format!(
                        "{path}: unknown mode {s:?} (expected default, acceptEdits, plan, dontAsk or bypassPermissions)"
                    ));
                }
            }
            "disableBypassPermissionsMode" => {
                if v.as_str() != Some("disable") {
                    return Err(format!("{path}: expected \"disable\""));
                }
            }
            _ => warnings.push(format!("{path}: unknown key, ignored")),
        }
    }
    Ok(())
}
