//! The HTTP side of the proxy: a request head parsed into what the client wants
//! (`CONNECT host:port`, or a plain-HTTP request in absolute form), and the head rewritten
//! for the origin server.

/// What an HTTP request to the proxy asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpAsk {
    /// `CONNECT host:port`.
    Connect { host: String, port: u16 },
    /// A plain-HTTP request; `head` is what goes to the origin server, followed by the
    /// one body `body` delimits and nothing else.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
        body: Body,
    },
}

pub use crate::network::broker::http1::Body;

/// Why a request head was refused, with the status the client gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {why}")]
pub struct HeadError {
    pub status: u16,
    pub why: String,
}

fn bad(status: u16, why: impl Into<String>) -> HeadError {
    HeadError {
        status,
        why: why.into(),
    }
}

/// The largest request head the proxy reads.
pub const MAX_HEAD: usize = 64 * 1024;

/// Headers that concern the proxy hop only and never reach the origin.
const HOP_HEADERS: &[&str] = &[
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
];

/// Parses a complete request head (ending with the blank line) into `headers`.
pub fn parse_request<'h, 'b>(
    head: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
) -> Result<httparse::Request<'h, 'b>, HeadError> {
    let mut req = httparse::Request::new(headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => Ok(req),
        Ok(httparse::Status::Partial) => Err(bad(400, "incomplete request head")),
        Err(e) => Err(bad(400, format!("malformed request: {e}"))),
    }
}

/// Parses a complete head (`head` ends with the blank line).
pub fn parse(head: &[u8]) -> Result<HttpAsk, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let req = parse_request(head, &mut headers)?;
    let method = req.method.unwrap_or_default();
    let target = req.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) =
            authority(target, None).ok_or_else(|| bad(400, "CONNECT needs host:port"))?;
        return Ok(HttpAsk::Connect { host, port });
    }
    let Some(rest) = strip_prefix_ci(target, "http://") else {
        return Err(bad(
            400,
            "this proxy takes absolute http:// requests and CONNECT only",
        ));
    };
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if auth.contains('@') {
        return Err(bad(400, "credentials in the request target are refused"));
    }
    let (host, port) =
        authority(auth, Some(80)).ok_or_else(|| bad(400, "invalid host in the request target"))?;
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    check_host_header(req.headers, &host, port)?;
    // Where the request ends, as one unambiguous thing: the proxy forwards that much and
    // no more, so the server and the proxy agree on what the one request was.
    let body = crate::network::broker::http1::framing(req.headers)?;
    let head = origin_head(&req, &path, Some(auth));
    Ok(HttpAsk::Forward {
        host,
        port,
        head,
        body,
    })
}

/// A request head read inside a tunnel (CONNECT or SOCKS) to `host:port` on a port other
/// than 443, which carries plain HTTP: checked as a plain-HTTP request to the proxy is,
/// and rewritten to be the connection's only one.
///
/// Security: without this, `CONNECT allowed.com:80` followed by a request whose Host
/// names another site would reach whatever a shared server (a CDN, a virtual host)
/// routes that Host to. The target must be in origin form (an absolute one names its own
/// host, which a server may prefer to the Host header); HTTP/2 without TLS (`PRI *`)
/// and CONNECT inside a tunnel are refused, as their hosts cannot be checked here.
pub fn tunnel_request(head: &[u8], host: &str, port: u16) -> Result<(Vec<u8>, Body), HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let req = parse_request(head, &mut headers)?;
    let method = req.method.unwrap_or_default();
    let target = req.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("PRI") || method.eq_ignore_ascii_case("CONNECT") {
        return Err(bad(400, format!("{method} inside a tunnel is not relayed")));
    }
    if !(target.starts_with('/') || target == "*") {
        return Err(bad(
            400,
            "a request inside a tunnel takes an origin-form target (/path)",
        ));
    }
    check_host_header(req.headers, host, port)?;
    let body = crate::network::broker::http1::framing(req.headers)?;
    Ok((origin_head(&req, target, None), body))
}

