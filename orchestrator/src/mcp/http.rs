//! Streamable HTTP servers, reached from the orchestrator with the configured `headers`,
//! under the session's egress policy: the host must be allowed by the policy and resolve
//! to addresses it may reach (the proxy's own [`Dialer`] decides both), the connection is
//! pinned to those addresses, no proxy from the environment is used and no redirect is
//! followed. A session whose policy grants no egress reaches no HTTP server. The URL must
//! be http(s); the legacy SSE transport is refused earlier, in the config.

use std::collections::{BTreeMap, HashMap};

use http::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::network::proxy::dial::Dialer;

/// The transport for `url` with `headers` on every request, if `egress` lets the
/// orchestrator reach it.
pub async fn transport(
    url: &str,
    headers: &BTreeMap<String, String>,
    egress: Option<&Dialer>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("invalid url `{url}`: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("url `{url}` is not http or https"));
    }
    let mut custom = HashMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("invalid header name `{k}`: {e}"))?;
        // Security: the egress policy judged the url's host, and the connection (and
        // TLS's server name) go there; a Host header of another name would have a shared
        // front server (a CDN) route the request to another of its sites, past the
        // policy. As the proxy refuses such a request from the sandbox, so here.
        if name == reqwest::header::HOST {
            return Err(format!(
                "header `{k}` may not be set: a request goes to its url's host, and only \
                 that host is checked against the network policy"
            ));
        }
        let value =
            HeaderValue::from_str(v).map_err(|e| format!("invalid value for header `{k}`: {e}"))?;
        custom.insert(name, value);
    }
    let host = parsed.host_str().unwrap_or_default().to_string();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let Some(dialer) = egress else {
        return Err(format!(
            "the session's network policy allows no egress, so {host} cannot be reached; \
             allow it in the settings' sandbox.network.allowedDomains"
        ));
    };
    let (addrs, _rule) = dialer
        .addresses(&host, port)
        .await
        .map_err(|e| format!("{host}: {e}"))?;
    // Security: the name pinned to the addresses the policy checked (nothing resolves it
    // again behind the policy), no proxy from the environment, no redirects.
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .resolve_to_addrs(&host, &addrs)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(custom);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::network::{DomainRule, NetworkPolicy};

    fn dialer(allowed: &[&str]) -> Dialer {
        Dialer {
            policy: Arc::new(NetworkPolicy {
                allowed: allowed
                    .iter()
                    .map(|r| DomainRule::parse(r, "test").unwrap())
                    .collect(),
                ..Default::default()
            }),
            resolver: Arc::new(crate::network::proxy::dial::SystemResolver),
        }
    }

    #[tokio::test]
    async fn a_host_header_other_than_the_urls_is_refused() {
        let allowed = dialer(&["example.com"]);
        for name in ["Host", "host", "HOST"] {
            let headers = [(name.to_string(), "evil.example".to_string())].into();
            let refused = transport("https://example.com/mcp", &headers, Some(&allowed)).await;
            let why = refused.err().unwrap();
            assert!(why.contains("may not be set"), "{why}");
        }
    }

    #[tokio::test]
    async fn no_egress_or_a_host_the_policy_does_not_allow_is_refused() {
        let none = transport("http://127.0.0.1:9/mcp", &BTreeMap::new(), None).await;
        assert!(none.err().unwrap().contains("allows no egress"));
        let other = dialer(&["example.com"]);
        let refused = transport("http://127.0.0.1:9/mcp", &BTreeMap::new(), Some(&other)).await;
        assert!(refused.err().unwrap().starts_with("127.0.0.1:"));
        // An entry naming the loopback address itself: a repository's or the command
        // line's opens nothing there, the user's (or the managed settings') does.
        let theirs = dialer(&["127.0.0.1"]);
        let refused = transport("http://127.0.0.1:9/mcp", &BTreeMap::new(), Some(&theirs)).await;
        assert!(
            refused
                .err()
                .unwrap()
                .contains("managed or the user's own settings"),
            "a repository's entry does not open the host's loopback"
        );
        let mut ours = dialer(&[]);
        ours.policy = Arc::new(NetworkPolicy {
            allowed: vec![
                DomainRule::parse("127.0.0.1", "user")
                    .unwrap()
                    .from_operator(),
            ],
            ..Default::default()
        });
        let allowed = transport("http://127.0.0.1:9/mcp", &BTreeMap::new(), Some(&ours)).await;
        assert!(
            allowed.is_ok(),
            "the user's entry naming the address itself lets it through"
        );
    }
}
