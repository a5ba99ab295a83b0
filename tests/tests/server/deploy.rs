//! `deploy/compose.yaml` end to end: `cordon images build server` builds `cordon-server`
//! from local files, `docker-compose` starts it with the data directory and workspace root
//! in this test's temporary directory and the API on a free loopback port, `/healthz` and
//! `/readyz` answer, a tenant and key made inside the container open `GET /v1/sessions`
//! (and nothing opens it without the key), and `docker-compose down` leaves no container
//! of the project. A second project runs the server on the host's network (its own copy
//! of the file without published ports) against the scripted model on loopback: a
//! tenant's docker session, started cold by the non-root server, runs one Bash command
//! in its workspace and answers; DELETE and `down` leave no container of the session or
//! the project. Skips loudly when `docker-compose` (v1) is missing, unless CI is set.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use std::os::unix::fs::MetadataExt;

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{cordon_bin, docker_ready, in_ci, repo_root};
use reqwest::StatusCode;
use serde_json::json;

use super::fixture::{Api, HANG, every_call_has_its_result};

/// The image's `cordon` user (deploy/server.Dockerfile).
const SERVER_UID: u32 = 10001;

/// One compose project: `docker-compose -p NAME -f deploy/compose.yaml`, with the
/// environment that points it at this test's directories; brought down on drop.
struct Project {
    name: String,
    /// deploy/compose.yaml, or the test's copy of it.
    file: PathBuf,
    env: Vec<(&'static str, String)>,
    down: bool,
}

impl Project {
    fn compose(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("docker-compose");
        cmd.arg("-p").arg(&self.name);
        cmd.arg("-f")
            .arg(&self.file)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap()
    }

