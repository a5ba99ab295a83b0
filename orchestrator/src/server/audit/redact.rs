//! The audit record's input preview: a tool input with secret-looking values masked and the
//! length capped, by the policy in `policies/audit-redaction.json` (compiled in, checked at
//! load: every pattern must mask its `mask` examples and leave its `keep` examples alone).

use std::sync::OnceLock;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

const POLICY: &str = include_str!("../../../../policies/audit-redaction.json");
/// What a masked value becomes.
pub const MASK: &str = "[REDACTED]";

#[derive(Debug, thiserror::Error)]
pub enum RedactionPolicyError {
    #[error("parsing policies/audit-redaction.json: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("pattern {name}: invalid regex: {source}")]
    Regex { name: String, source: regex::Error },
    #[error("pattern {name}: example {example:?} should be {expected}")]
    Example {
        name: String,
        example: String,
        expected: &'static str,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[allow(dead_code)]
    version: u32,
    #[allow(dead_code)]
    why: String,
    max_preview_chars: usize,
    secret_keys: SecretKeys,
    patterns: Vec<PatternEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretKeys {
    #[allow(dead_code)]
    why: String,
    words: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternEntry {
    name: String,
    regex: String,
    #[allow(dead_code)]
    why: String,
    mask: Vec<String>,
    keep: Vec<String>,
}

/// The compiled redaction policy.
#[derive(Debug)]
pub struct Redactor {
    max_chars: usize,
    secret_words: Vec<String>,
    patterns: Vec<Regex>,
}

impl Redactor {
    /// Parses and checks a policy document (the compiled-in one is [`Redactor::builtin`]).
    pub fn from_json(text: &str) -> Result<Self, RedactionPolicyError> {
        let file: PolicyFile = serde_json::from_str(text)?;
        let mut patterns = Vec::with_capacity(file.patterns.len());
        for entry in &file.patterns {
            let re = Regex::new(&entry.regex).map_err(|source| RedactionPolicyError::Regex {
                name: entry.name.clone(),
                source,
            })?;
            check_examples(entry, &re)?;
            patterns.push(re);
        }
        Ok(Self {
            max_chars: file.max_preview_chars,
            secret_words: file
                .secret_keys
                .words
                .iter()
                .map(|w| w.to_ascii_lowercase())
                .collect(),
            patterns,
        })
    }

    /// The policy compiled into the binary. It is checked by a unit test, so a failure here
    /// is a build that never passed its tests; the fallback then masks every preview whole
    /// rather than let a secret through.
    pub fn builtin() -> &'static Self {
        static BUILTIN: OnceLock<Redactor> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            Self::from_json(POLICY).unwrap_or_else(|e| {
                tracing::error!("audit redaction policy invalid, previews fully masked: {e}");
                Self {
                    max_chars: 0,
                    secret_words: Vec::new(),
                    patterns: Vec::new(),
                }
            })
        })
    }

    /// `input` as compact JSON with secrets masked, cut to the policy's length (an ellipsis
    /// marks a cut).
    pub fn preview(&self, input: &Value) -> String {
        let masked = self.mask_value(input);
        let text = match &masked {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        self.cap(&text)
    }

    /// A plain string (an exec command line) with secrets masked and the length capped.
    pub fn preview_text(&self, text: &str) -> String {
        self.cap(&self.mask_str(text))
    }

    fn cap(&self, text: &str) -> String {
        if self.max_chars == 0 {
            return MASK.to_string();
        }
        if text.chars().count() <= self.max_chars {
            return text.to_string();
        }
        let mut cut: String = text.chars().take(self.max_chars).collect();
        cut.push('…');
        cut
    }

    fn mask_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.mask_str(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.mask_value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let v = if self.is_secret_key(k) {
                            Value::String(MASK.into())
                        } else {
                            self.mask_value(v)
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn is_secret_key(&self, key: &str) -> bool {
        let key = key.to_ascii_lowercase();
        self.secret_words.iter().any(|w| key.contains(w.as_str()))
    }

    fn mask_str(&self, text: &str) -> String {
        let mut out = text.to_string();
        for re in &self.patterns {
            if re.is_match(&out) {
                out = re.replace_all(&out, MASK).into_owned();
            }
        }
        out
    }
}

fn check_examples(entry: &PatternEntry, re: &Regex) -> Result<(), RedactionPolicyError> {
    let wrong = |example: &String, expected| RedactionPolicyError::Example {
        name: entry.name.clone(),
        example: example.clone(),
        expected,
    };
    if let Some(ex) = entry.mask.iter().find(|ex| !re.is_match(ex)) {
        return Err(wrong(ex, "masked"));
    }
    if let Some(ex) = entry.keep.iter().find(|ex| re.is_match(ex)) {
        return Err(wrong(ex, "kept"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
