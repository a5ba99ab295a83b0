//! One WebFetch download under the session's egress policy: the host decided and resolved
//! by the proxy's own [`Dialer`] (refused ranges dropped), the connection pinned to the
//! addresses it returned, size and time capped, redirects taken one at a time.
//!
//! A redirect to the same host (the port may change, http may become https) is followed
//! after the new URL passes the same checks; a redirect to another host, or from https to
//! http, is not followed: it comes back as [`Fetched::Redirect`] for the model to decide
//! on (and its own permission check).
//!
//! Every request, allowed or refused, ends as one [`ConnectionRecord`] in the session's
//! egress log, as the sandbox's connections through the proxy do ([`Egress`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Url;

use crate::network::proxy::dial::{DialError, Dialer};
use crate::network::proxy::record::{ConnectionLog, ConnectionRecord, Protocol};

/// How a session's fetches get out: the proxy's decisions and resolution, and where each
/// connection is recorded.
#[derive(Clone)]
pub struct Egress {
    pub dialer: Dialer,
    /// The session the records name.
    pub session: String,
    pub log: Arc<dyn ConnectionLog>,
}

/// One request's record, written when it is dropped: at the end of the hop, on an
/// error, and when the fetch's time cap cancels it midway.
struct Hop<'a> {
    egress: &'a Egress,
    rec: ConnectionRecord,
    started: Instant,
}

impl<'a> Hop<'a> {
    fn start(egress: &'a Egress, url: &Url) -> Hop<'a> {
        Hop {
            egress,
            // The request (a GET with a few headers) is not counted in bytes_up.
            rec: ConnectionRecord {
                host: crate::network::policy::normalize_host(url.host_str().unwrap_or_default()),
                port: url.port_or_known_default().unwrap_or(443),
                ..ConnectionRecord::begin(egress.session.clone(), Protocol::WebFetch)
            },
            started: Instant::now(),
        }
    }

    fn refused(&mut self, why: &FetchError) {
        self.rec.allowed = false;
        self.rec.rule = why.to_string();
    }
}

impl Drop for Hop<'_> {
    fn drop(&mut self) {
        let mut rec = self.rec.clone();
        rec.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if rec.rule.is_empty() {
            rec.rule = "cut off by the fetch's time cap".into();
        }
        self.egress.log.record(rec);
    }
}

/// The caps on one fetch.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of body read at most; the rest is cut off (and the page says so).
    pub max_bytes: usize,
    /// The whole fetch, redirects included.
    pub timeout: Duration,
    /// Same-host redirects followed at most.
    pub max_redirects: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            max_redirects: 10,
        }
    }
}

/// A downloaded page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Where it was finally read from (after same-host redirects).
    pub url: String,
    pub status: u16,
    pub content_type: String,
    /// Markdown for HTML, the text itself otherwise.
    pub text: String,
    /// The body was longer than [`Limits::max_bytes`].
    pub truncated: bool,
}

/// What a fetch ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    Page(Page),
    /// A redirect to another host (or from https to http): reported, not followed.
    Redirect {
        from: String,
        to: String,
        status: u16,
    },
}

/// Why a fetch failed; the text goes to the model as it stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("`{0}` is not a valid URL")]
    BadUrl(String),
    #[error("only http and https URLs can be fetched, not `{0}`")]
    Scheme(String),
    #[error("{host}: {source}")]
    Egress { host: String, source: DialError },
    #[error("{url}: {why}")]
    Http { url: String, why: String },
    #[error("{url}: more than {max} redirects")]
    TooManyRedirects { url: String, max: usize },
    #[error("{url}: the fetch took longer than {secs} s")]
    TimedOut { url: String, secs: u64 },
    #[error("{url}: {content_type} is not text")]
    Binary { url: String, content_type: String },
}

