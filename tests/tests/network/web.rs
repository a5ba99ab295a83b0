//! WebFetch and WebSearch end to end: `cordon run` against the scripted model, WebFetch
//! reading pages a server of the test's own serves on loopback (reachable only because
//! the user's own settings name `127.0.0.1` itself: an IP an allow entry of the user's or
//! the managed settings names skips the refused ranges, a name resolving to loopback does
//! not) and, by name, on the test's own
//! internet ([`net::run`]: a test address and DNS server in a fresh network namespace);
//! WebSearch through the server-side search blocks the scripted model streams as the API
//! does.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use cordon_tests::Workspace;
use cordon_tests::agent::{run_json_ok, tool_results};
use cordon_tests::net::{self, DNS, SERVER};
use cordon_tests::scripted_model::{Reply, ScriptedModel, Turn};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PAGE: &str = "<html><head><title>T</title><script>steal()</script></head><body>\
    <h1>Release notes</h1><p>Version <b>4.2</b> adds <a href=\"/docs\">docs</a>.</p></body></html>";

/// Serves `/page` (HTML), `/old` (a same-host redirect to `/page`) and `/moved` (a
/// redirect to another host) on 127.0.0.1; counts the requests for each path.
async fn site() -> (SocketAddr, Arc<Mutex<HashMap<String, u32>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(Mutex::new(HashMap::new()));
    let counts = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let counts = counts.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                *counts.lock().unwrap().entry(path.clone()).or_insert(0) += 1;
                let reply = match path.as_str() {
                    "/page" => format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{PAGE}",
                        PAGE.len()
                    ),
                    "/old" => "HTTP/1.1 301 Moved\r\nlocation: /page\r\ncontent-length: 0\r\n\
                               connection: close\r\n\r\n"
                        .to_string(),
                    "/moved" => "HTTP/1.1 302 Found\r\nlocation: http://elsewhere.test/new\r\n\
                                 content-length: 0\r\nconnection: close\r\n\r\n"
                        .to_string(),
                    _ => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        .to_string(),
                };
                let _ = s.write_all(reply.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (addr, hits)
}

fn fetch(id: &str, url: &str, prompt: &str) -> Reply {
    Reply::tool_use(id, "WebFetch", json!({"url": url, "prompt": prompt}))
}

