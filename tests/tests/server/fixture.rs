//! A real `cordon serve` on loopback (local backend) against the scripted model, two
//! tenants with a key each, and a small client for its JSON and SSE routes.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use cordon_tests::scripted_model::ScriptedModel;
use cordon_tests::{Workspace, cordon_bin};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long any one wait may last before the test fails as hung (not a timing assertion:
/// the waits end as soon as the condition holds).
pub const HANG: Duration = Duration::from_secs(90);

pub struct Server {
    pub url: String,
    child: Option<tokio::process::Child>,
    pub data: tempfile::TempDir,
    pub root: Workspace,
    home: tempfile::TempDir,
    model_url: String,
    pub keys: Vec<(String, String)>,
    /// Extra `cordon serve` flags (TLS).
    extra: Vec<String>,
    /// The CA the client trusts (TLS).
    ca: Option<Vec<u8>>,
    /// `--backend`: the sessions' default.
    backend: &'static str,
}

/// `cordon admin ARGS...`; panics unless it succeeds; returns stdout.
pub fn admin(args: &[&str]) -> String {
    let out = std::process::Command::new(cordon_bin())
        .arg("admin")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl Server {
    /// Tenants `alpha` and `beta` (with `settings`/`quotas` for alpha), a key each.
    pub async fn start_with(
        model: &ScriptedModel,
        alpha_settings: Value,
        alpha_quotas: Value,
    ) -> Server {
        Self::start_full(model, alpha_settings, alpha_quotas, Vec::new(), None).await
    }

    /// With `extra` flags for `cordon serve`, and `ca` for the client to trust.
    pub async fn start_full(
        model: &ScriptedModel,
        alpha_settings: Value,
        alpha_quotas: Value,
        extra: Vec<String>,
        ca: Option<Vec<u8>>,
    ) -> Server {
        let mut server = Self::prepare(model, alpha_settings, alpha_quotas, extra, ca);
        server.launch().await;
        server
    }

    /// Sessions on the Docker backend by default.
    pub async fn start_docker(model: &ScriptedModel) -> Server {
        let mut server = Self::prepare(model, json!({}), json!({}), Vec::new(), None);
        server.backend = "docker";
        server.launch().await;
        server
    }

    /// The tenants and keys, not yet serving.
    fn prepare(
        model: &ScriptedModel,
        alpha_settings: Value,
        alpha_quotas: Value,
        extra: Vec<String>,
        ca: Option<Vec<u8>>,
    ) -> Server {
        let data = tempfile::tempdir().unwrap();
        let d = data.path().to_str().unwrap().to_string();
        admin(&[
            "tenant",
            "create",
            "alpha",
            "--data",
            &d,
            "--settings",
            &alpha_settings.to_string(),
            "--quotas",
            &alpha_quotas.to_string(),
        ]);
        admin(&["tenant", "create", "beta", "--data", &d]);
        let mut keys = Vec::new();
        for tenant in ["alpha", "beta"] {
            let out = admin(&["key", "create", "--tenant", tenant, "--data", &d]);
            keys.push((tenant.to_string(), out.lines().last().unwrap().to_string()));
        }
        Server {
            url: String::new(),
            child: None,
            data,
            root: Workspace::new(),
            home: tempfile::tempdir().unwrap(),
            model_url: model.base_url(),
            keys,
            extra,
            ca,
            backend: "local",
        }
    }

    pub async fn start(model: &ScriptedModel) -> Server {
        Self::start_with(model, json!({}), json!({})).await
    }

    async fn launch(&mut self) {
        let mut child = tokio::process::Command::new(cordon_bin())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--backend",
                self.backend,
                "--data",
            ])
            .arg(self.data.path())
            .arg("--workspace-root")
            .arg(self.root.path())
            .args(&self.extra)
            .env("ANTHROPIC_BASE_URL", &self.model_url)
            .env("ANTHROPIC_API_KEY", "test-key")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .env("CORDON_HOME", self.home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(HANG, lines.next_line())
            .await
            .expect("the server did not start")
            .unwrap()
            .expect("the server exited before listening");
        self.url = line.strip_prefix("listening on ").unwrap().to_string();
        self.child = Some(child);
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id().unwrap()
    }

    /// SIGTERM; returns the exit status once the server has shut down.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        tokio::time::timeout(HANG, child.wait())
            .await
            .expect("the server did not shut down")
            .unwrap()
    }

    /// A new server on the same data directory (after [`Server::terminate`]).
    pub async fn relaunch(&mut self) {
        self.launch().await;
    }

    /// `kill -9`, then a new server on the same data directory.
    pub async fn kill_and_restart(&mut self) {
        let mut child = self.child.take().unwrap();
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        self.launch().await;
    }

    pub fn api(&self, tenant: &str) -> Api {
        let key = self
            .keys
            .iter()
            .find(|(t, _)| t == tenant)
            .unwrap()
            .1
            .clone();
        let mut api = Api::new(&self.url, Some(key));
        if let Some(ca) = &self.ca {
            api.client = reqwest::Client::builder()
                .add_root_certificate(reqwest::Certificate::from_pem(ca).unwrap())
                .build()
                .unwrap();
        }
        api
    }

    pub fn tenant_root(&self, tenant: &str) -> PathBuf {
        self.root.path().canonicalize().unwrap().join(tenant)
    }
}

