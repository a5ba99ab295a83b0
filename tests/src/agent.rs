//! Driving the `cordon` binary against the scripted model: the command with the model's
//! environment, its captured output, and the tool results a recorded request carries.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::cordon_bin;
use crate::scripted_model::ScriptedModel;

/// What a `cordon` process printed and how it ended.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Runs `cmd` to completion (two minutes at most: a hang is a failure).
    pub async fn of(mut cmd: tokio::process::Command) -> Output {
        let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
            .await
            .expect("cordon hung")
            .unwrap();
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The last line of stdout as JSON (the result record of json and stream-json output).
    pub fn json(&self) -> Value {
        let last = self
            .stdout
            .lines()
            .last()
            .unwrap_or_else(|| panic!("no output: {}", self.stderr));
        serde_json::from_str(last)
            .unwrap_or_else(|e| panic!("{e}: {last}\nstderr: {}", self.stderr))
    }
}

/// `cordon ARGS...` talking to `model`, with its state in `home`; output captured.
pub fn cordon_command(
    model: &ScriptedModel,
    home: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(cordon_bin());
    cmd.args(args)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env("CORDON_HOME", home)
        // The user's own settings are `home/user.json` (none unless a test writes it),
        // never the real user's.
        .env("CORDON_USER_SETTINGS", home.join("user.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// `cordon run --workspace WS ARGS...` talking to `model`.
pub fn run_command(
    model: &ScriptedModel,
    home: &Path,
    ws: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut cmd = cordon_command(model, home, &["run", "--workspace"]);
    cmd.arg(ws).args(args);
    cmd
}

/// `cordon run --workspace WS --output-format json ARGS... PROMPT`, which must exit 0;
/// returns the output and its result record.
pub async fn run_json_ok(
    model: &ScriptedModel,
    home: &Path,
    ws: &Path,
    args: &[&str],
    prompt: &str,
) -> (Output, Value) {
    let mut cmd = run_command(model, home, ws, &["--output-format", "json"]);
    cmd.args(args).arg(prompt);
    let out = Output::of(cmd).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let result = out.json();
    (out, result)
}

/// The tool_result blocks of the last user message of a recorded request body.
pub fn last_tool_results(body: &Value) -> Vec<Value> {
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect()
}

/// A tool_result's content as text.
pub fn result_text(result: &Value) -> String {
    match &result["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// (tool_use_id, text, is_error) of each result in the last user message.
pub fn tool_results(body: &Value) -> Vec<(String, String, bool)> {
    last_tool_results(body)
        .iter()
        .map(|b| {
            let id = b["tool_use_id"].as_str().unwrap().to_string();
            (id, result_text(b), b["is_error"].as_bool().unwrap_or(false))
        })
        .collect()
}

/// The bodies of the Messages API calls `model` received, in order.
pub fn message_bodies(model: &ScriptedModel) -> Vec<Value> {
    model
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/messages"))
        .map(|r| r.body)
        .collect()
}

/// The names in a recorded request body's `tools` array, in order (none without one).
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}
