//! `sandbox.network.brokeredCredentials`: which requests the proxy adds a host secret to.
//!
//! ```json
//! {"sandbox": {"network": {
//!   "allowedDomains": ["api.github.com"],
//!   "brokeredCredentials": [
//!     {"domain": "api.github.com", "header": "Authorization",
//!      "valuePrefix": "Bearer ", "valueFromEnv": "GITHUB_TOKEN"},
//!     {"domain": "*.corp.example:8443", "header": "X-Api-Key",
//!      "valueFromFile": "/run/secrets/corp-key"}
//!   ]
//! }}}
//! ```
//!
//! - `domain`: an `allowedDomains` entry's syntax (`*` is refused: no secret goes to every
//!   host). It does not widen egress: the domain must be allowed as well.
//! - `header`: set on every request to a matching host, replacing any the client sent.
//! - `valueFromEnv` (a variable of Cordon's own process) or `valueFromFile` (an absolute
//!   path on the host; trailing line breaks dropped): exactly one. Read when the session
//!   starts. `valuePrefix` goes before it (`Bearer `).
//!
//! Security: only the managed and the user's settings may name one. A repository's files
//! (trusted or not) and the command line's `--settings` (a server session's request
//! settings sit in that layer) never can: whoever writes them could otherwise have the
//! host send its secret to a domain of their choosing.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::{BrokerError, Credential, Secret};
use crate::network::policy::DomainRule;

/// One entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    domain: String,
    header: String,
    #[serde(default)]
    value_prefix: String,
    value_from_env: Option<String>,
    value_from_file: Option<PathBuf>,
}

/// Where a credential's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueSource {
    Env(String),
    File(PathBuf),
}

impl std::fmt::Display for ValueSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Env(name) => write!(f, "env {name}"),
            Self::File(path) => write!(f, "file {}", path.display()),
        }
    }
}

/// A brokered credential as the settings name it (its value not read yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSpec {
    pub domain: DomainRule,
    pub header: String,
    pub prefix: String,
    pub source: ValueSource,
}

/// Headers the proxy never lets a credential set: they frame or route the request (a
/// credential in them would break or redirect it) or concern the proxy hop only.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// The largest credential file read.
const MAX_FILE: u64 = 64 * 1024;

impl CredentialSpec {
    /// Parses one entry of `brokeredCredentials` from the file `origin` names.
    pub fn parse(value: &Value, origin: impl Into<String>) -> Result<CredentialSpec, String> {
        let e: Entry = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        let domain = DomainRule::parse(&e.domain, origin).map_err(|e| e.to_string())?;
        if domain.names_every_host() {
            return Err(format!(
                "domain {:?}: a credential for every host is refused; name its domain",
                e.domain
            ));
        }
        if !is_token(&e.header) {
            return Err(format!("header {:?}: not an HTTP header name", e.header));
        }
        if FORBIDDEN_HEADERS.contains(&e.header.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "header {:?}: frames or routes the request; a credential cannot set it",
                e.header
            ));
        }
        if let Some(why) = bad_value(&e.value_prefix) {
            return Err(format!("valuePrefix: {why}"));
        }
        let source = match (e.value_from_env, e.value_from_file) {
            (Some(name), None) if !name.is_empty() && !name.contains(['=', '\0']) => {
                ValueSource::Env(name)
            }
            (Some(name), None) => return Err(format!("valueFromEnv {name:?}: not a name")),
            (None, Some(path)) if path.is_absolute() => ValueSource::File(path),
            (None, Some(path)) => {
                return Err(format!(
                    "valueFromFile {}: must be an absolute path",
                    path.display()
                ));
            }
            _ => return Err("exactly one of valueFromEnv and valueFromFile is needed".into()),
        };
        Ok(CredentialSpec {
            domain,
            header: e.header,
            prefix: e.value_prefix,
            source,
        })
    }

    /// Reads the value from the host (this process's environment or the file).
    pub fn load(&self) -> Result<Credential, BrokerError> {
        let domain = self.domain.entry().to_string();
        let secret = match &self.source {
            ValueSource::Env(name) => std::env::var_os(name)
                .ok_or_else(|| BrokerError::MissingEnv {
                    domain: domain.clone(),
                    name: name.clone(),
                })?
                .into_string()
                .map_err(|_| BrokerError::BadValue {
                    domain: domain.clone(),
                    why: format!("the variable {name} is not UTF-8"),
                })?,
            ValueSource::File(path) => read_file(path).map_err(|source| BrokerError::ReadFile {
                domain: domain.clone(),
                path: path.clone(),
                source,
            })?,
        };
        // Never the value in a message: only where it came from.
        let why = if secret.is_empty() {
            Some("it is empty")
        } else {
            bad_value(&secret)
        };
        if let Some(why) = why {
            return Err(BrokerError::BadValue {
                domain,
                why: format!("the value from {}: {why}", self.source),
            });
        }
        Ok(Credential {
            domain: self.domain.clone(),
            header: self.header.clone(),
            value: Secret(format!("{}{secret}", self.prefix)),
            from: self.source.to_string(),
            env: match &self.source {
                ValueSource::Env(name) => Some(name.clone()),
                ValueSource::File(_) => None,
            },
        })
    }

    /// What the init record and `cordon doctor` show: never a value.
    pub fn summary(&self) -> Value {
        serde_json::json!({
            "domain": self.domain.entry(),
            "header": self.header,
            "from": self.source.to_string(),
            "origin": self.domain.origin,
        })
    }
}

