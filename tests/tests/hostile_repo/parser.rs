//! The permission parser's bypasses from issue 9, end to end: a scripted model sends Bash
//! commands that once hid what they ran from the rule engine, `cordon run` decides on them
//! and runs what it allows in the sandbox, and the test looks at the workspace afterwards.
//! Every command would only create a marker file in the test's own workspace.

use cordon_tests::Workspace;
use cordon_tests::agent::{run_json_ok, tool_results};
use cordon_tests::scripted_model::{Reply, ScriptedModel, Turn};
use serde_json::json;

/// One model turn calling Bash once per command (ids `b0`, `b1`...), then a final answer.
fn bash_turns(commands: &[String]) -> Vec<Turn> {
    let mut reply = Reply::default();
    for (i, cmd) in commands.iter().enumerate() {
        reply = reply.with_tool_use(format!("b{i}"), "Bash", json!({ "command": cmd }));
    }
    vec![Turn::Reply(reply), Turn::text("done")]
}

/// Runs `commands` in one session with `args`; returns (text, is_error) per command.
async fn run(ws: &Workspace, commands: &[String], args: &[&str]) -> Vec<(String, bool)> {
    let model = ScriptedModel::start(bash_turns(commands)).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    run_json_ok(&model, home.path(), ws.path(), args, "go").await;
    let results = tool_results(&model.requests()[1].body);
    assert_eq!(results.len(), commands.len());
    results
        .into_iter()
        .map(|(_, text, err)| (text, err))
        .collect()
}

/// Each command was refused (an error result) and its marker `m{i}` does not exist.
fn assert_none_ran(ws: &Workspace, commands: &[String], results: &[(String, bool)], what: &str) {
    for (i, (cmd, (text, is_error))) in commands.iter().zip(results).enumerate() {
        assert!(is_error, "{cmd:?} ran: {text}");
        assert!(!ws.join(&format!("m{i}")).exists(), "{cmd:?} {what}");
    }
}

/// Plan mode runs read-only commands only. Each of these passed as read-only before; bash
/// runs the `touch` in every one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_runs_no_command_hidden_from_the_parser() {
    let ws = Workspace::new();
    let commands: Vec<String> = [
        "cat <<EOF $(\ntouch m0\n)\nbody\nEOF",
        "cat <<EOF <(\ntouch m1\n)\nbody\nEOF",
        "cat <<EOF `\ntouch m2\n`\nbody\nEOF",
        "cat <<-EOF $(\ntouch m3\n)\n\tbody\n\tEOF",
        "cat <<'EOF' <<B $(\ntouch m4\n)\na\nEOF\nb\nB",
        "cat <<EOF\nbody\nEO\\\nF\ntouch m5\nEOF",
        "x='a[$(touch m6)]'; echo $((x))",
        "printf '%s' 'a[$(touch m7)]' >/dev/null; test -v 'a[$(touch m7)]'",
        "git -c core.pager='touch m8' -p log",
        "cat <<EOF\n$(touch m9)\nEOF",
        "cat <<EOF $(\ntouch m10\nEOF\n)",
        "cat <<EOF <(\ntouch m11\nEOF\n)",
        "{fd}>/dev/null touch m12",
        "sort --co='touch m13' /dev/null",
    ]
    .map(String::from)
    .to_vec();
    let results = run(&ws, &commands, &["--permission-mode", "plan"]).await;
    assert_none_ran(&ws, &commands, &results, "ran its hidden command");
}

/// A plain here-document is still read-only: plan mode runs it (the control case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_still_runs_a_plain_here_document() {
    let ws = Workspace::new();
    let commands = vec!["cat <<EOF\nhello $HOME\nEOF".to_string()];
    let results = run(&ws, &commands, &["--permission-mode", "plan"]).await;
    assert!(!results[0].1, "{:?}", results[0]);
    assert!(results[0].0.contains("hello"), "{:?}", results[0]);
}

