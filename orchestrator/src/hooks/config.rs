//! Parsing a settings file's `"hooks"` object, in Claude Code's shape:
//!
//! ```json
//! {"PreToolUse": [{"matcher": "Bash|Edit",
//!                  "hooks": [{"type": "command", "command": "./check.sh", "timeout": 30}]}]}
//! ```
//!
//! Invalid values (a bad regex, a missing command, a non-positive timeout) are rejected with
//! the file and the path of the bad value; unknown events and handler types are warned
//! about and skipped, so a settings file written for a newer Claude Code still loads.

use std::time::Duration;

use serde_json::Value;

use super::{DEFAULT_TIMEOUT, Handler, HookEntry, HookEvent, HookSource, Matcher, RunsOn};

/// Why a `"hooks"` object was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HooksError {
    #[error("{origin}: hooks.{path}: {message}")]
    InvalidValue {
        origin: String,
        path: String,
        message: String,
    },
    #[error("{origin}: hooks.{path}: invalid matcher regex: {message}")]
    InvalidMatcher {
        origin: String,
        path: String,
        message: String,
    },
}

/// The hooks of one `"hooks"` object from `source` (`origin` names the file).
pub fn parse_hooks(
    hooks: &Value,
    source: HookSource,
    origin: &str,
) -> Result<Vec<HookEntry>, HooksError> {
    let invalid = |path: String, message: &str| HooksError::InvalidValue {
        origin: origin.to_string(),
        path,
        message: message.to_string(),
    };
    let Some(events) = hooks.as_object() else {
        return Err(invalid(String::new(), "expected an object of events"));
    };
    let mut entries = Vec::new();
    for (name, groups) in events {
        let Some(event) = HookEvent::parse(name) else {
            tracing::warn!(%origin, event = %name, "unknown hook event ignored");
            continue;
        };
        let Some(groups) = groups.as_array() else {
            return Err(invalid(name.clone(), "expected an array of matcher groups"));
        };
        for (i, group) in groups.iter().enumerate() {
            let path = format!("{name}[{i}]");
            entries.extend(parse_group(group, event, source, origin, &path)?);
        }
    }
    Ok(entries)
}

fn parse_group(
    group: &Value,
    event: HookEvent,
    source: HookSource,
    origin: &str,
    path: &str,
) -> Result<Vec<HookEntry>, HooksError> {
    let invalid = |path: String, message: &str| HooksError::InvalidValue {
        origin: origin.to_string(),
        path,
        message: message.to_string(),
    };
    let Some(group) = group.as_object() else {
        return Err(invalid(path.into(), "expected an object with \"hooks\""));
    };
    let matcher = match group.get("matcher") {
        None | Some(Value::Null) => Matcher::all(),
        Some(Value::String(text)) => {
            Matcher::parse(text).map_err(|e| HooksError::InvalidMatcher {
                origin: origin.to_string(),
                path: format!("{path}.matcher"),
                message: e.to_string(),
            })?
        }
        Some(_) => return Err(invalid(format!("{path}.matcher"), "expected a string")),
    };
    for key in group.keys() {
        if key != "matcher" && key != "hooks" {
            tracing::warn!(%origin, at = %format!("hooks.{path}.{key}"), "unknown key ignored");
        }
    }
    let Some(handlers) = group.get("hooks").and_then(Value::as_array) else {
        return Err(invalid(
            format!("{path}.hooks"),
            "expected an array of hooks",
        ));
    };
    // Why: only the operator's own settings may put a program on the host; everything
    // else comes from the repository or the user and runs confined.
    let runs_on = if source == HookSource::Managed {
        RunsOn::Host
    } else {
        RunsOn::Sandbox
    };
    let mut entries = Vec::new();
    for (j, handler) in handlers.iter().enumerate() {
        let path = format!("{path}.hooks[{j}]");
        if let Some(handler) = parse_handler(handler, runs_on, origin, &path)? {
            entries.push(HookEntry {
                event,
                matcher: matcher.clone(),
                handler,
                source,
                origin: origin.to_string(),
                env: Vec::new(),
            });
        }
    }
    Ok(entries)
}

fn parse_handler(
    handler: &Value,
    runs_on: RunsOn,
    origin: &str,
    path: &str,
) -> Result<Option<Handler>, HooksError> {
    let invalid = |path: String, message: &str| HooksError::InvalidValue {
        origin: origin.to_string(),
        path,
        message: message.to_string(),
    };
    let Some(handler) = handler.as_object() else {
        return Err(invalid(path.into(), "expected an object"));
    };
    match handler.get("type").and_then(Value::as_str) {
        Some("command") => {}
        Some(other) => {
            tracing::warn!(%origin, at = %format!("hooks.{path}"), kind = %other, "hook type not supported; ignored");
            return Ok(None);
        }
        None => return Err(invalid(format!("{path}.type"), "expected \"command\"")),
    }
    let command = match handler.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        _ => {
            return Err(invalid(
                format!("{path}.command"),
                "expected a non-empty string",
            ));
        }
    };
    let timeout = match handler.get("timeout") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT,
        Some(v) => match v.as_f64() {
            Some(secs) if secs > 0.0 && secs <= 3600.0 => Duration::from_secs_f64(secs),
            _ => {
                return Err(invalid(
                    format!("{path}.timeout"),
                    "expected seconds, a number above 0 and at most 3600",
                ));
            }
        },
    };
    for key in handler.keys() {
        if !matches!(key.as_str(), "type" | "command" | "timeout") {
            tracing::warn!(%origin, at = %format!("hooks.{path}.{key}"), "unknown key ignored");
        }
    }
    Ok(Some(Handler::Command {
        command,
        timeout,
        runs_on,
    }))
}
