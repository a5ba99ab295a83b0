//! The session's [`NetworkPolicy`] from its merged settings.
//!
//! - Allow entries (`sandbox.network.allowedDomains`, `WebFetch(domain:…)` allow rules)
//!   come from every layer the merge kept: an untrusted repository's `sandbox` keys and
//!   allow rules were already dropped ([`crate::trust::untrusted`]), so it cannot widen.
//! - `sandbox.network.allowManagedDomainsOnly: true` in the managed settings (only there)
//!   locks the allow list to the managed entries; other layers' entries are ignored with a
//!   warning. `allowManagedPermissionRulesOnly` already keeps other layers' WebFetch rules out.
//! - Deny entries (`deniedDomains`, `WebFetch(domain:…)` deny rules) come from every layer
//!   and always win.
//! - `allowLocalBinding`: the highest layer that sets it; with the lock, the managed one's.
//! - `allowEncryptedClientHello`: the highest of the managed and the user's settings that
//!   sets it (with the lock, the managed one's); anywhere else ignored with a warning.
//! - `brokeredCredentials` ([`crate::network::broker::config`]): from the managed and the
//!   user's settings only; anywhere else it is ignored with a warning.

use serde_json::Value;

use super::broker::CredentialSpec;
use super::policy::{DomainError, DomainRule, NetworkPolicy};
use crate::permissions::Rule;
use crate::settings::{LoadedFile, Settings, Source};

/// The network keys of the settings, resolved.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    pub policy: NetworkPolicy,
    /// Entries ignored (and why), for stderr and the init record.
    pub warnings: Vec<String>,
    /// Whether the managed settings lock the allow list.
    pub managed_only: bool,
    /// The brokered credentials (their values not read yet).
    pub credentials: Vec<CredentialSpec>,
}

impl Resolved {
    /// What the session's network is, for the stream-json init record and `cordon
    /// doctor`: `"egress": "none"` (no way out at all) or `"proxy"` with the allow and deny
    /// entries as written, each with where it came from.
    pub fn summary(&self) -> Value {
        let entries = |rules: &[DomainRule]| {
            rules
                .iter()
                .map(|r| serde_json::json!({"entry": r.entry(), "origin": r.origin}))
                .collect::<Vec<_>>()
        };
        serde_json::json!({
            "egress": if self.policy.grants_egress() { "proxy" } else { "none" },
            "allowedDomains": entries(&self.policy.allowed),
            "deniedDomains": entries(&self.policy.denied),
            "allowLocalBinding": self.policy.allow_local_binding,
            "allowEncryptedClientHello": self.policy.allow_encrypted_client_hello,
            "allowManagedDomainsOnly": self.managed_only,
            "brokeredCredentials": self.credentials.iter().map(CredentialSpec::summary).collect::<Vec<_>>(),
            "warnings": self.warnings,
        })
    }

