//! MCP servers under the session's egress policy, end to end with `cordon run` and the
//! scripted model: `mcp-server-fetch` from PyPI over stdio inside the sandbox, reaching
//! the test's own internet ([`net::run`]) through the proxy; and a Streamable HTTP server
//! the test runs on loopback (the `mcp` SDK's), reached by the orchestrator with the
//! configured headers only because the policy names `127.0.0.1` itself. A legacy SSE
//! server is refused with a message saying so.

use std::collections::HashMap;
use std::io::BufRead;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use cordon_tests::Workspace;
use cordon_tests::agent::{Output, run_command, tool_names, tool_results};
use cordon_tests::net::{self, DNS, SERVER};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use serde_json::json;

use cordon_tests::net::egress_records;

const GUIDE: &str = "<html><head><title>Guide</title></head><body><article>\
    <h1>Fetched through the proxy</h1><p>The fetch server read this page from \
    docs.test, by way of the session's egress proxy.</p></article></body></html>";

/// `cordon run --output-format json ARGS -p PROMPT` in `ws`, its state in `home`.
async fn run(model: &ScriptedModel, home: &Path, ws: &Workspace, args: &[&str]) -> Output {
    let mut cmd = run_command(model, home, ws.path(), &["--output-format", "json"]);
    cmd.args(args).args(["-p", "use the tools"]);
    Output::of(cmd).await
}

/// `mcp-server-fetch` (PyPI) runs inside the sandbox; its only way out is the proxy, so a
/// page on an allowed name arrives and one on a name the policy does not allow never
/// leaves the sandbox. Two settings of the server's own:
/// - `--allow-private-ips` turns off its address guard, which would refuse every allowed
///   name: inside the sandbox an allowed name resolves to the DNS stub's placeholder (a
///   benchmarking range). The proxy still resolves the name on the host and refuses
///   private and metadata addresses itself, so nothing is loosened.
/// - `PATH` without Node.js: readabilipy, its HTML extractor, finding `node` but not its
///   own npm modules, runs `npm install` in its package directory at the first call and
///   fails the call when that fails (read-only here, and no npm registry is allowed); with
///   no `node` it uses its pure-Python extractor.
#[test]
fn mcp_server_fetch_reaches_an_allowed_domain_through_the_proxy_and_not_a_denied_one() {
    // Before entering the private internet, which has no package index.
    let python = cordon_tests::mcp_python();
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), move || async move {
        let names = ["docs.test", "blocked.test"]
            .into_iter()
            .map(|n| (n.to_string(), SERVER))
            .collect();
        let _asked = net::dns_server(IpAddr::V4(DNS), names).await;
        let files = HashMap::from([("/guide/".to_string(), GUIDE.as_bytes().to_vec())]);
        let heads = net::file_server(SocketAddr::new(IpAddr::V4(SERVER), 80), files, None).await;
        let fetch =
            |id: &str, url: &str| Turn::tool_use(id, "mcp__fetch__fetch", json!({"url": url}));
        let model = ScriptedModel::start(vec![
            fetch("ok", "http://docs.test/guide/"),
            fetch("no", "http://blocked.test/guide/"),
            Turn::text("done"),
        ])
        .await
        .unwrap();
        let ws = Workspace::new();
        let venv_bin = python.parent().unwrap();
        let server = json!({"command": python,
            "args": ["-m", "mcp_server_fetch", "--allow-private-ips"],
            "env": {"PATH": venv_bin}});
        std::fs::write(
            ws.join(".mcp.json"),
            json!({"mcpServers": {"fetch": server}}).to_string(),
        )
        .unwrap();
        let settings =
            json!({"sandbox": {"network": {"allowedDomains": ["docs.test"]}}}).to_string();
        let home = tempfile::tempdir().unwrap();
        let out = run(
            &model,
            home.path(),
            &ws,
            &[
                "--trust",
                "--allowedTools",
                "mcp__fetch",
                "--settings",
                &settings,
            ],
        )
        .await;
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        let requests = model.requests();
        assert_eq!(requests.len(), 3);
        let (_, text, is_error) = tool_results(&requests[1].body).remove(0);
        assert!(!is_error, "{text}");
        assert!(
            text.contains("Contents of http://docs.test/guide/"),
            "{text}"
        );
        assert!(text.contains("The fetch server read this page"), "{text}");
        let (_, text, is_error) = tool_results(&requests[2].body).remove(0);
        // The server asks for robots.txt first; the proxy answers that with its 403.
        assert!(is_error, "{text}");
        assert!(
            text.contains("http://blocked.test/robots.txt") && text.contains("status 403"),
            "{text}"
        );
        let heads = heads.lock().unwrap().clone();
        let hosts: Vec<&str> = heads
            .iter()
            .filter_map(|h| {
                h.lines()
                    .find_map(|l| l.strip_prefix("host: ").or(l.strip_prefix("Host: ")))
            })
            .collect();
        assert!(hosts.contains(&"docs.test"), "{heads:?}");
        assert!(!hosts.contains(&"blocked.test"), "{heads:?}");
        let records = egress_records(home.path());
        let allowed = records
            .iter()
            .find(|r| r["host"] == "docs.test")
            .unwrap_or_else(|| panic!("{records:?}"));
        assert_eq!(allowed["allowed"], true, "{allowed}");
        let refused = records
            .iter()
            .find(|r| r["host"] == "blocked.test")
            .unwrap_or_else(|| panic!("{records:?}"));
        assert_eq!(refused["allowed"], false, "{refused}");
        model.shutdown().await;
    });
}