    fn compose_ok(&self, args: &[&str]) -> String {
        let out = self.compose(args);
        assert!(
            out.status.success(),
            "docker-compose {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `cordon admin ARGS --data DATA` inside the running server container.
    fn admin(&self, data: &Path, args: &[&str]) -> String {
        let mut all = vec!["exec", "-T", "server", "cordon", "admin"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--data", data.to_str().unwrap()]);
        self.compose_ok(&all)
    }

    /// The server's log so far.
    fn logs(&self) -> String {
        String::from_utf8_lossy(&self.compose(&["logs", "--no-color"]).stdout).into_owned()
    }

    /// The project's containers, running or not.
    fn containers(&self) -> String {
        let label = format!("label=com.docker.compose.project={}", self.name);
        let out = Command::new("docker")
            .args(["ps", "-aq", "--filter", &label])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        if !self.down {
            let _ = self.compose(&["down", "--timeout", "10"]);
        }
    }
}

/// Whether `docker-compose` runs; in CI its absence fails the test.
fn compose_available() -> bool {
    let ok = Command::new("docker-compose")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            !in_ci(),
            "docker-compose is missing: the compose test may not skip in CI (CI is set)"
        );
        eprintln!("SKIPPED: docker-compose (v1) is not installed; deploy/compose.yaml untested");
    }
    ok
}

/// A directory the server's uid may use: owned by it when this test is root, else the
/// server runs as this test's own uid (`CORDON_USER`).
fn server_dir(path: PathBuf) -> PathBuf {
    std::fs::create_dir(&path).unwrap();
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(&path, Some(SERVER_UID), Some(SERVER_UID)).unwrap();
    }
    path
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Polls `path` until it answers 200.
async fn until_ok(base: &str, path: &str) {
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let sent = client
            .get(format!("{base}{path}"))
            .timeout(std::time::Duration::from_secs(5))
            .send()
            .await;
        if sent.is_ok_and(|r| r.status() == StatusCode::OK) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} never answered 200"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// The test's compose project, up: the image built, the data directory and workspace root
/// in `tmp`, the API on a free loopback port; `model` (a base URL) for the server's
/// model calls; `rewrite` makes the test's copy of `deploy/compose.yaml` (given its text
/// and the port).
struct Deployment {
    project: Project,
    data: PathBuf,
    workspaces: PathBuf,
    base: String,
}

/// Makes the test's copy of the compose file from its text and the API's port.
type Rewrite<'a> = &'a dyn Fn(&str, u16) -> String;

fn deploy(tmp: &Path, model: &str, rewrite: Option<Rewrite<'_>>) -> Deployment {
    let built = Command::new(cordon_bin())
        .args(["images", "build", "server"])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let data = server_dir(tmp.join("data"));
    let workspaces = server_dir(tmp.join("workspaces"));
    let port = free_port();
    let socket_gid =
        std::os::unix::fs::MetadataExt::gid(&std::fs::metadata("/var/run/docker.sock").unwrap());
    let mut env = vec![
        ("CORDON_DATA", data.display().to_string()),
        ("CORDON_WORKSPACES", workspaces.display().to_string()),
        ("CORDON_PUBLISH", format!("127.0.0.1:{port}")),
        ("DOCKER_GID", socket_gid.to_string()),
        ("ANTHROPIC_API_KEY", "test-key".to_string()),
        ("ANTHROPIC_BASE_URL", model.to_string()),
    ];
    if !nix::unistd::geteuid().is_root() {
        let me = format!("{}:{}", nix::unistd::geteuid(), nix::unistd::getegid());
        env.push(("CORDON_USER", me));
    }
    let mut file = repo_root().join("deploy/compose.yaml");
    if let Some(rewrite) = rewrite {
        let original = std::fs::read_to_string(&file).unwrap();
        file = tmp.join("compose.yaml");
        std::fs::write(&file, rewrite(&original, port)).unwrap();
    }
    let project = Project {
        name: format!(
            "cordontest{}{}",
            std::process::id(),
            u8::from(rewrite.is_some())
        ),
        file,
        env,
        down: false,
    };
    let config = project.compose_ok(&["config"]);
    assert!(config.contains(&format!("127.0.0.1:{port}")), "{config}");
    project.compose_ok(&["up", "-d"]);
    Deployment {
        project,
        data,
        workspaces,
        base: format!("http://127.0.0.1:{port}"),
    }
}

impl Deployment {
    /// A tenant and its key, made by the image's own `cordon` in the running container
    /// (on the same data directory the server uses).
    fn tenant(&self, name: &str) -> Api {
        self.project.admin(&self.data, &["tenant", "create", name]);
        let out = self
            .project
            .admin(&self.data, &["key", "create", "--tenant", name]);
        let key = out.lines().last().unwrap().trim().to_string();
        Api::new(&self.base, Some(key))
    }