/// A deny rule on `touch` holds in bypassPermissions mode through every wrapper that once
/// hid the command from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_rules_see_through_wrappers_in_bypass_mode() {
    let ws = Workspace::new();
    let commands: Vec<String> = [
        "exec -a x touch m0",
        "setsid touch m1",
        "flock lk touch m2",
        "ionice -c3 touch m3",
        "taskset 1 touch m4",
        "timeout --sig=KILL 5 touch m5",
        "eval touch m6",
        "find . -maxdepth 0 -exec touch m7 \\;",
        "/usr/bin/touch m8",
        "trap 'touch m9' EXIT",
        "strace -f touch m10",
        "ls | xargs -I{} touch m11",
        "if true; then touch m12; fi",
        "for i in 1; do t\"ouc\"h m13; done",
        "f() { touch m14; }; f",
    ]
    .map(String::from)
    .to_vec();
    let args = [
        "--permission-mode",
        "bypassPermissions",
        "--disallowedTools=Bash(touch *)",
    ];
    let results = run(&ws, &commands, &args).await;
    assert_none_ran(&ws, &commands, &results, "evaded the deny rule");
    // The rule does not catch everything: an unrelated command still runs.
    let ok = run(&ws, &["echo fine".to_string()], &args).await;
    assert!(!ok[0].1, "{ok:?}");
}

/// `git ARGS` on the host in `dir`, with no user or system config (the test's own repos).
fn host_git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A workspace that is a repository with a file matching `x`, and two nested repositories
/// whose config names a program git runs on `status` (`core.fsmonitor`): `nested-a`
/// creates `m3`, `nested-b` creates `m4` (absolute paths in the workspace). Returns the
/// commands the model sends: each would create its marker `m{i}` when run.
fn abbreviation_and_git_dir_attacks(ws: &Workspace) -> Vec<String> {
    let root = ws.path();
    std::fs::write(ws.join("f.txt"), "x\n").unwrap();
    host_git(root, &["init", "-q", "."]);
    for (dir, mark) in [("nested-a", "m3"), ("nested-b", "m4")] {
        let nested = ws.join(dir);
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(nested.join("y.txt"), "y\n").unwrap();
        host_git(&nested, &["init", "-q", "."]);
        host_git(&nested, &["add", "y.txt"]);
        host_git(&nested, &["commit", "-qm", "planted"]);
        let hook = format!("touch {}", ws.join(mark).display());
        host_git(&nested, &["config", "core.fsmonitor", &hook]);
    }
    host_git(root, &["add", "f.txt"]);
    host_git(root, &["commit", "-qm", "init"]);
    let mark = |m: &str| ws.join(m).display().to_string();
    vec![
        format!("sort --outp={} /dev/null", mark("m0")),
        format!("git grep --open-files-in-pager='touch {}' x", mark("m1")),
        format!("git grep --open='touch {}' x", mark("m2")),
        "git --git-dir=nested-a/.git status".to_string(),
        "git -C nested-b status".to_string(),
    ]
}

/// Issue 9: a GNU long-option abbreviation that writes (`sort --outp=F`) or runs a program
/// (`git grep --open=CMD`), and git's global options that point it at a repository whose
/// config runs a program (`--git-dir=DIR`, `-C DIR` into a nested repository). Plan mode
/// runs read-only commands only: none of them runs, and no marker exists on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_runs_no_abbreviated_option_or_planted_git_config() {
    let ws = Workspace::new();
    let commands = abbreviation_and_git_dir_attacks(&ws);
    let results = run(&ws, &commands, &["--permission-mode", "plan"]).await;
    assert_none_ran(&ws, &commands, &results, "ran its planted command");
    // Plain forms of the same commands are still read-only.
    let plain = ["git status".to_string(), "git grep -n x".to_string()];
    for (cmd, (text, is_error)) in plain
        .iter()
        .zip(run(&ws, &plain, &["--permission-mode", "plan"]).await)
    {
        assert!(!is_error, "{cmd:?}: {text}");
    }
}

/// The control: run without the permission check, each command does create its marker, so
/// the plan-mode test above proves something.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_abbreviated_options_and_planted_git_configs_do_run_code() {
    let ws = Workspace::new();
    let commands = abbreviation_and_git_dir_attacks(&ws);
    run(&ws, &commands, &["--permission-mode", "bypassPermissions"]).await;
    for (i, cmd) in commands.iter().enumerate() {
        assert!(ws.join(&format!("m{i}")).exists(), "{cmd:?} ran nothing");
    }
}