/// The user message of a recorded request, as text.
fn user_text(body: &Value) -> String {
    body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_answers_over_markdown_follows_same_host_redirects_and_caches() {
    let (addr, hits) = site().await;
    let old = format!("http://{addr}/old");
    let turns = vec![
        Turn::Reply(fetch("f1", &old, "What version?")),
        Turn::text("It is version 4.2."),
        Turn::Reply(fetch("f2", &old, "Again: what version?")),
        Turn::text("Still 4.2."),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let (ws, home) = (Workspace::new(), tempfile::tempdir().unwrap());
    // The user's own settings: only those (or the managed) may name a loopback address.
    let settings = r#"{"permissions": {"allow": ["WebFetch(domain:127.0.0.1)"]}}"#;
    std::fs::write(home.path().join("user.json"), settings).unwrap();
    run_json_ok(&model, home.path(), ws.path(), &[], "read it").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 5);
    // The prompt's own model call: no tools, the page as markdown, scripts gone.
    let side = &requests[1].body;
    assert!(side.get("tools").is_none(), "{side}");
    let asked = user_text(side);
    assert!(asked.contains("# Release notes"), "{asked}");
    assert!(asked.contains("**4.2**"), "{asked}");
    assert!(asked.contains(&format!("http://{addr}/page")), "{asked}");
    assert!(asked.contains("What version?"), "{asked}");
    assert!(!asked.contains("steal"), "{asked}");
    let first = tool_results(&requests[2].body);
    assert_eq!(first[0].0, "f1");
    assert!(!first[0].2, "{first:?}");
    assert!(first[0].1.contains("It is version 4.2."), "{first:?}");
    // The second fetch of the same URL is answered from the cache: no new download.
    assert!(user_text(&requests[3].body).contains("Again: what version?"));
    let second = tool_results(&requests[4].body);
    assert!(second[0].1.contains("from the cache"), "{second:?}");
    assert!(second[0].1.contains("Still 4.2."), "{second:?}");
    let hits = hits.lock().unwrap().clone();
    assert_eq!(hits.get("/old"), Some(&1), "{hits:?}");
    assert_eq!(hits.get("/page"), Some(&1), "{hits:?}");
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_refuses_loopback_names_denied_domains_and_reports_other_host_redirects() {
    let (addr, hits) = site().await;
    let port = addr.port();
    let turns = vec![
        Turn::Reply(
            fetch("loop", &format!("http://localhost:{port}/page"), "x")
                .with_tool_use(
                    "deny",
                    "WebFetch",
                    json!({"url": "https://blocked.test/", "prompt": "x"}),
                )
                .with_tool_use(
                    "away",
                    "WebFetch",
                    json!({"url": format!("http://{addr}/moved"), "prompt": "x"}),
                ),
        ),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let (ws, home) = (Workspace::new(), tempfile::tempdir().unwrap());
    let settings = json!({
        "permissions": {"allow": ["WebFetch"]},
        "sandbox": {"network": {
            "allowedDomains": ["localhost", "*.test", "127.0.0.1"],
            "deniedDomains": ["blocked.test"]
        }}
    })
    .to_string();
    std::fs::write(home.path().join("user.json"), settings).unwrap();
    run_json_ok(&model, home.path(), ws.path(), &[], "fetch").await;
    let requests = model.requests();
    // No prompt model call was made for any of them.
    assert_eq!(requests.len(), 2, "{requests:?}");
    let results: HashMap<String, (String, bool)> = tool_results(&requests[1].body)
        .into_iter()
        .map(|(id, text, err)| (id, (text, err)))
        .collect();
    let (text, err) = &results["loop"];
    assert!(*err && text.contains("127.0.0.1 is refused"), "{text}");
    let (text, err) = &results["deny"];
    assert!(*err && text.contains("denied by"), "{text}");
    assert!(
        text.contains("deniedDomains blocked.test"),
        "names the rule: {text}"
    );
    let (text, err) = &results["away"];
    assert!(!*err, "{text}");
    assert!(text.contains("http://elsewhere.test/new"), "{text}");
    assert!(text.contains("does not follow"), "{text}");
    let hits = hits.lock().unwrap().clone();
    assert_eq!(
        hits.get("/page"),
        None,
        "loopback by name must not be reached: {hits:?}"
    );
    assert_eq!(hits.get("/moved"), Some(&1), "{hits:?}");
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_carries_the_server_tool_and_sends_its_blocks_back_unchanged() {
    let results = json!([{"type": "web_search_result", "title": "Cordon docs",
        "url": "https://docs.cordon.test/net", "encrypted_content": "EqQBCgIYAh==",
        "page_age": "2 days"}]);
    let paused = Reply::default()
        .with_text("Searching.")
        .with_web_search("srvtoolu_01", "cordon egress", results.clone())
        .stop("pause_turn");
    let turns = vec![
        Turn::tool_use(
            "s1",
            "WebSearch",
            json!({"query": "cordon egress", "allowed_domains": ["docs.cordon.test"]}),
        ),
        Turn::Reply(paused),
        Turn::text("Cordon's docs describe the proxy."),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let (ws, home) = (Workspace::new(), tempfile::tempdir().unwrap());
    let settings = r#"{"webSearch": true, "permissions": {"allow": ["WebSearch"]}}"#;
    run_json_ok(
        &model,
        home.path(),
        ws.path(),
        &["--settings", settings],
        "search",
    )
    .await;
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // The main request offers WebSearch as a client tool; the search request carries
    // only the server tool, with the call's domains.
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(offered.contains(&"WebSearch"), "{offered:?}");
    assert_eq!(
        requests[1].body["tools"],
        json!([{"type": "web_search_20250305", "name": "web_search",
                "allowed_domains": ["docs.cordon.test"], "max_uses": 8}])
    );
    // The paused turn goes back exactly as the API streamed it.
    let sent_back = &requests[2].body["messages"][1];
    assert_eq!(sent_back["role"], "assistant");
    assert_eq!(
        sent_back["content"],
        json!([
            {"type": "text", "text": "Searching."},
            {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
             "input": {"query": "cordon egress"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": results}
        ])
    );
    let out = tool_results(&requests[3].body);
    assert_eq!(out[0].0, "s1");
    assert!(!out[0].2, "{out:?}");
    assert!(
        out[0]
            .1
            .contains("- Cordon docs: https://docs.cordon.test/net"),
        "{out:?}"
    );
    assert!(
        out[0].1.contains("Cordon's docs describe the proxy."),
        "{out:?}"
    );
    model.shutdown().await;
}

#[test]
fn web_fetch_reaches_an_allowed_name_and_refuses_one_that_resolves_to_loopback() {
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), || async {
        let names: HashMap<String, Ipv4Addr> =
            [("docs.test", SERVER), ("rebind.test", Ipv4Addr::LOCALHOST)]
                .into_iter()
                .map(|(n, a)| (n.to_string(), a))
                .collect();
        let asked = net::dns_server(IpAddr::V4(DNS), names).await;
        net::http_server(SocketAddr::new(IpAddr::V4(SERVER), 80), 0).await;
        let turns = vec![
            Turn::Reply(
                fetch("ok", "http://docs.test/guide", "Which host?").with_tool_use(
                    "rebind",
                    "WebFetch",
                    json!({"url": "http://rebind.test/", "prompt": "x"}),
                ),
            ),
            Turn::text("The host is docs.test."),
            Turn::text("done"),
        ];
        let model = ScriptedModel::start(turns).await.unwrap();
        let (ws, home) = (Workspace::new(), tempfile::tempdir().unwrap());
        let settings = json!({
            "permissions": {"allow": ["WebFetch"]},
            "sandbox": {"network": {"allowedDomains": ["docs.test", "rebind.test"]}}
        })
        .to_string();
        run_json_ok(
            &model,
            home.path(),
            ws.path(),
            &["--settings", &settings],
            "go",
        )
        .await;
        let requests = model.requests();
        assert_eq!(requests.len(), 3, "{requests:?}");
        // The page (plain text) reached the prompt's model call as it was served (the
        // server echoes a `Host: ` header; hyper writes it lower-case, so only the path).
        let asked_model = user_text(&requests[1].body);
        assert!(asked_model.contains("path=/guide"), "{asked_model}");
        assert!(
            asked_model.contains("http://docs.test/guide (HTTP 200"),
            "{asked_model}"
        );
        let results: HashMap<String, (String, bool)> = tool_results(&requests[2].body)
            .into_iter()
            .map(|(id, text, err)| (id, (text, err)))
            .collect();
        let (text, err) = &results["ok"];
        assert!(!*err && text.contains("The host is docs.test."), "{text}");
        let (text, err) = &results["rebind"];
        assert!(*err && text.contains("127.0.0.1 is refused"), "{text}");
        let asked = asked.lock().unwrap().clone();
        assert!(asked.iter().any(|n| n == "docs.test"), "{asked:?}");
        model.shutdown().await;
    });
}

/// WebFetch over https (a server certificate from a test CA that only this `cordon run`
/// trusts, through `SSL_CERT_FILE`), and each of its requests, allowed or refused, in the
/// session's egress log beside the transcript, as the sandbox's connections are.
#[test]
fn web_fetch_over_https_is_recorded_in_the_egress_log() {
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), || async {
        let names = HashMap::from([("docs.test".to_string(), SERVER)]);
        let _asked = net::dns_server(IpAddr::V4(DNS), names).await;
        let certs = tempfile::tempdir().unwrap();
        let ca = cordon_tests::tls::TestCa::new(certs.path(), &["docs.test"]);
        let files = HashMap::from([(
            "/notes".to_string(),
            b"TLS notes: version 7 over https".to_vec(),
        )]);
        let heads = net::file_server(
            SocketAddr::new(IpAddr::V4(SERVER), 443),
            files,
            Some(ca.acceptor()),
        )
        .await;
        let turns = vec![
            Turn::Reply(
                fetch("tls", "https://docs.test/notes", "Which version?").with_tool_use(
                    "denied",
                    "WebFetch",
                    json!({"url": "https://elsewhere.test/", "prompt": "x"}),
                ),
            ),
            Turn::text("Version 7."),
            Turn::text("done"),
        ];
        let model = ScriptedModel::start(turns).await.unwrap();
        let (ws, home) = (Workspace::new(), tempfile::tempdir().unwrap());
        let settings = json!({
            "permissions": {"allow": ["WebFetch"]},
            "sandbox": {"network": {"allowedDomains": ["docs.test"]}}
        })
        .to_string();
        let mut cmd = cordon_tests::agent::run_command(
            &model,
            home.path(),
            ws.path(),
            &["--output-format", "stream-json", "--settings", &settings],
        );
        cmd.env("SSL_CERT_FILE", &ca.ca_pem).arg("go");
        let out = cordon_tests::agent::Output::of(cmd).await;
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        // The init record says what the session's network is.
        let init: Value = serde_json::from_str(out.stdout.lines().next().unwrap()).unwrap();
        assert_eq!(init["subtype"], "init");
        assert_eq!(init["network"]["egress"], "proxy", "{init}");
        assert_eq!(
            init["network"]["allowedDomains"][0]["entry"], "docs.test",
            "{init}"
        );
        let requests = model.requests();
        assert_eq!(requests.len(), 3, "{}", out.stdout);
        let asked_model = user_text(&requests[1].body);
        assert!(
            asked_model.contains("version 7 over https"),
            "{asked_model}"
        );
        assert!(
            asked_model.contains("https://docs.test/notes (HTTP 200"),
            "{asked_model}"
        );
        let heads = heads.lock().unwrap().clone();
        assert_eq!(heads.len(), 1, "{heads:?}");
        let records = net::egress_records(home.path());
        let fetched = records
            .iter()
            .find(|r| r["host"] == "docs.test")
            .unwrap_or_else(|| panic!("{records:?}"));
        assert_eq!(fetched["protocol"], "webfetch");
        assert_eq!(fetched["port"], 443);
        assert_eq!(fetched["allowed"], true);
        assert_eq!(fetched["addr"], format!("{SERVER}:443"));
        assert_eq!(fetched["bytes_down"], 31, "{fetched}");
        assert!(
            fetched["rule"]
                .as_str()
                .unwrap()
                .contains("allowedDomains docs.test"),
            "{fetched}"
        );
        let refused = records
            .iter()
            .find(|r| r["host"] == "elsewhere.test")
            .unwrap_or_else(|| panic!("{records:?}"));
        assert_eq!(refused["allowed"], false, "{refused}");
        assert_eq!(refused["protocol"], "webfetch");
        model.shutdown().await;
    });
}
