//! `deploy/compose.yaml` end to end: `cordon images build server` builds `cordon-server`
//! from local files, `docker-compose` starts it with the data directory and workspace root
//! in this test's temporary directory and the API on a free loopback port, `/healthz` and
//! `/readyz` answer, a tenant and key made inside the container open `GET /v1/sessions`
//! (and nothing opens it without the key), and `docker-compose down` leaves no container
//! of the project. Skips loudly when `docker-compose` (v1) is missing, unless CI is set.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cordon_tests::{cordon_bin, docker_ready, in_ci, repo_root};
use reqwest::StatusCode;

use super::fixture::{Api, HANG};

/// The image's `cordon` user (deploy/server.Dockerfile).
const SERVER_UID: u32 = 10001;

/// One compose project: `docker-compose -p NAME -f deploy/compose.yaml`, with the
/// environment that points it at this test's directories; brought down on drop.
struct Project {
    name: String,
    env: Vec<(&'static str, String)>,
    down: bool,
}

impl Project {
    fn compose(&self, args: &[&str]) -> Output {
        let file = repo_root().join("deploy/compose.yaml");
        Command::new("docker-compose")
            .arg("-p")
            .arg(&self.name)
            .arg("-f")
            .arg(file)
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
            String::from_utf8_lossy(&self.compose(&["logs", "--no-color"]).stdout)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_file_runs_the_server_image_on_loopback_and_leaves_nothing_behind() {
    if docker_ready().is_err() || !compose_available() {
        return;
    }
    let built = Command::new(cordon_bin())
        .args(["images", "build", "server"])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let tmp = tempfile::tempdir().unwrap();
    let data = server_dir(tmp.path().join("data"));
    let workspaces = server_dir(tmp.path().join("workspaces"));
    let port = free_port();
    let socket_gid =
        std::os::unix::fs::MetadataExt::gid(&std::fs::metadata("/var/run/docker.sock").unwrap());
    let mut env = vec![
        ("CORDON_DATA", data.display().to_string()),
        ("CORDON_WORKSPACES", workspaces.display().to_string()),
        ("CORDON_PUBLISH", format!("127.0.0.1:{port}")),
        ("DOCKER_GID", socket_gid.to_string()),
        ("ANTHROPIC_API_KEY", "test-key".to_string()),
        // Never called: no session runs a turn here.
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9".to_string()),
    ];
    if !nix::unistd::geteuid().is_root() {
        let me = format!("{}:{}", nix::unistd::geteuid(), nix::unistd::getegid());
        env.push(("CORDON_USER", me));
    }
    let mut project = Project {
        name: format!("cordontest{}", std::process::id()),
        env,
        down: false,
    };
    let config = project.compose_ok(&["config"]);
    assert!(
        config.contains(&format!("127.0.0.1:{port}:8420")),
        "{config}"
    );
    project.compose_ok(&["up", "-d"]);

    let base = format!("http://127.0.0.1:{port}");
    let anonymous = Api::new(&base, None);
    until_ok(&base, "/healthz").await;
    until_ok(&base, "/readyz").await;
    // The same data directory the server uses, written by the image's own `cordon`.
    project.admin(&data, &["tenant", "create", "team"]);
    let out = project.admin(&data, &["key", "create", "--tenant", "team"]);
    let key = out.lines().last().unwrap().trim().to_string();
    let team = Api::new(&base, Some(key));
    let (status, body) = team.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["sessions"].is_array(), "{body}");
    let (status, body) = anonymous.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(
        data.join("server.db").is_file(),
        "the data dir is the test's own"
    );

    assert!(
        !project.containers().is_empty(),
        "the project's container runs"
    );
    project.compose_ok(&["down", "--timeout", "30"]);
    project.down = true;
    let left = project.containers();
    assert!(left.is_empty(), "containers left after down: {left}");
}
