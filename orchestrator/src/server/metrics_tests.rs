use super::*;

/// A registry with every metric observed once, so each family has a sample.
fn exercised() -> Metrics {
    let m = Metrics::new().expect("metrics");
    m.session_moved("acme", None, Some("starting"));
    m.session_moved("acme", Some("starting"), Some("running"));
    m.sandbox_started(StartKind::Cold, 0.4);
    m.sandbox_started(StartKind::Warm, 0.02);
    m.tool_call("Bash", Outcome::Ok, 0.01);
    m.tool_call("Read", Outcome::Error, 0.001);
    m.exec(Outcome::TimedOut, 2.0);
    m.permission_decision(DecisionSource::User, AuditDecision::Deny);
    m.model_request(1.2, true);
    m.model_request(0.3, false);
    m.model_error("http_529");
    m.model_retry();
    m.tokens(
        "acme",
        &Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_input_tokens: 3,
            cache_creation_input_tokens: 2,
        },
    );
    m.set_warm_pool(2);
    m
}

#[test]
fn every_named_metric_is_exported() {
    let text = exercised().render();
    for name in [
        "cordon_sessions{state=\"running\",tenant=\"acme\"} 1",
        "cordon_sessions{state=\"starting\",tenant=\"acme\"} 0",
        "cordon_sandbox_start_seconds_count{start=\"cold\"} 1",
        "cordon_sandbox_start_seconds_count{start=\"warm\"} 1",
        "cordon_tool_call_seconds_count{outcome=\"ok\",tool=\"Bash\"} 1",
        "cordon_exec_seconds_count{outcome=\"timed_out\"} 1",
        "cordon_permission_decisions_total{decision=\"deny\",source=\"user\"} 1",
        "cordon_model_request_seconds_count{result=\"error\"} 1",
        "cordon_model_retries_total 1",
        "cordon_model_errors_total{kind=\"http_529\"} 1",
        "cordon_tokens_total{kind=\"cache_creation\",tenant=\"acme\"} 2",
        "cordon_tokens_total{kind=\"cache_read\",tenant=\"acme\"} 3",
        "cordon_warm_pool_size 2",
    ] {
        assert!(text.contains(name), "missing {name} in\n{text}");
    }
}

/// `promtool check metrics` (Debian's prometheus package) accepts the exposition. CI
/// installs it (`.ci/run`); elsewhere the test says it was skipped.
#[test]
fn promtool_accepts_the_exposition() {
    use std::io::Write;
    let text = exercised().render();
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: promtool not installed (apt-get install prometheus)");
            return;
        }
        Err(e) => panic!("promtool: {e}"),
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