/// The file's text, its trailing line breaks dropped.
fn read_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_FILE + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE {
        return Err(std::io::Error::other("larger than 64 KiB"));
    }
    Ok(text.trim_end_matches(['\r', '\n']).to_string())
}

/// RFC 9110's token: what a header name may be.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Why `s` cannot be (part of) a header value: only printable ASCII, spaces and tabs, so
/// that no value can end the header and start another (CR, LF) or be read two ways.
fn bad_value(s: &str) -> Option<&'static str> {
    s.bytes()
        .any(|b| !(b == b'\t' || (0x20..0x7f).contains(&b)))
        .then_some("holds a control character or a non-ASCII byte")
}

/// Checks a settings file's `brokeredCredentials` (called by settings validation).
pub fn check(list: &Value) -> Result<(), String> {
    let list = list
        .as_array()
        .ok_or("sandbox.network.brokeredCredentials: expected an array of objects")?;
    for (i, e) in list.iter().enumerate() {
        CredentialSpec::parse(e, "")
            .map_err(|why| format!("sandbox.network.brokeredCredentials[{i}]: {why}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn entries_name_a_domain_a_header_and_one_source() {
        let spec = CredentialSpec::parse(
            &json!({"domain": "*.example.test:443", "header": "Authorization",
                    "valuePrefix": "Bearer ", "valueFromEnv": "TOKEN"}),
            "user: brokeredCredentials",
        )
        .unwrap();
        assert!(spec.domain.covers("api.example.test", 443));
        assert!(!spec.domain.covers("api.example.test", 8443));
        assert_eq!(spec.source, ValueSource::Env("TOKEN".into()));
        assert_eq!(spec.summary()["from"], "env TOKEN");
        for (bad, why) in [
            (
                json!({"domain": "*", "header": "X", "valueFromEnv": "T"}),
                "every host",
            ),
            (
                json!({"domain": "a.test", "header": "Host", "valueFromEnv": "T"}),
                "routes",
            ),
            (
                json!({"domain": "a.test", "header": "X Y", "valueFromEnv": "T"}),
                "header name",
            ),
            (json!({"domain": "a.test", "header": "X"}), "exactly one"),
            (
                json!({"domain": "a.test", "header": "X", "valueFromEnv": "T", "valueFromFile": "/k"}),
                "exactly one",
            ),
            (
                json!({"domain": "a.test", "header": "X", "valueFromFile": "k"}),
                "absolute",
            ),
            (
                json!({"domain": "a.test", "header": "X", "valuePrefix": "a\r\nB: c", "valueFromEnv": "T"}),
                "control character",
            ),
            (
                json!({"domain": "a.test", "header": "X", "valueFromEnv": "T", "value": "s"}),
                "unknown field",
            ),
        ] {
            let e = CredentialSpec::parse(&bad, "").unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_file_value_loses_its_line_break_and_errors_never_show_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "s3cret-file-value\n").unwrap();
        let spec = CredentialSpec::parse(
            &json!({"domain": "a.test", "header": "X-Key", "valueFromFile": path}),
            "",
        )
        .unwrap();
        let cred = spec.load().unwrap();
        assert_eq!(cred.value.expose(), "s3cret-file-value");
        assert!(!format!("{cred:?}").contains("s3cret"), "{cred:?}");
        std::fs::write(&path, "bad\u{7}value-s3cret").unwrap();
        let e = spec.load().unwrap_err().to_string();
        assert!(
            e.contains("control character") && !e.contains("s3cret"),
            "{e}"
        );
        let missing = CredentialSpec::parse(
            &json!({"domain": "a.test", "header": "X", "valueFromEnv": "CORDON_TEST_NO_SUCH_VARIABLE"}),
            "",
        )
        .unwrap();
        assert!(matches!(
            missing.load(),
            Err(BrokerError::MissingEnv { .. })
        ));
    }
}
