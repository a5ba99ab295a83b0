//! A project's own environment on the Docker backend: `cordon images build NAME
//! --dockerfile FILE` and a trusted workspace's `.devcontainer/devcontainer.json`, used end
//! to end through `cordon sandbox --backend docker`; build failures name the failing step
//! and a missing base; an untrusted workspace's devcontainer is ignored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use cordon_tests::{cordon_bin, docker_ready};

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn cordon(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(cordon_bin());
    c.args(args).env("CORDON_HOME", home);
    c
}

/// Removes the images a test made, whatever happens.
struct Images(Vec<String>);

impl Drop for Images {
    fn drop(&mut self) {
        for image in &self.0 {
            let _ = Command::new("docker").args(["rmi", "-f", image]).output();
        }
    }
}

const RECIPE: &str = "FROM cordon-minimal\nUSER 0\n\
    RUN mkdir -p /opt/proj && echo 'echo from-the-project-image' > /opt/proj/hello.sh\n\
    COPY data.txt /opt/proj/data.txt\n\
    ENV PROJECT_FLAVOUR=cordon-test-flavour\n";

#[test]
fn a_project_dockerfile_becomes_a_sandbox_image() {
    if let Err(e) = docker_ready() {
        eprintln!("skipped: {e}");
        return;
    }
    let name = "cordon-test-project-image";
    let _cleanup = Images(vec![name.into()]);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let recipe = dir.path().join("recipe");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&recipe).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(recipe.join("Dockerfile"), RECIPE).unwrap();
    std::fs::write(recipe.join("data.txt"), "from-the-context\n").unwrap();
    let built = cordon(&home, &["images", "build", name, "--dockerfile"])
        .arg(recipe.join("Dockerfile"))
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", text(&built));
    assert!(
        text(&built).contains(&format!("{name}: built")),
        "{}",
        text(&built)
    );
    let again = cordon(&home, &["images", "build", name, "--dockerfile"])
        .arg(recipe.join("Dockerfile"))
        .output()
        .unwrap();
    assert!(
        text(&again).contains(&format!("{name}: up to date")),
        "{}",
        text(&again)
    );
    let ran = cordon(&home, &["sandbox", "--backend", "docker", "--image", name])
        .arg("--workspace")
        .arg(&ws)
        .args([
            "--",
            "sh",
            "-c",
            "sh /opt/proj/hello.sh; cat /opt/proj/data.txt; echo $PROJECT_FLAVOUR; id -u",
        ])
        .output()
        .unwrap();
    let out = text(&ran);
    assert!(ran.status.success(), "{out}");
    for expected in [
        "from-the-project-image",
        "from-the-context",
        "cordon-test-flavour",
    ] {
        assert!(out.contains(expected), "missing {expected}: {out}");
    }
    // The image's USER 0 does not carry into the session: it runs as its own uid.
    let uid = String::from_utf8_lossy(&ran.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    assert_ne!(uid.trim(), "0", "{out}");
}

#[test]
fn build_failures_name_the_step_and_the_missing_base() {
    if let Err(e) = docker_ready() {
        eprintln!("skipped: {e}");
        return;
    }
    let _cleanup = Images(vec!["cordon-test-failing".into()]);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let failing = dir.path().join("Dockerfile.fail");
    std::fs::write(
        &failing,
        "FROM cordon-minimal\nUSER 0\nRUN echo ok\nRUN exit 3\n",
    )
    .unwrap();
    let out = cordon(
        &home,
        &["images", "build", "cordon-test-failing", "--dockerfile"],
    )
    .arg(&failing)
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("RUN exit 3"), "{}", text(&out));
    let missing = dir.path().join("Dockerfile.missing");
    std::fs::write(&missing, "FROM nosuch-base-image:7\nRUN true\n").unwrap();
    let out = cordon(
        &home,
        &["images", "build", "cordon-test-failing", "--dockerfile"],
    )
    .arg(&missing)
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("nosuch-base-image:7"), "{}", text(&out));
}

#[test]
fn a_devcontainer_is_honoured_when_trusted_and_ignored_when_not() {
    if let Err(e) = docker_ready() {
        eprintln!("skipped: {e}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
    let ws = std::fs::canonicalize(&ws).unwrap();
    let _cleanup = Images(vec![cordon::sandbox::docker::devcontainer::image_name(&ws)]);
    std::fs::write(ws.join(".devcontainer/Dockerfile"), RECIPE).unwrap();
    std::fs::write(ws.join(".devcontainer/data.txt"), "from-the-context\n").unwrap();
    std::fs::write(
        ws.join(".devcontainer/devcontainer.json"),
        r#"{
            // as VS Code writes it
            "build": {"dockerfile": "Dockerfile"},
            "containerEnv": {"TEAM_SETTING": "from-devcontainer"},
            "remoteUser": "root",
        }"#,
    )
    .unwrap();
    let script = "cat /opt/proj/data.txt 2>/dev/null || echo no-project-image; \
                  echo ${TEAM_SETTING:-unset}";
    let run = |home: &Path| {
        cordon(home, &["sandbox", "--backend", "docker", "--workspace"])
            .arg(&ws)
            .args(["--", "sh", "-c", script])
            .env("CORDON_USER_SETTINGS", home.join("user-settings.json"))
            .output()
            .unwrap()
    };
    // Untrusted: the repository's recipe is not built or run.
    let out = run(&home);
    assert!(out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("no-project-image") && all.contains("unset"),
        "{all}"
    );
    assert!(all.contains("not trusted"), "{all}");
    // Trusted by the user: the devcontainer is the session's environment.
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("user-settings.json"),
        format!(r#"{{"trustedDirectories": ["{}"]}}"#, ws.display()),
    )
    .unwrap();
    let out = run(&home);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("from-the-context"), "{all}");
    assert!(all.contains("from-devcontainer"), "{all}");
}