/// One SSE event.
#[derive(Debug, Clone, PartialEq)]
pub struct Ev {
    pub id: u64,
    pub kind: String,
    pub data: Value,
}

#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
    key: Option<String>,
}

impl Api {
    pub fn new(base: &str, key: Option<String>) -> Api {
        Api {
            client: reqwest::Client::new(),
            base: base.to_string(),
            key,
        }
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let rb = self.client.request(method, format!("{}{path}", self.base));
        match &self.key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    async fn send(rb: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let resp = tokio::time::timeout(HANG, rb.send())
            .await
            .expect("request hung")
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        Self::send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        Self::send(self.request(reqwest::Method::DELETE, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        Self::send(self.request(reqwest::Method::POST, path).json(&body)).await
    }

    pub async fn put_bytes(&self, path: &str, body: &[u8]) -> (StatusCode, Value) {
        Self::send(self.request(reqwest::Method::PUT, path).body(body.to_vec())).await
    }

    pub async fn get_bytes(&self, path: &str) -> (StatusCode, Vec<u8>) {
        let resp = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        (resp.status(), resp.bytes().await.unwrap().to_vec())
    }

    /// Creates a session; returns its id.
    pub async fn create(&self, body: Value) -> String {
        let (status, view) = self.post("/v1/sessions", body).await;
        assert_eq!(status, StatusCode::CREATED, "{view}");
        view["id"].as_str().unwrap().to_string()
    }

    /// Polls the session until `state` (or fails as hung).
    pub async fn wait_state(&self, id: &str, state: &str) -> Value {
        let deadline = tokio::time::Instant::now() + HANG;
        loop {
            let (status, view) = self.get(&format!("/v1/sessions/{id}")).await;
            assert_eq!(status, StatusCode::OK, "{view}");
            if view["state"] == state {
                return view;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never reached {state}: {view}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends `content` as the session's next message and waits for the turn's result.
    pub async fn turn(&self, id: &str, content: &str) {
        self.post(
            &format!("/v1/sessions/{id}/messages"),
            serde_json::json!({"content": content}),
        )
        .await;
        self.events_until(id, None, |e| e.kind == "result").await;
    }

    /// Reads the session's events after `after` until one satisfies `until` (included).
    pub async fn events_until(
        &self,
        id: &str,
        after: Option<u64>,
        until: impl Fn(&Ev) -> bool,
    ) -> Vec<Ev> {
        let mut rb = self.request(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"));
        if let Some(after) = after {
            rb = rb.header("Last-Event-ID", after.to_string());
        }
        let resp = rb.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let mut stream = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
        let mut out = Vec::new();
        let read = async {
            while let Some(event) = stream.next().await {
                let event = event.unwrap();
                let ev = Ev {
                    id: event.id.parse().unwrap(),
                    kind: event.event,
                    data: serde_json::from_str(&event.data).unwrap(),
                };
                let done = until(&ev);
                out.push(ev);
                if done {
                    return;
                }
            }
            panic!("the event stream ended before the awaited event");
        };
        tokio::time::timeout(HANG, read)
            .await
            .expect("the awaited event never came");
        out
    }

    /// A session's SSE exec: the output (stdout and stderr joined) and the exit event.
    pub async fn exec(&self, id: &str, body: Value) -> (String, Value) {
        let resp = self
            .request(reqwest::Method::POST, &format!("/v1/sessions/{id}/exec"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            StatusCode::OK,
            "{}",
            resp.text().await.unwrap()
        );
        let mut stream = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
        let mut output = String::new();
        let read = async {
            while let Some(event) = stream.next().await {
                let event = event.unwrap();
                let data: Value = serde_json::from_str(&event.data).unwrap();
                match event.event.as_str() {
                    "output" => output.push_str(data["data"].as_str().unwrap()),
                    "exit" => return data,
                    other => panic!("unexpected exec event {other}: {data}"),
                }
            }
            panic!("the exec stream ended without an exit event");
        };
        let exit = tokio::time::timeout(HANG, read).await.expect("exec hung");
        (output, exit)
    }
}

/// Every tool_use id in `events` has its tool_result, once.
pub fn every_call_has_its_result(events: &[Ev]) {
    let calls: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == "tool_call")
        .map(|e| e.data["tool_use_id"].as_str().unwrap())
        .collect();
    for call in &calls {
        let results = events
            .iter()
            .filter(|e| e.kind == "tool_result" && e.data["tool_use_id"] == *call)
            .count();
        assert_eq!(results, 1, "tool call {call} has {results} results");
    }
}

/// Ids increase by one from the first.
pub fn ids_are_contiguous(events: &[Ev]) {
    for pair in events.windows(2) {
        assert_eq!(
            pair[1].id,
            pair[0].id + 1,
            "{:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// Tool uses in session `id`'s transcript (under the data directory) without exactly one
/// tool_result naming them.
pub fn unanswered_in_transcript(data: &std::path::Path, id: &str) -> Vec<String> {
    let text = std::fs::read_to_string(data.join("sessions").join(format!("{id}.jsonl")))
        .unwrap_or_default();
    let mut uses = std::collections::BTreeMap::<String, usize>::new();
    let mut results = std::collections::BTreeMap::<String, usize>::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        count_tool_blocks(&v, &mut uses, &mut results);
    }
    uses.into_keys()
        .filter(|k| results.get(k) != Some(&1))
        .collect()
}

fn count_tool_blocks(
    v: &Value,
    uses: &mut std::collections::BTreeMap<String, usize>,
    results: &mut std::collections::BTreeMap<String, usize>,
) {
    match v {
        Value::Object(m) => {
            let id = |field: &str| m.get(field).and_then(Value::as_str).map(String::from);
            match m.get("type").and_then(Value::as_str) {
                Some("tool_use") => id("id").map(|id| *uses.entry(id).or_default() += 1),
                Some("tool_result") => {
                    id("tool_use_id").map(|id| *results.entry(id).or_default() += 1)
                }
                _ => None,
            };
            m.values().for_each(|x| count_tool_blocks(x, uses, results));
        }
        Value::Array(a) => a.iter().for_each(|x| count_tool_blocks(x, uses, results)),
        _ => {}
    }
}

/// `cordon audit verify --data DIR`: its output; panics unless it passes.
pub fn audit_verifies(data: &std::path::Path) -> String {
    let verify = std::process::Command::new(cordon_bin())
        .args(["audit", "verify", "--data"])
        .arg(data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&verify.stdout).into_owned();
    assert!(
        verify.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    text
}