/// The test's Streamable HTTP server (tests/mcp/http_server.py): killed when dropped.
struct HttpServer {
    child: Child,
    port: u16,
    /// One line per HTTP request: method, path, the `X-Cordon-Test` header (or `-`).
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl HttpServer {
    fn start() -> HttpServer {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/http_server.py");
        let mut child = Command::new(cordon_tests::mcp_python())
            .arg(script)
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("port: {line:?}"));
        HttpServer {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_mcp_server_gets_its_headers_and_an_sse_server_is_refused() {
    let server = HttpServer::start();
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    // `--mcp-config` as a client passes it; the header's value comes from the environment.
    let config = json!({"mcpServers": {
        "web": {"type": "http", "url": url, "headers": {"X-Cordon-Test": "${CORDON_TEST_TOKEN}"}},
        "legacy": {"type": "sse", "url": format!("http://127.0.0.1:{}/sse", server.port)}
    }})
    .to_string();
    let model = ScriptedModel::start(vec![
        Turn::tool_use("w", "mcp__web__whoami", json!({})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let ws = Workspace::new();
    let home = tempfile::tempdir().unwrap();
    // The user's own settings: only those (or the managed) may name a loopback address.
    let settings = json!({"sandbox": {"network": {"allowedDomains": ["127.0.0.1"]}}}).to_string();
    let user = home.path().join("user.json");
    std::fs::write(&user, &settings).unwrap();
    let args = ["--mcp-config", &config, "--allowedTools", "mcp__web"];
    let mut cmd = run_command(&model, home.path(), ws.path(), &["--output-format", "json"]);
    cmd.args(args)
        .args(["-p", "use the tools"])
        .env("CORDON_TEST_TOKEN", "token-from-env");
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let names = tool_names(&requests[0].body);
    assert!(names.iter().any(|n| n == "mcp__web__whoami"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__legacy")),
        "{names:?}"
    );
    let (_, text, is_error) = tool_results(&requests[1].body).remove(0);
    assert!(!is_error, "{text}");
    assert_eq!(text, "x-cordon-test=token-from-env");
    let seen = server.requests();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|l| l.ends_with(" token-from-env")),
        "every request carries the header: {seen:?}"
    );
    assert!(
        out.stderr.contains("legacy SSE servers are not supported"),
        "{}",
        out.stderr
    );

    // Without a policy that grants the address, the orchestrator does not reach it; nor
    // when only the command line's settings name it (a server session's request settings
    // sit there): a loopback address is the operator's or the user's to open.
    std::fs::remove_file(&user).unwrap();
    let before = server.requests().len();
    for extra in [None, Some(settings.as_str())] {
        let model = ScriptedModel::start(vec![Turn::text("done")])
            .await
            .unwrap();
        let mut cmd = run_command(&model, home.path(), ws.path(), &["--output-format", "json"]);
        cmd.args(["--mcp-config", &config, "-p", "hi"])
            .env("CORDON_TEST_TOKEN", "token-from-env");
        if let Some(s) = extra {
            cmd.args(["--settings", s]);
        }
        let out = Output::of(cmd).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        let names = tool_names(&model.requests()[0].body);
        assert!(
            !names.iter().any(|n| n.starts_with("mcp__web")),
            "{extra:?}: {names:?}"
        );
        if extra.is_none() {
            assert!(out.stderr.contains("allows no egress"), "{}", out.stderr);
        }
        assert_eq!(
            server.requests().len(),
            before,
            "{extra:?}: no request reached the server"
        );
    }
}
