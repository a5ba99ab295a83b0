use super::*;

fn exited(code: i32) -> ExitStatus {
    ExitStatus {
        code: Some(code),
        ..Default::default()
    }
}

#[test]
fn success_shows_the_output_trimmed() {
    let out = render(b"hello\n\n", &exited(0), 1000);
    assert_eq!(out, ToolOutput::ok("hello"));
}

#[test]
fn silent_success_says_so() {
    assert_eq!(render(b"", &exited(0), 1000), ToolOutput::ok("(no output)"));
}

#[test]
fn non_zero_exit_is_an_error_with_the_code() {
    let out = render(b"boom\n", &exited(3), 1000);
    assert_eq!(out, ToolOutput::error("boom\nExit code 3"));
    assert_eq!(
        render(b"", &exited(1), 1000),
        ToolOutput::error("Exit code 1")
    );
}

#[test]
fn timeout_interrupt_and_signal_are_errors() {
    let timed_out = ExitStatus {
        timed_out: true,
        signal: Some(9),
        ..Default::default()
    };
    assert_eq!(
        render(b"partial", &timed_out, 1500),
        ToolOutput::error("partial\nCommand timed out after 1.5s")
    );
    let cancelled = ExitStatus {
        cancelled: true,
        signal: Some(9),
        ..Default::default()
    };
    assert_eq!(
        render(b"", &cancelled, 1000),
        ToolOutput::error("Command was interrupted")
    );
    let killed = ExitStatus {
        signal: Some(11),
        ..Default::default()
    };
    assert!(render(b"", &killed, 1000).content.contains("signal 11"));
}

#[test]
fn truncated_output_names_the_full_output_file_once() {
    let status = ExitStatus {
        code: Some(0),
        truncated: true,
        full_output_path: "/tmp/out-1.log".into(),
        ..Default::default()
    };
    let out = render(b"aaaa\n... [output truncated]\n", &status, 1000);
    assert_eq!(
        out.content,
        "aaaa\n... [output truncated]\nFull output: /tmp/out-1.log"
    );
    assert!(!out.is_error);
    let out = render(b"aaaa\n[full output in /tmp/out-1.log]\n", &status, 1000);
    assert_eq!(out.content.matches("/tmp/out-1.log").count(), 1);
}

#[test]
fn timeouts_default_and_clamp() {
    assert_eq!(effective_timeout(None), (120_000, false));
    assert_eq!(effective_timeout(Some(0)), (120_000, false));
    assert_eq!(effective_timeout(Some(5_000)), (5_000, false));
    assert_eq!(effective_timeout(Some(900_000)), (600_000, true));
}

#[test]
fn seconds_drop_needless_fractions() {
    assert_eq!(seconds(120_000), "120s");
    assert_eq!(seconds(1_500), "1.5s");
    assert_eq!(seconds(250), "0.25s");
}