/// The head that goes to the server: `method path`, the client's headers but the hop's,
/// a Host when the client sent none and `host` is known, and `Connection: close`.
///
/// One request per upstream connection: a second request on a kept-alive connection
/// would skip the Host check (its Host header could name anything). The server is asked
/// to close after its answer, and the proxy sends nothing past this request.
fn origin_head(req: &httparse::Request<'_, '_>, path: &str, host: Option<&str>) -> Vec<u8> {
    let method = req.method.unwrap_or_default();
    let mut out = format!("{method} {path} HTTP/1.{}\r\n", req.version.unwrap_or(1)).into_bytes();
    for h in req.headers.iter() {
        if HOP_HEADERS.iter().any(|n| h.name.eq_ignore_ascii_case(n)) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    let has_host = req
        .headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("host"));
    if let (false, Some(host)) = (has_host, host) {
        out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// The longest request line looked for in a tunnel's first bytes.
const MAX_REQUEST_LINE: usize = 8 * 1024;

/// Whether a tunnel's first bytes are an HTTP request: `Some(true)` or `Some(false)`,
/// `None` while too few bytes have come to tell. HTTP when they start with a method
/// token (3 to 10 capitals) and a space, and their first line (ended by a line feed, with
/// or without a carriage return: servers take both) ends with an HTTP version.
///
/// Security: fails towards HTTP. A line that started like a request but has no end
/// within 8 KiB counts as one (and is then refused as too large), so no request slips
/// through as raw bytes by never ending its line.
pub fn starts_like_request(buf: &[u8]) -> Option<bool> {
    let token = buf.iter().take_while(|b| b.is_ascii_uppercase()).count();
    match buf.get(token) {
        Some(b' ') if (3..=10).contains(&token) => {}
        Some(_) => return Some(false),
        None if token > 10 => return Some(false),
        None => return None,
    }
    let Some(end) = buf.iter().position(|b| *b == b'\n') else {
        return (buf.len() >= MAX_REQUEST_LINE).then_some(true);
    };
    let line = buf[..end].strip_suffix(b"\r").unwrap_or(&buf[..end]);
    Some(
        [b" HTTP/1.0".as_slice(), b" HTTP/1.1", b" HTTP/2.0"]
            .iter()
            .any(|v| line.ends_with(v)),
    )
}

/// Where a request head ends: just past its blank line, whether the lines end in CRLF or
/// a bare LF (servers accept both, so the proxy's checks must read both alike).
pub fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// [`head_end`] over a buffer that grows as bytes arrive, each byte searched once: a head
/// sent a byte at a time costs a search over it, not one per byte.
#[derive(Debug, Default)]
pub struct HeadSearch {
    searched: usize,
}

impl HeadSearch {
    /// Where the head in `buf` ends, if it has; `buf` only ever grows between calls.
    pub fn end(&mut self, buf: &[u8]) -> Option<usize> {
        let from = self.searched.min(buf.len());
        let found = head_end(&buf[from..]).map(|i| from + i);
        // The longest blank line is four bytes: three may already have come.
        self.searched = buf.len().saturating_sub(3);
        found
    }
}

/// Answers `status` with `why` and closes the writing half: how every refusal the client
/// can read is sent, outside a tunnel and inside one.
pub async fn send_error<S: tokio::io::AsyncWrite + Unpin>(stream: &mut S, status: u16, why: &str) {
    use tokio::io::AsyncWriteExt;
    let _ = stream.write_all(&error_response(status, why)).await;
    let _ = stream.shutdown().await;
}

/// Security: the origin server routes by the Host header, so a Host naming another host
/// than the request target would let a request reach what the policy never decided on.
fn check_host_header(
    headers: &[httparse::Header<'_>],
    host: &str,
    port: u16,
) -> Result<(), HeadError> {
    let hosts: Vec<&httparse::Header<'_>> = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"))
        .collect();
    if hosts.len() > 1 {
        return Err(bad(400, "several Host headers"));
    }
    let Some(h) = hosts.first() else {
        return Ok(());
    };
    let value = std::str::from_utf8(h.value).map_err(|_| bad(400, "Host header is not text"))?;
    match authority(value.trim(), Some(80)) {
        Some((h, p)) if h == *host && p == port => Ok(()),
        _ => Err(bad(
            403,
            format!(
                "the Host header {value:?} names another host than the request target {host}:{port}"
            ),
        )),
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// `host:port`, `[v6]:port` or (with a default port) `host`; the host normalized.
pub fn authority(text: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else if text.matches(':').count() == 1 {
        let (h, p) = text.split_once(':')?;
        (h, Some(p))
    } else if text.contains(':') {
        return None;
    } else {
        (text, None)
    };
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
        None => default_port?,
    };
    let host = crate::network::policy::normalize_host(host);
    (!host.is_empty()).then_some((host, port))
}

/// The response the proxy sends when it refuses or fails a request.
pub fn error_response(status: u16, why: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        502 => "Bad Gateway",
        _ => "Error",
    };
    let body = format!("cordon egress proxy: {why}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_targets() {
        assert_eq!(
            parse(b"CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap(),
            HttpAsk::Connect {
                host: "pypi.org".into(),
                port: 443
            }
        );
        assert_eq!(
            parse(b"CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n").unwrap(),
            HttpAsk::Connect {
                host: "2001:db8::1".into(),
                port: 8443
            }
        );
        assert_eq!(
            parse(b"CONNECT pypi.org HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .status,
            400
        );
    }

    #[test]
    fn a_tunnels_first_bytes_are_told_http_or_not_failing_towards_http() {
        assert_eq!(starts_like_request(b""), None);
        assert_eq!(starts_like_request(b"GE"), None);
        assert_eq!(starts_like_request(b"GET / HT"), None);
        assert_eq!(starts_like_request(b"GET / HTTP/1.1\r\n"), Some(true));
        assert_eq!(starts_like_request(b"GET / HTTP/1.0\n"), Some(true));
        assert_eq!(starts_like_request(b"PRI * HTTP/2.0\r\n"), Some(true));
        assert_eq!(
            starts_like_request(b"SET k v\r\n"),
            Some(false),
            "a Redis inline command"
        );
        assert_eq!(starts_like_request(b"SSH-2.0-x\r\n"), Some(false));
        assert_eq!(starts_like_request(b"\x16\x03\x01"), Some(false));
        assert_eq!(starts_like_request(b"get / HTTP/1.1\r\n"), Some(false));
        let endless = [b"GET /".as_slice(), &[b'a'; MAX_REQUEST_LINE]].concat();
        assert_eq!(
            starts_like_request(&endless),
            Some(true),
            "a line that never ends"
        );
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nrest"), Some(27));
        assert_eq!(head_end(b"GET / HTTP/1.1\nHost: a\n\nrest"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n"), None);
    }

    #[test]
    fn plain_requests_are_rewritten_to_origin_form() {
        let head = b"GET http://example.com/a/b?x=1 HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n";
        let HttpAsk::Forward {
            host, port, head, ..
        } = parse(head).unwrap()
        else {
            panic!("not a forward");
        };
        assert_eq!((host.as_str(), port), ("example.com", 80));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a/b?x=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_host_header_naming_another_host_is_refused() {
        let e = parse(b"GET http://allowed.org/ HTTP/1.1\r\nHost: evil.org\r\n\r\n").unwrap_err();
        assert_eq!(e.status, 403);
        let e = parse(b"GET http://allowed.org/ HTTP/1.1\r\nHost: allowed.org:8080\r\n\r\n")
            .unwrap_err();
        assert_eq!(e.status, 403);
        let e = parse(
            b"GET http://allowed.org/ HTTP/1.1\r\nHost: allowed.org\r\nHost: evil.org\r\n\r\n",
        )
        .unwrap_err();
        assert_eq!(e.status, 400);
        assert!(parse(b"GET http://allowed.org:80/ HTTP/1.1\r\nHost: ALLOWED.org\r\n\r\n").is_ok());
    }

    #[test]
    fn other_forms_are_refused() {
        for head in [
            &b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"[..],
            b"GET https://example.com/ HTTP/1.1\r\n\r\n",
            b"GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n",
            b"GET http://a:b:c/ HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(
                parse(head).unwrap_err().status,
                400,
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }
}