/// Checks `raw` is an http(s) URL with a host. Plain http is kept as it is (not
/// upgraded): the policy, not the scheme, decides where a session may go.
pub fn parse_url(raw: &str) -> Result<Url, FetchError> {
    let url = Url::parse(raw.trim()).map_err(|_| FetchError::BadUrl(raw.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::Scheme(url.scheme().to_string()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(FetchError::BadUrl(raw.to_string()));
    }
    Ok(url)
}

/// Fetches `url`, following same-host redirects, within `limits`.
pub async fn fetch(egress: &Egress, url: Url, limits: Limits) -> Result<Fetched, FetchError> {
    let secs = limits.timeout.as_secs();
    let shown = url.to_string();
    tokio::time::timeout(limits.timeout, follow(egress, url, limits))
        .await
        .unwrap_or(Err(FetchError::TimedOut { url: shown, secs }))
}

async fn follow(egress: &Egress, mut url: Url, limits: Limits) -> Result<Fetched, FetchError> {
    for _ in 0..=limits.max_redirects {
        let mut hop = Hop::start(egress, &url);
        let response = match get_once(&egress.dialer, &url, limits).await {
            Ok((response, rule)) => {
                hop.rec.allowed = true;
                hop.rec.rule = rule;
                hop.rec.addr = response.remote_addr();
                response
            }
            Err(e) => {
                hop.refused(&e);
                return Err(e);
            }
        };
        let status = response.status();
        let next = status
            .is_redirection()
            .then(|| location(&url, &response))
            .flatten();
        let Some(next) = next else {
            return read_page(url, response, limits, &mut hop.rec.bytes_down).await;
        };
        let next = parse_url(next.as_str())?;
        // Security: another host, or a downgrade to plain http, is the model's call.
        let downgrade = url.scheme() == "https" && next.scheme() == "http";
        if next.host_str() != url.host_str() || downgrade {
            return Ok(Fetched::Redirect {
                from: url.to_string(),
                to: next.to_string(),
                status: status.as_u16(),
            });
        }
        url = next;
    }
    Err(FetchError::TooManyRedirects {
        url: url.to_string(),
        max: limits.max_redirects,
    })
}

fn location(base: &Url, response: &reqwest::Response) -> Option<Url> {
    let value = response.headers().get(reqwest::header::LOCATION)?;
    base.join(value.to_str().ok()?).ok()
}

/// One GET, no redirect followed, connected only to the addresses the policy allowed;
/// with the rule that allowed it.
async fn get_once(
    dialer: &Dialer,
    url: &Url,
    limits: Limits,
) -> Result<(reqwest::Response, String), FetchError> {
    let host = url.host_str().unwrap_or_default().to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    let (addrs, rule) =
        dialer
            .addresses(&host, port)
            .await
            .map_err(|source| FetchError::Egress {
                host: host.clone(),
                source,
            })?;
    let http = |why: String| FetchError::Http {
        url: url.to_string(),
        why,
    };
    // Security: no proxy from the environment, no automatic redirects, and the name
    // pinned to the checked addresses, so nothing is resolved again behind the policy.
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(limits.timeout)
        .user_agent(concat!("cordon-webfetch/", env!("CARGO_PKG_VERSION")))
        .resolve_to_addrs(host.trim_start_matches('[').trim_end_matches(']'), &addrs)
        .build()
        .map_err(|e| http(e.to_string()))?;
    let response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "text/markdown, text/html, */*")
        .send()
        .await
        .map_err(|e| http(crate::model::error::chain(&e)))?;
    Ok((response, rule))
}

/// Reads the body (counting what arrives into `received`) and makes it text.
async fn read_page(
    url: Url,
    mut response: reqwest::Response,
    limits: Limits,
    received: &mut u64,
) -> Result<Fetched, FetchError> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("text/plain")
        .to_ascii_lowercase();
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| FetchError::Http {
        url: url.to_string(),
        why: crate::model::error::chain(&e),
    })? {
        *received += chunk.len() as u64;
        let room = limits.max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let text = to_text(&url, &content_type, &body)?;
    Ok(Fetched::Page(Page {
        url: url.to_string(),
        status,
        content_type,
        text,
        truncated,
    }))
}

/// HTML becomes markdown; other text stays as it is; anything else is refused.
fn to_text(url: &Url, content_type: &str, body: &[u8]) -> Result<String, FetchError> {
    let is_html = content_type.contains("html");
    let is_text = is_html
        || content_type.starts_with("text/")
        || ["json", "xml", "javascript", "yaml", "toml"]
            .iter()
            .any(|t| content_type.contains(t));
    if !is_text {
        return Err(FetchError::Binary {
            url: url.to_string(),
            content_type: content_type.to_string(),
        });
    }
    let text = String::from_utf8_lossy(body);
    if !is_html {
        return Ok(text.into_owned());
    }
    Ok(html_to_markdown(&text))
}

/// Markdown of an HTML page; scripts, styles and other non-content elements dropped.
pub fn html_to_markdown(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec![
            "script", "style", "noscript", "iframe", "svg", "head", "template",
        ])
        .build();
    converter.convert(html).unwrap_or_else(|_| html.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_with_a_host() {
        assert!(parse_url("https://docs.rs/x").is_ok());
        assert!(parse_url("http://203.0.113.7:8080/").is_ok());
        assert!(matches!(
            parse_url("file:///etc/passwd"),
            Err(FetchError::Scheme(_))
        ));
        assert!(matches!(
            parse_url("ftp://x.test/"),
            Err(FetchError::Scheme(_))
        ));
        assert!(matches!(parse_url("not a url"), Err(FetchError::BadUrl(_))));
    }

    #[test]
    fn html_becomes_markdown_without_scripts() {
        let md = html_to_markdown(
            "<html><head><title>t</title><script>alert(1)</script></head>\
             <body><h1>Title</h1><p>Some <b>bold</b> <a href=\"/x\">link</a>.</p></body></html>",
        );
        assert!(md.contains("# Title"), "{md}");
        assert!(md.contains("**bold**"), "{md}");
        assert!(md.contains("[link](/x)"), "{md}");
        assert!(!md.contains("alert"), "{md}");
    }

    #[test]
    fn binary_content_is_refused() {
        let url = parse_url("https://x.test/a.png").unwrap();
        assert!(matches!(
            to_text(&url, "image/png", b"\x89PNG"),
            Err(FetchError::Binary { .. })
        ));
        assert_eq!(to_text(&url, "application/json", b"{}").unwrap(), "{}");
    }
}