    /// `docker-compose down`; no container of the project is left.
    fn down(&mut self) {
        assert!(
            !self.project.containers().is_empty(),
            "the project's container runs"
        );
        self.project.compose_ok(&["down", "--timeout", "30"]);
        self.project.down = true;
        let left = self.project.containers();
        assert!(left.is_empty(), "containers left after down: {left}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_file_runs_the_server_image_on_loopback_and_leaves_nothing_behind() {
    if docker_ready().is_err() || !compose_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Never called: no session runs a turn here.
    let mut deployed = deploy(tmp.path(), "http://127.0.0.1:9", None);
    let base = deployed.base.clone();
    let anonymous = Api::new(&base, None);
    until_ok(&base, "/healthz").await;
    until_ok(&base, "/readyz").await;
    let team = deployed.tenant("team");
    let (status, body) = team.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["sessions"].is_array(), "{body}");
    let (status, body) = anonymous.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(
        deployed.data.join("server.db").is_file(),
        "the data dir is the test's own"
    );
    deployed.down();
}

/// Whether any container (running or not) carries `label`.
fn labelled(label: &str) -> String {
    let out = Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label={label}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `getfacl` of `path`, numeric, without the header.
fn getfacl(path: &Path) -> String {
    let out = Command::new("getfacl")
        .args(["-n", "--omit-header"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_session_under_compose_runs_bash_in_the_workspace_and_leaves_nothing_behind() {
    if docker_ready().is_err() || !compose_available() {
        return;
    }
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // The host's network for the server (and only for it: sandboxes get none), so that it
    // reaches the scripted model on loopback; it then listens on loopback itself. Compose
    // v1 can neither merge `network_mode: host` with published ports nor drop them in an
    // override, so the test runs its own copy of the file without them.
    let host_network = |compose: &str, port: u16| {
        let listen = "\"0.0.0.0:8420\"";
        assert!(compose.contains(listen), "{compose}");
        let compose = compose.replace(listen, &format!("\"127.0.0.1:{port}\""));
        let mut out = String::new();
        let mut in_ports = false;
        for line in compose.lines() {
            if line == "    ports:" {
                in_ports = true;
                out.push_str("    network_mode: host\n");
                continue;
            }
            if in_ports && line.starts_with("      ") {
                continue;
            }
            in_ports = false;
            out.push_str(line);
            out.push('\n');
        }
        assert!(out.contains("network_mode: host"), "{compose}");
        out
    };
    let mut deployed = deploy(tmp.path(), &model.base_url(), Some(&host_network));
    until_ok(&deployed.base, "/readyz").await;
    let team = deployed.tenant("team");
    let id = team
        .create(json!({"backend": "docker", "permission_mode": "acceptEdits"}))
        .await;
    let ws = deployed.workspaces.join("team").join(&id);
    model.push_turns([
        Turn::tool_use("b1", "Bash", json!({"command": "echo hi > made.txt"})),
        Turn::text("made it"),
    ]);
    let (status, body) = team
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "make a file"}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "{body}\n{}",
        deployed.project.logs()
    );
    let events = team.events_until(&id, None, |e| e.kind == "result").await;
    every_call_has_its_result(&events);
    let result = events
        .iter()
        .find(|e| e.kind == "tool_result")
        .unwrap_or_else(|| panic!("no tool result: {events:?}"));
    assert_eq!(result.data["is_error"], false, "{result:?}");
    assert_eq!(events.last().unwrap().data["text"], "made it", "{events:?}");
    let made = ws.join("made.txt");
    assert_eq!(std::fs::read_to_string(&made).unwrap(), "hi\n");
    assert!(
        !labelled(&format!("cordon.session={id}")).is_empty(),
        "the session has no container"
    );

    let (status, view) = team.delete(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    let deadline = tokio::time::Instant::now() + HANG;
    while !labelled(&format!("cordon.session={id}")).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session's container outlived it"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // Known gap (deploy/README.md): handing what the sandbox made to the workspace's owner
    // and dropping the session's ACL entries takes CAP_CHOWN and ownership, which the
    // compose file's server (uid 10001, no capabilities) lacks: made.txt stays the
    // sandbox uid's and keeps its entries. Pinned here so that closing the gap fails this
    // and turns it into the real check (the file is the owner's, no named ACL entry).
    let owner = std::fs::metadata(&ws).unwrap();
    let file = std::fs::metadata(&made).unwrap();
    let acl = getfacl(&made);
    eprintln!(
        "made.txt: {}:{} (workspace {}:{}), ACL:\n{acl}",
        file.uid(),
        file.gid(),
        owner.uid(),
        owner.gid()
    );
    assert_ne!(
        owner.uid(),
        file.uid(),
        "the gap is closed: assert the hand-over"
    );
    assert!(
        (300_000..360_000).contains(&file.uid()),
        "made.txt belongs to neither the owner nor a sandbox uid: {}",
        file.uid()
    );
    assert!(
        acl.lines()
            .any(|l| l.starts_with(&format!("user:{}:", owner.uid()))),
        "the owner keeps access to what the sandbox made:\n{acl}"
    );
    // The workspace itself is the server's: its ACLs are back as they were (none named).
    let ws_acl = getfacl(&ws);
    assert!(
        !ws_acl
            .lines()
            .any(|l| l.starts_with("user:") && !l.starts_with("user::")),
        "the workspace keeps a named ACL entry:\n{ws_acl}"
    );
    deployed.down();
    assert!(
        labelled(&format!("cordon.session={id}")).is_empty(),
        "the session's container outlived the project"
    );
}
