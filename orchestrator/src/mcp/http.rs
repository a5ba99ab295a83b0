//! Streamable HTTP servers, reached from the orchestrator with the configured `headers`.
//! The URL must be http(s); the legacy SSE transport is refused earlier, in the config.

use std::collections::{BTreeMap, HashMap};

use http::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// The transport for `url` with `headers` on every request.
pub fn transport(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("invalid url `{url}`: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("url `{url}` is not http or https"));
    }
    let mut custom = HashMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("invalid header name `{k}`: {e}"))?;
        let value =
            HeaderValue::from_str(v).map_err(|e| format!("invalid value for header `{k}`: {e}"))?;
        custom.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(custom);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}
