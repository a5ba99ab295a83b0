use super::*;
use crate::network::policy::DomainRule;

fn cred() -> Credential {
    Credential::new(
        DomainRule::parse("api.test", "test").unwrap(),
        "Authorization",
        "Bearer host-secret".into(),
        "env TOKEN",
    )
}

fn text(f: &Forward) -> String {
    String::from_utf8(f.head.clone()).unwrap()
}

#[test]
fn the_credential_replaces_the_clients_and_the_connection_closes() {
    let head = b"GET /v1/x?y=1 HTTP/1.1\r\nHost: api.test\r\nauthorization: Bearer guess\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nAccept: */*\r\n\r\n";
    let f = request(head, "api.test", 443, &cred()).unwrap();
    assert_eq!(
        text(&f),
        "GET /v1/x?y=1 HTTP/1.1\r\nHost: api.test\r\nAccept: */*\r\nAuthorization: Bearer host-secret\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(f.body, Body::None);
}

#[test]
fn host_and_absolute_targets_must_name_the_tunnels_host() {
    let ok = |head: &str, port| request(head.as_bytes(), "api.test", port, &cred());
    assert!(ok("GET / HTTP/1.1\r\nHost: API.test:443\r\n\r\n", 443).is_ok());
    assert!(ok("GET / HTTP/1.1\r\nHost: api.test:8443\r\n\r\n", 8443).is_ok());
    let f = ok(
        "GET https://api.test/p HTTP/1.1\r\nHost: api.test\r\n\r\n",
        443,
    )
    .unwrap();
    assert!(text(&f).starts_with("GET /p HTTP/1.1\r\n"), "{}", text(&f));
    for (head, port, status) in [
        ("GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", 443, 403),
        ("GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", 8443, 403),
        (
            "GET / HTTP/1.1\r\nHost: api.test\r\nHost: other.test\r\n\r\n",
            443,
            400,
        ),
        ("GET / HTTP/1.1\r\n\r\n", 443, 400),
        (
            "GET https://other.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
            443,
            403,
        ),
        (
            "GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
            443,
            400,
        ),
    ] {
        assert_eq!(ok(head, port).unwrap_err().status, status, "{head}");
    }
}

#[test]
fn body_framing_must_be_unambiguous() {
    let frame = |extra: &str| {
        let head = format!("POST / HTTP/1.1\r\nHost: api.test\r\n{extra}\r\n");
        request(head.as_bytes(), "api.test", 443, &cred()).map(|f| f.body)
    };
    assert_eq!(frame("Content-Length: 12\r\n").unwrap(), Body::Length(12));
    assert_eq!(
        frame("Transfer-Encoding: Chunked\r\n").unwrap(),
        Body::Chunked
    );
    for bad in [
        "Content-Length: 1\r\nContent-Length: 2\r\n",
        "Content-Length: -1\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
    ] {
        assert!(frame(bad).is_err(), "{bad}");
    }
}

#[test]
fn responses_close_and_informational_ones_pass_unchanged() {
    let (head, info) = response(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap();
    assert!(info);
    assert_eq!(head, b"HTTP/1.1 100 Continue\r\n\r\n");
    let (head, info) =
        response(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n")
            .unwrap();
    assert!(!info);
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn a_chunked_body_ends_where_its_last_chunk_and_trailers_do() {
    let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Trailer: t\r\n\r\nGET /next HTTP/1.1\r\n";
    let end = body.len() - b"GET /next HTTP/1.1\r\n".len();
    assert_eq!(ChunkedEnd::default().feed(body).unwrap(), Some(end));
    // Fed a byte at a time, the same end.
    let mut c = ChunkedEnd::default();
    let at = (0..body.len()).find(|&i| c.feed(&body[i..=i]).unwrap() == Some(1));
    assert_eq!(at, Some(end - 1));
    assert_eq!(ChunkedEnd::default().feed(b"0\r\n\r\n").unwrap(), Some(5));
    assert_eq!(ChunkedEnd::default().feed(b"a\r\n0123").unwrap(), None);
    for bad in [
        &b"x\r\n"[..],
        b"4\nWiki\r\n",
        b"4\r\nWikiX\r\n",
        b"1000000000000000\r\n",
    ] {
        assert!(ChunkedEnd::default().feed(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_method_that_echoes_the_request_is_refused() {
    for method in ["TRACE", "trace", "TRACK"] {
        let head = format!("{method} / HTTP/1.1\r\nHost: api.test\r\n\r\n");
        let e = request(head.as_bytes(), "api.test", 443, &cred()).unwrap_err();
        assert_eq!(e.status, 405, "{method}");
    }
}