    /// One line: "no network", or the allowed and denied entries.
    pub fn describe(&self) -> String {
        if !self.policy.grants_egress() {
            return "no network (no allowedDomains entry): commands have no way out".into();
        }
        let list = |rules: &[DomainRule]| {
            rules
                .iter()
                .map(DomainRule::entry)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut line = format!(
            "egress through the session's proxy to {}",
            list(&self.policy.allowed)
        );
        if !self.policy.denied.is_empty() {
            line.push_str(&format!("; denied: {}", list(&self.policy.denied)));
        }
        if self.managed_only {
            line.push_str("; managed domains only");
        }
        if self.policy.allow_local_binding {
            line.push_str("; local binding allowed");
        }
        if self.policy.allow_encrypted_client_hello {
            line.push_str("; encrypted ClientHellos (ECH) allowed");
        }
        for c in &self.credentials {
            line.push_str(&format!(
                "; {} brokered for {} (from {})",
                c.header,
                c.domain.entry(),
                c.source
            ));
        }
        line
    }
}

/// Resolves the settings' network policy.
pub fn from_settings(settings: &Settings) -> Result<Resolved, DomainError> {
    from_files(
        settings.files(),
        settings.allow_managed_permission_rules_only,
    )
}

/// [`from_settings`] over the merged files (highest precedence first).
pub fn from_files(files: &[LoadedFile], managed_rules_only: bool) -> Result<Resolved, DomainError> {
    let managed_only = files
        .iter()
        .filter(|f| f.source == Source::Managed)
        .any(|f| network_bool(f, "allowManagedDomainsOnly") == Some(true));
    let mut out = Resolved {
        managed_only,
        ..Resolved::default()
    };
    let mut local_binding: Option<bool> = None;
    for f in files {
        let locked_out = managed_only && f.source != Source::Managed;
        if f.source != Source::Managed && network_bool(f, "allowManagedDomainsOnly").is_some() {
            out.warnings.push(format!(
                "{}: sandbox.network.allowManagedDomainsOnly is honoured only in the managed settings; ignored",
                f.origin
            ));
        }
        let allowed = domain_list(f, "allowedDomains");
        if locked_out && !allowed.is_empty() {
            out.warnings.push(format!(
                "{}: sandbox.network.allowedDomains ignored: the managed settings allow only managed domains",
                f.origin
            ));
        } else {
            for d in allowed {
                let origin = format!("{}: allowedDomains {d}", f.source);
                out.policy
                    .allowed
                    .push(operator_mark(f, DomainRule::parse(d, origin)?));
            }
        }
        for d in domain_list(f, "deniedDomains") {
            let origin = format!("{}: deniedDomains {d}", f.source);
            out.policy.denied.push(DomainRule::parse(d, origin)?);
        }
        let rules_count = !(managed_rules_only && f.source != Source::Managed);
        if rules_count {
            for (list, domain) in webfetch_domains(f) {
                let origin = format!("{}: permissions.{list} WebFetch(domain:{domain})", f.source);
                let rule = DomainRule::parse(&domain, origin)?;
                match list {
                    "deny" => out.policy.denied.push(rule),
                    _ if locked_out => out.warnings.push(format!(
                        "{}: WebFetch(domain:{domain}) does not widen egress: the managed settings allow only managed domains",
                        f.origin
                    )),
                    _ => out.policy.allowed.push(operator_mark(f, rule)),
                }
            }
        }
        if local_binding.is_none() && !locked_out {
            local_binding = network_bool(f, "allowLocalBinding");
        }
    }
    out.policy.allow_local_binding = local_binding.unwrap_or(false);
    out.policy.allow_encrypted_client_hello = encrypted_client_hello(files, &mut out);
    credentials(files, &mut out);
    Ok(out)
}

/// `rule`, marked as the operator's when `f` is the managed or the user's own settings: only
/// those may open a refused address by naming it (`NetworkPolicy::may_reach_refused`).
fn operator_mark(f: &LoadedFile, rule: DomainRule) -> DomainRule {
    if matches!(f.source, Source::Managed | Source::User) {
        rule.from_operator()
    } else {
        rule
    }
}

/// `allowEncryptedClientHello` from the highest of the managed and the user's settings that
/// sets it (only the managed one when the allow list is locked to it); another layer's is
/// ignored, with a warning.
///
/// Security: an encrypted ClientHello hides from the proxy which site of a shared front
/// server a tunnel reaches, so allowing it widens every allowed domain to its front's other
/// sites. Only the operator and the user may accept that; a repository may not.
fn encrypted_client_hello(files: &[LoadedFile], out: &mut Resolved) -> bool {
    let mut decided = None;
    for f in files {
        let Some(value) = network_bool(f, "allowEncryptedClientHello") else {
            continue;
        };
        let why = match f.source {
            Source::Managed => None,
            Source::User if out.managed_only => {
                Some("the managed settings allow only managed domains")
            }
            Source::User => None,
            _ => Some("it is honoured only in the managed and the user's settings"),
        };
        if let Some(why) = why {
            out.warnings.push(format!(
                "{}: sandbox.network.allowEncryptedClientHello ignored: {why}",
                f.origin
            ));
        } else if decided.is_none() {
            decided = Some(value);
        }
    }
    decided.unwrap_or(false)
}

/// The brokered credentials of the managed and the user's settings (highest first);
/// another layer's are ignored, with a warning.
///
/// Security: a repository (trusted or not) and the command line's settings (a server
/// session's request settings sit there) must never choose where a host secret goes.
fn credentials(files: &[LoadedFile], out: &mut Resolved) {
    for f in files {
        let Some(list) = f.value.pointer("/sandbox/network/brokeredCredentials") else {
            continue;
        };
        if !matches!(f.source, Source::Managed | Source::User) {
            out.warnings.push(format!(
                "{}: sandbox.network.brokeredCredentials is honoured only in the managed and the user's settings; ignored",
                f.origin
            ));
            continue;
        }
        for entry in list.as_array().into_iter().flatten() {
            // Checked when the file was read ([`check`]); what fails here is ignored.
            let spec =
                match CredentialSpec::parse(entry, format!("{}: brokeredCredentials", f.source)) {
                    Ok(spec) => spec,
                    Err(why) => {
                        out.warnings.push(format!(
                            "{}: sandbox.network.brokeredCredentials: {why}; ignored",
                            f.origin
                        ));
                        continue;
                    }
                };
            if !reachable(&out.policy, &spec.domain) {
                out.warnings.push(format!(
                    "{}: brokered credential for {}: no allowedDomains entry lets it through; it is never sent",
                    f.origin,
                    spec.domain.entry()
                ));
            }
            out.credentials.push(spec);
        }
    }
}

/// Whether the policy lets a credential's domain through: an allow entry written the
/// same, or, for one name, the policy's decision on it (a pattern gets the benefit of the
/// doubt).
fn reachable(policy: &NetworkPolicy, domain: &DomainRule) -> bool {
    let entry = domain.entry();
    if policy.allowed.iter().any(|a| a.entry() == entry) {
        return true;
    }
    match crate::network::proxy::http::authority(entry, Some(443)) {
        Some((host, port)) if !host.starts_with('*') => policy.decide(&host, port).allowed,
        _ => true,
    }
}

fn network_bool(f: &LoadedFile, key: &str) -> Option<bool> {
    f.value
        .pointer(&format!("/sandbox/network/{key}"))
        .and_then(Value::as_bool)
}

fn domain_list<'a>(f: &'a LoadedFile, key: &str) -> Vec<&'a str> {
    f.value
        .pointer(&format!("/sandbox/network/{key}"))
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The `WebFetch(domain:x)` allow and deny rules of one file, as (list, domain).
fn webfetch_domains(f: &LoadedFile) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for list in ["allow", "deny"] {
        let Some(entries) = f
            .value
            .pointer(&format!("/permissions/{list}"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for text in entries.iter().filter_map(Value::as_str) {
            let Ok(rule) = Rule::parse(text) else {
                continue;
            };
            if rule.tool != "WebFetch" {
                continue;
            }
            if let Some(domain) = rule
                .specifier
                .as_deref()
                .and_then(|s| s.strip_prefix("domain:"))
            {
                out.push((list, domain.trim().to_string()));
            }
        }
    }
    out
}

/// Checks a settings file's `sandbox.network` object (called by settings validation):
/// errors for wrong kinds and invalid entries, warnings for keys Cordon does not use.
pub fn check(network: &Value) -> Result<Vec<String>, String> {
    let Some(obj) = network.as_object() else {
        return Err("sandbox.network: expected an object".into());
    };
    let mut warnings = Vec::new();
    for (key, v) in obj {
        let path = format!("sandbox.network.{key}");
        match key.as_str() {
            "allowedDomains" | "deniedDomains" => {
                let list = v
                    .as_array()
                    .ok_or_else(|| format!("{path}: expected an array of strings"))?;
                for (i, e) in list.iter().enumerate() {
                    let text = e
                        .as_str()
                        .ok_or_else(|| format!("{path}[{i}]: expected a string"))?;
                    DomainRule::parse(text, "").map_err(|e| format!("{path}[{i}]: {e}"))?;
                }
            }
            "allowManagedDomainsOnly" | "allowLocalBinding" | "allowEncryptedClientHello" => {
                if !v.is_boolean() {
                    return Err(format!("{path}: expected a boolean"));
                }
            }
            "brokeredCredentials" => crate::network::broker::config::check(v)?,
            _ => warnings.push(format!("{path}: unknown key, ignored")),
        }
    }
    Ok(warnings)
}

#[cfg(test)]
#[path = "layers_tests.rs"]
mod tests;
