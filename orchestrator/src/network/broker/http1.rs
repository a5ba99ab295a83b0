//! HTTP/1.1 inside a brokered tunnel: the client's request head checked against the
//! tunnel's host and rewritten with the credential, the end of its body found, and the
//! server's response head told to close.
//!
//! One request per connection: the proxy forwards the first request, then nothing more
//! the client sends (a second request could name another Host, which no check would see),
//! and asks the server and the client to close after the response (`Connection: close`).

use crate::network::proxy::http::{HeadError, authority, parse_request};

use super::Credential;

/// Headers of the hop only, never forwarded (besides those the `Connection` header names).
const HOP_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "upgrade",
];

/// How the request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    None,
    Length(u64),
    Chunked,
}

/// A request head ready for the server.
#[derive(Debug)]
pub struct Forward {
    pub head: Vec<u8>,
    pub body: Body,
}

fn bad(status: u16, why: impl Into<String>) -> HeadError {
    HeadError {
        status,
        why: why.into(),
    }
}

/// The `Connection` header's tokens, lowercase: the headers it makes hop-by-hop.
fn connection_tokens(headers: &[httparse::Header<'_>]) -> Vec<String> {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| {
            String::from_utf8_lossy(h.value)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn is_hop(name: &str, tokens: &[String]) -> bool {
    let lower = name.to_ascii_lowercase();
    HOP_HEADERS.contains(&lower.as_str()) || tokens.contains(&lower)
}

/// Checks a complete request head (ending with the blank line) against the tunnel's
/// `host:port` and rewrites it for the server: origin-form target, hop-by-hop headers and
/// any header of the credential's name dropped, the credential and `Connection: close`
/// added.
///
/// Security: the Host header (and an absolute target's authority) must name the tunnel's
/// host, or a server routing by Host (a CDN, a virtual host) would take the credential, or
/// the request, somewhere the policy never decided on. The body's framing must be one
/// unambiguous thing, so that the proxy and the server agree where the request ends.
pub fn request(
    head: &[u8],
    host: &str,
    port: u16,
    cred: &Credential,
) -> Result<Forward, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let req = parse_request(head, &mut headers)?;
    let method = req.method.unwrap_or_default();
    // A server answers TRACE (and IIS's TRACK) with the request it received, the
    // credential included: the command would read the secret off the reply.
    if method.eq_ignore_ascii_case("TRACE") || method.eq_ignore_ascii_case("TRACK") {
        return Err(bad(
            405,
            format!("{method} would echo the brokered credential back"),
        ));
    }
    let target = origin_target(req.path.unwrap_or_default(), host, port)?;
    check_host(req.headers, host, port)?;
    let body = framing(req.headers)?;
    let tokens = connection_tokens(req.headers);
    let mut out = format!("{method} {target} HTTP/1.{}\r\n", req.version.unwrap_or(1)).into_bytes();
    for h in req.headers.iter() {
        if is_hop(h.name, &tokens) || h.name.eq_ignore_ascii_case(&cred.header) {
            continue;
        }
        push_header(&mut out, h.name, h.value);
    }
    push_header(&mut out, &cred.header, cred.value.expose().as_bytes());
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Forward { head: out, body })
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The request target in origin form: `/path`, `*`, or an absolute `https://` target
/// naming the tunnel's host (made origin form).
fn origin_target(target: &str, host: &str, port: u16) -> Result<String, HeadError> {
    if target.starts_with('/') || target == "*" {
        return Ok(target.to_string());
    }
    let rest = target
        .get(..8)
        .filter(|p| p.eq_ignore_ascii_case("https://"))
        .map(|_| &target[8..])
        .ok_or_else(|| {
            bad(
                400,
                "the request target is neither a path nor an https:// URL",
            )
        })?;
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    match authority(auth, Some(443)) {
        Some((h, p)) if h == host && p == port && !auth.contains('@') => Ok(match path {
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        }),
        _ => Err(bad(
            403,
            format!("the request target names another host than the tunnel's {host}:{port}"),
        )),
    }
}

fn check_host(headers: &[httparse::Header<'_>], host: &str, port: u16) -> Result<(), HeadError> {
    let mut hosts = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"));
    let (Some(h), None) = (hosts.next(), hosts.next()) else {
        return Err(bad(400, "a request needs exactly one Host header"));
    };
    let value = std::str::from_utf8(h.value).map_err(|_| bad(400, "Host header is not text"))?;
    match authority(value.trim(), Some(443)) {
        Some((h, p)) if h == host && p == port => Ok(()),
        _ => Err(bad(
            403,
            format!("the Host header {value:?} names another host than the tunnel's {host}:{port}"),
        )),
    }
}

/// The body's framing: `Transfer-Encoding: chunked` alone, one `Content-Length`, or none.
pub(crate) fn framing(headers: &[httparse::Header<'_>]) -> Result<Body, HeadError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
            .collect()
    };
    let te = values("transfer-encoding");
    let cl = values("content-length");
    match (te.as_slice(), cl.as_slice()) {
        ([], []) => Ok(Body::None),
        ([], [len]) => len
            .parse::<u64>()
            .map(Body::Length)
            .map_err(|_| bad(400, "invalid Content-Length")),
        ([], _) => Err(bad(400, "several Content-Length headers")),
        ([chunked], []) if chunked == "chunked" => Ok(Body::Chunked),
        (_, []) => Err(bad(501, "only the chunked transfer coding is forwarded")),
        _ => Err(bad(400, "both Transfer-Encoding and Content-Length")),
    }
}

/// A server's response head, rewritten for the client: the connection closes after it.
/// `Ok((head, informational))`: an informational (1xx, not 101) head is followed by
/// another.
pub fn response(head: &[u8]) -> Result<(Vec<u8>, bool), HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(bad(502, "the server sent a malformed response head")),
    }
    let code = resp.code.unwrap_or_default();
    if (100..200).contains(&code) && code != 101 {
        return Ok((head.to_vec(), true));
    }
    let tokens = connection_tokens(resp.headers);
    let reason = resp.reason.unwrap_or_default();
    let mut out = format!("HTTP/1.{} {code} {reason}\r\n", resp.version.unwrap_or(1)).into_bytes();
    for h in resp.headers.iter() {
        if !is_hop(h.name, &tokens) {
            push_header(&mut out, h.name, h.value);
        }
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok((out, false))
}

/// Finds where a chunked body ends, fed the bytes as they come (strict CRLF framing:
/// anything else is refused rather than read two ways).
#[derive(Debug, Default)]
pub struct ChunkedEnd {
    state: Chunk,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// In a chunk-size line: the size so far and its digit count.
    #[default]
    SizeStart,
    Size(u64, u8),
    /// After the size: an extension, up to CR.
    Ext(u64),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    /// At the start of a trailer line (or of the final blank line).
    TrailerStart,
    Trailer,
    TrailerLf,
    FinalLf,
}

impl ChunkedEnd {
    /// Consumes `buf`; `Ok(Some(n))` when the body ends after its first `n` bytes.
    pub fn feed(&mut self, buf: &[u8]) -> Result<Option<usize>, &'static str> {
        let mut i = 0;
        while i < buf.len() {
            if let Chunk::Data(left) = self.state {
                let take = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .min(buf.len() - i);
                i += take;
                let left = left - take as u64;
                self.state = if left == 0 {
                    Chunk::DataCr
                } else {
                    Chunk::Data(left)
                };
                continue;
            }
            let b = buf[i];
            i += 1;
            self.state = match (self.state, b) {
                (Chunk::SizeStart, b) => Chunk::Size(hex(b).ok_or("invalid chunk size")?, 1),
                (Chunk::Size(n, d), b) if hex(b).is_some() => {
                    if d >= 15 {
                        return Err("chunk size too large");
                    }
                    Chunk::Size(n * 16 + hex(b).unwrap_or(0), d + 1)
                }
                (Chunk::Size(n, _), b';' | b' ' | b'\t') => Chunk::Ext(n),
                (Chunk::Size(n, _) | Chunk::Ext(n), b'\r') => Chunk::SizeLf(n),
                (Chunk::Ext(n), b) if b != b'\n' && b != 0 => Chunk::Ext(n),
                (Chunk::SizeLf(0), b'\n') => Chunk::TrailerStart,
                (Chunk::SizeLf(n), b'\n') => Chunk::Data(n),
                (Chunk::DataCr, b'\r') => Chunk::DataLf,
                (Chunk::DataLf, b'\n') => Chunk::SizeStart,
                (Chunk::TrailerStart, b'\r') => Chunk::FinalLf,
                (Chunk::TrailerStart | Chunk::Trailer, b) if b != b'\n' && b != b'\r' => {
                    Chunk::Trailer
                }
                (Chunk::Trailer, b'\r') => Chunk::TrailerLf,
                (Chunk::TrailerLf, b'\n') => Chunk::TrailerStart,
                (Chunk::FinalLf, b'\n') => return Ok(Some(i)),
                _ => return Err("malformed chunked body"),
            };
        }
        Ok(None)
    }
}

fn hex(b: u8) -> Option<u64> {
    char::from(b).to_digit(16).map(u64::from)
}

#[cfg(test)]
#[path = "http1_tests.rs"]
mod tests;
