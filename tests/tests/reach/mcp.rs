//! MCP servers end to end: `cordon run` with the real binary, the local sandbox and the
//! scripted model. Servers are real Python programs from PyPI (`mcp-server-time`) and one
//! written here with the `mcp` SDK (tests/mcp/flaky_server.py), run over stdio inside the
//! sandbox; their environment comes from tests/mcp/setup.sh.

use std::path::{Path, PathBuf};

use cordon_tests::Workspace;
use cordon_tests::agent::tool_results;
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use serde_json::{Value, json};

use super::{run, tool_names};

/// The MCP servers' python (tests/mcp/setup.sh), set up once per test binary.
fn python() -> PathBuf {
    cordon_tests::mcp_python()
}

/// A workspace whose `.mcp.json` lists `servers` (the flaky server's file copied in).
fn workspace(servers: Value) -> Workspace {
    let ws = Workspace::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/flaky_server.py");
    std::fs::copy(src, ws.join("flaky_server.py")).unwrap();
    std::fs::write(
        ws.join(".mcp.json"),
        json!({ "mcpServers": servers }).to_string(),
    )
    .unwrap();
    ws
}

fn flaky(ws: &Workspace) -> Value {
    json!({"command": python(), "args": [ws.join("flaky_server.py")]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_from_pypi_answers_from_inside_the_sandbox() {
    let ws = workspace(json!({}));
    let time =
        json!({"command": python(), "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]});
    std::fs::write(
        ws.join(".mcp.json"),
        json!({"mcpServers": {"time": time, "flaky": flaky(&ws)}}).to_string(),
    )
    .unwrap();
    // A file outside the workspace: the sandbox must not let the server read it.
    let outside = tempfile::Builder::new()
        .prefix("mcp-secret-")
        .tempdir_in(ws.path().parent().unwrap())
        .unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let model = ScriptedModel::start(vec![
        Turn::tool_use(
            "t1",
            "mcp__time__get_current_time",
            json!({"timezone": "UTC"}),
        ),
        Turn::tool_use(
            "p1",
            "mcp__flaky__probe",
            json!({"path": secret.display().to_string()}),
        ),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let out = run(
        &model,
        &ws,
        &[
            "--trust",
            "--allowedTools",
            "mcp__time mcp__flaky",
            "--disallowedTools",
            "mcp__flaky__big",
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    let names = tool_names(&requests[0].body);
    for want in [
        "mcp__time__get_current_time",
        "mcp__time__convert_time",
        "mcp__flaky__echo",
        "Bash",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    assert!(
        !names.iter().any(|n| n == "mcp__flaky__big"),
        "a bare deny removes the tool"
    );
    let time = tool_results(&requests[1].body);
    assert!(
        !time[0].2 && time[0].1.contains("UTC") && time[0].1.contains("datetime"),
        "{time:?}"
    );
    let probe = tool_results(&requests[2].body);
    assert!(!probe[0].2, "{probe:?}");
    assert!(
        probe[0].1.starts_with("refused:") && !probe[0].1.contains("top secret"),
        "{probe:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_workspace_starts_no_mcp_server_unless_approved() {
    let ws = workspace(json!({}));
    std::fs::write(
        ws.join(".mcp.json"),
        json!({"mcpServers": {"flaky": flaky(&ws)}}).to_string(),
    )
    .unwrap();
    let model = ScriptedModel::start(vec![Turn::text("ok")]).await.unwrap();
    let out = run(&model, &ws, &[], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let names = tool_names(&model.requests()[0].body);
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    // Approved by name from the command line's settings (not the repository's own).
    let model = ScriptedModel::start(vec![Turn::text("ok")]).await.unwrap();
    let approve = json!({"enabledMcpjsonServers": ["flaky"]}).to_string();
    let out = run(&model, &ws, &["--settings", &approve], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let names = tool_names(&model.requests()[0].body);
    assert!(names.iter().any(|n| n == "mcp__flaky__echo"), "{names:?}");
}

/// A hostile repository names its server as one the user approved for another
/// repository and asks for a host variable in its entry: the server is refused, the
/// variable's value goes nowhere, and the user is told which variable and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_approved_by_name_gets_no_host_variable() {
    const SECRET: &str = "host-secret-7f3a9c";
    let ws = workspace(json!({}));
    let mut github = flaky(&ws);
    github["env"] = json!({"LEAK": "${CORDON_TEST_HOST_SECRET}"});
    let mut plain = flaky(&ws);
    plain["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("${CLAUDE_PROJECT_DIR}"));
    std::fs::write(
        ws.join(".mcp.json"),
        json!({"mcpServers": {"github": github, "plain": plain}}).to_string(),
    )
    .unwrap();
    let model = ScriptedModel::start(vec![Turn::text("ok")]).await.unwrap();
    let approve = json!({"enabledMcpjsonServers": ["github", "plain"]}).to_string();
    let out = run(
        &model,
        &ws,
        &["--settings", &approve],
        &[("CORDON_TEST_HOST_SECRET", SECRET)],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let requests = model.requests();
    let names = tool_names(&requests[0].body);
    assert!(names.iter().any(|n| n == "mcp__plain__echo"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__github")),
        "{names:?}"
    );
    for r in &requests {
        assert!(!r.body.to_string().contains(SECRET));
    }
    assert!(
        out.stderr.contains("${CORDON_TEST_HOST_SECRET}") && !out.stderr.contains(SECRET),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_hangs_or_sends_garbage_is_an_error_and_restarts() {
    let ws = workspace(json!({}));
    std::fs::write(
        ws.join(".mcp.json"),
        json!({"mcpServers": {"flaky": flaky(&ws)}}).to_string(),
    )
    .unwrap();
    let echo = |id: &str| Turn::tool_use(id, "mcp__flaky__echo", json!({"text": id}));
    let model = ScriptedModel::start(vec![
        echo("e0"),
        Turn::tool_use("c", "mcp__flaky__crash", json!({})),
        echo("e1"),
        Turn::tool_use("h", "mcp__flaky__hang", json!({})),
        echo("e2"),
        Turn::tool_use("g", "mcp__flaky__garbage", json!({})),
        echo("e3"),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let out = run(
        &model,
        &ws,
        &["--trust", "--allowedTools", "mcp__flaky"],
        &[("MCP_TOOL_TIMEOUT", "8000")],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let r = model.requests();
    let result = |i: usize| tool_results(&r[i].body).remove(0);
    let pid = |text: &str| {
        text.rsplit("pid ")
            .next()
            .unwrap()
            .trim_end_matches(')')
            .to_string()
    };
    let ok = |i: usize, id: &str| {
        let (_, text, is_error) = result(i);
        assert!(
            !is_error && text.starts_with(&format!("{id} (pid")),
            "{text}"
        );
        pid(&text)
    };
    let e0 = ok(1, "e0");
    let (_, crash, is_error) = result(2);
    assert!(is_error, "{crash}");
    assert!(
        crash.contains("exited with code 3") && crash.contains("crashing on request"),
        "{crash}"
    );
    let e1 = ok(3, "e1");
    assert_ne!(e0, e1, "a fresh server after the crash");
    let (_, hang, is_error) = result(4);
    assert!(is_error && hang.contains("did not answer"), "{hang}");
    let e2 = ok(5, "e2");
    assert_ne!(e1, e2, "a fresh server after the hang");
    let (_, garbage, is_error) = result(6);
    assert!(is_error, "{garbage}");
    let e3 = ok(7, "e3");
    assert_ne!(e2, e3, "a fresh server after the garbage");
}

/// `cordon trust WS` with `home` as CORDON_HOME.
async fn trust(ws: &Workspace, home: &Path) -> cordon_tests::agent::Output {
    let mut cmd = tokio::process::Command::new(cordon_tests::cordon_bin());
    cmd.arg("trust")
        .arg(ws.path())
        .env("CORDON_HOME", home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cordon_tests::agent::Output::of(cmd).await
}

/// One run with its state in `home` (so a `cordon trust` there counts): the model calls
/// `mcp__flaky__echo` once; returns the tools it was offered, the call's result (text,
/// is_error) and stderr. User and managed settings point at files that do not exist.
async fn echo_run(ws: &Workspace, home: &Path) -> (Vec<String>, (String, bool), String) {
    let model = ScriptedModel::start(vec![
        Turn::tool_use("e", "mcp__flaky__echo", json!({"text": "trusted"})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let mut cmd =
        cordon_tests::agent::run_command(&model, home, ws.path(), &["--output-format", "json"]);
    cmd.args(["--allowedTools", "mcp__flaky", "-p", "use the tools"])
        .env("CORDON_USER_SETTINGS", home.join("user-settings.json"))
        .env(
            "CORDON_MANAGED_SETTINGS",
            home.join("managed-settings.json"),
        );
    let out = cordon_tests::agent::Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    let (_, text, is_error) = tool_results(&requests[1].body).remove(0);
    (tool_names(&requests[0].body), (text, is_error), out.stderr)
}

/// A repository's `.mcp.json` server starts only once the workspace is trusted with
/// `cordon trust` (not only `--trust`), and is ignored again once `.mcp.json` changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_mcp_server_needs_cordon_trust_and_a_changed_file_loses_it() {
    let ws = workspace(json!({}));
    std::fs::write(
        ws.join(".mcp.json"),
        json!({"mcpServers": {"flaky": flaky(&ws)}}).to_string(),
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let is_mcp = |n: &String| n.starts_with("mcp__");

    let (names, (text, is_error), stderr) = echo_run(&ws, home.path()).await;
    assert!(!names.iter().any(is_mcp), "untrusted: {names:?}");
    assert!(is_error, "untrusted, the server answered: {text}");
    assert!(stderr.contains("mcpServers"), "{stderr}");

    let t = trust(&ws, home.path()).await;
    assert_eq!(t.code, 0, "{}", t.stderr);
    assert!(t.stdout.contains(".mcp.json"), "{}", t.stdout);
    let (names, (text, is_error), stderr) = echo_run(&ws, home.path()).await;
    assert!(names.iter().any(|n| n == "mcp__flaky__echo"), "{names:?}");
    assert!(!is_error && text.starts_with("trusted (pid"), "{text}");
    assert!(!stderr.contains("is not trusted"), "{stderr}");

    // The same servers with one more space: a different file, untrusted again.
    let mut text = std::fs::read_to_string(ws.join(".mcp.json")).unwrap();
    text.push(' ');
    std::fs::write(ws.join(".mcp.json"), text).unwrap();
    let (names, (text, is_error), stderr) = echo_run(&ws, home.path()).await;
    assert!(!names.iter().any(is_mcp), "changed: {names:?}");
    assert!(is_error, "changed, the server answered: {text}");
    assert!(stderr.contains("changed since"), "{stderr}");
}
