//! Deny rules that bind the kernel: with `Read(./.env)` and `Edit(./config/**)` denied in
//! `.claude/settings.json`, what Bash runs cannot read `.env` or change `config/`, while
//! the rest of the workspace stays readable and writable. Harmless if the sandbox fails:
//! the only targets are files this test created.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, cordon_bin, sandbox_with};
use serde_json::{Value, json};

const SECRET: &str = "API_KEY=sk-very-secret-value";

fn workspace() -> Workspace {
    let ws = Workspace::new();
    std::fs::write(ws.join(".env"), format!("{SECRET}\n")).unwrap();
    std::fs::create_dir_all(ws.join("config")).unwrap();
    std::fs::write(ws.join("config/app.toml"), "port = 1\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "public\n").unwrap();
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    std::fs::write(
        ws.join(".claude/settings.json"),
        r#"{"permissions":{"deny":["Read(./.env)","Edit(./config/**)"]}}"#,
    )
    .unwrap();
    ws
}

#[test]
fn cordon_sandbox_masks_denied_paths_in_the_kernel() {
    let ws = workspace();
    let flags = ["--deny-read", ".env", "--deny-write", "config"];
    let run = sandbox_with(Backend::Local, ws.path(), &flags, &["cat", ".env"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("secret"), "{run:?}");
    assert!(run.stderr.contains("Permission denied"), "{run:?}");
    let run = sandbox_with(
        Backend::Local,
        ws.path(),
        &flags,
        &["sh", "-c", "echo x >> config/app.toml"],
    );
    assert_ne!(run.code, 0, "{run:?}");
    let run = sandbox_with(
        Backend::Local,
        ws.path(),
        &flags,
        &[
            "sh",
            "-c",
            "cat notes.txt && echo more >> notes.txt && ls config",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("public") && run.stdout.contains("app.toml"));
    assert_eq!(
        std::fs::read_to_string(ws.join("config/app.toml")).unwrap(),
        "port = 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "public\nmore\n"
    );
    // Nothing outside the workspace can be named.
    let run = sandbox_with(
        Backend::Local,
        ws.path(),
        &["--deny-read", "/etc/hostname"],
        &["true"],
    );
    assert_ne!(run.code, 0, "{run:?}");
}

/// The tool_result texts of the last request, in order.
fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_deny_rules_bind_what_bash_runs() {
    let ws = workspace();
    let model = ScriptedModel::start(vec![
        Turn::tool_use("b1", "Bash", json!({"command": "cat .env"})),
        Turn::tool_use(
            "b2",
            "Bash",
            json!({"command": "echo x >> config/app.toml"}),
        ),
        Turn::tool_use(
            "b3",
            "Bash",
            json!({"command": "cat notes.txt && echo more >> notes.txt"}),
        ),
        // Past what a tool-level rule can see: only the kernel stops these.
        Turn::tool_use(
            "b4",
            "Bash",
            json!({"command": "python3 -c \"import sys; sys.stdout.write(open('.'+'env').read())\""}),
        ),
        Turn::tool_use(
            "b5",
            "Bash",
            json!({"command": "python3 -c \"open('config/'+'app.toml','a').write('x')\""}),
        ),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(cordon_bin())
            .args(["run", "--workspace"])
            .arg(ws.path())
            .args([
                "--output-format",
                "json",
                "--permission-mode",
                "bypassPermissions",
                "try the files",
            ])
            .env("ANTHROPIC_BASE_URL", model.base_url())
            .env("ANTHROPIC_API_KEY", "test-key")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .env("CORDON_HOME", home.path())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("cordon run hung")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let last = model.requests().last().unwrap().body.clone();
    let results = tool_results(&last);
    assert_eq!(results.len(), 5, "{results:?}");
    // `cat .env` is refused (by the tool-level rule or the kernel); never any content.
    assert!(!results[0].contains("sk-very-secret"), "{}", results[0]);
    assert!(results[0].contains("Permission denied"), "{}", results[0]);
    // The kernel refused what the rules could not attribute to the paths.
    assert!(!results[3].contains("sk-very-secret"), "{}", results[3]);
    assert!(results[3].contains("Errno 13"), "{}", results[3]);
    assert!(results[4].contains("Errno 30"), "{}", results[4]);
    assert!(
        results[1].contains("Read-only file system") || results[1].contains("Permission denied"),
        "{}",
        results[1]
    );
    assert!(results[2].contains("public"), "{}", results[2]);
    assert_eq!(
        std::fs::read_to_string(ws.join("config/app.toml")).unwrap(),
        "port = 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".env")).unwrap(),
        format!("{SECRET}\n")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "public\nmore\n"
    );
}
