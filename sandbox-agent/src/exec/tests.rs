//! Executor tests: real commands in the test process (unconfined; confinement has its own
//! forked tests). Markers in sleep arguments let a /proc scan prove nothing survived.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;

use futures::StreamExt;

use super::*;
use crate::config::Rlimits;

struct Fx {
    _dir: tempfile::TempDir,
    config: AgentConfig,
    exec: Executor,
    cwd: Arc<Mutex<PathBuf>>,
}

fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    let config = AgentConfig {
        socket_path: dir.path().join("s.sock"),
        workspace: ws.clone(),
        tmp_dir: tmp,
        extra_writable: vec![],
        extra_readable: Vec::new(),
        command_env: Vec::new(),
        protected_paths: vec![],
        network: false,
        egress: None,
        best_effort: false,
        rlimits: Rlimits::default(),
        disk_budget_bytes: None,
        exec_cgroup: None,
        require_outside_peer: false,
    };
    Fx {
        exec: Executor::new(&config),
        cwd: Arc::new(Mutex::new(ws)),
        config,
        _dir: dir,
    }
}

static N: AtomicU32 = AtomicU32::new(0);

fn unique() -> u32 {
    N.fetch_add(1, Ordering::Relaxed)
}

/// A sleep argument no other process has: "99<pid>.<n>1".
fn marker() -> String {
    format!("99{}.{}1", std::process::id(), unique())
}

fn shell(cmd: &str) -> ExecRequest {
    ExecRequest {
        exec_id: format!("t{}", unique()),
        command: cmd.into(),
        timeout_ms: 60_000,
        ..Default::default()
    }
}

fn argv(args: &[&str]) -> ExecRequest {
    ExecRequest {
        exec_id: format!("t{}", unique()),
        argv: args.iter().map(|s| s.to_string()).collect(),
        timeout_ms: 60_000,
        ..Default::default()
    }
}

#[derive(Debug, Default)]
struct Outcome {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    exit: ExitStatus,
    exits: usize,
}

impl Outcome {
    fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

async fn collect(mut stream: EventStream) -> Outcome {
    let mut o = Outcome::default();
    while let Some(ev) = stream.next().await {
        match ev.unwrap().event.unwrap() {
            exec_event::Event::Output(c) => {
                assert!(c.data.len() <= limits::MAX_CHUNK_BYTES);
                assert_eq!(o.exits, 0, "output after exit");
                if c.stream == output_chunk::Stream::Stderr as i32 {
                    o.stderr.extend(c.data);
                } else {
                    o.stdout.extend(c.data);
                }
            }
            exec_event::Event::Exit(e) => {
                o.exit = e;
                o.exits += 1;
            }
        }
    }
    assert_eq!(o.exits, 1, "exactly one exit event");
    o
}

async fn run(f: &Fx, req: ExecRequest) -> Outcome {
    collect(f.exec.start(req, f.cwd.clone()).await.unwrap()).await
}

/// Live processes whose command line contains `marker`.
fn survivors(marker: &str) -> Vec<i32> {
    kill::scan()
        .into_iter()
        .filter(|p| p.state != b'Z')
        .filter(|p| {
            std::fs::read(format!("/proc/{}/cmdline", p.pid))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .map(|p| p.pid)
        .collect()
}

#[tokio::test]
async fn output_streams_and_the_exit_code_is_reported() {
    let f = fx();
    let o = run(&f, shell("echo out; echo err >&2; exit 3")).await;
    assert_eq!(o.out(), "out\n");
    assert_eq!(o.stderr, b"err\n");
    assert_eq!(o.exit.code, Some(3));
    assert_eq!(o.exit.signal, None);
    assert!(!o.exit.timed_out && !o.exit.cancelled && !o.exit.truncated);
}

#[tokio::test]
async fn a_signal_death_is_reported_as_the_signal() {
    let f = fx();
    let o = run(&f, shell("kill -TERM $$")).await;
    assert_eq!(o.exit.code, None);
    assert_eq!(o.exit.signal, Some(libc::SIGTERM));
}

#[tokio::test]
async fn stdin_is_fed_then_closed() {
    let f = fx();
    let mut req = argv(&["cat"]);
    req.stdin = b"hello stdin".to_vec();
    let o = run(&f, req).await;
    assert_eq!(o.out(), "hello stdin");
    assert_eq!(o.exit.code, Some(0));
    // Without stdin bytes, stdin is /dev/null: cat ends at once.
    let o = run(&f, argv(&["cat"])).await;
    assert_eq!(o.exit.code, Some(0));
}

#[tokio::test]
async fn an_interactive_exec_answers_each_line_and_streams_stdout_uncapped() {
    let f = fx();
    let (tx, rx) = mpsc::channel(4);
    let mut req = argv(&["cat"]);
    req.timeout_ms = 0;
    req.output_limit = 10;
    let mut stream = f
        .exec
        .start_interactive(req, rx, f.cwd.clone())
        .await
        .unwrap();
    // A request, its answer, then the next: the pipe stays open between them.
    for line in ["first line, longer than the output limit\n", "second\n"] {
        tx.send(line.as_bytes().to_vec()).await.unwrap();
        let mut got = Vec::new();
        while got.len() < line.len() {
            match stream.next().await.unwrap().unwrap().event {
                Some(exec_event::Event::Output(c)) => got.extend_from_slice(&c.data),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(String::from_utf8(got).unwrap(), line);
    }
    // Closing the input closes its stdin: cat exits.
    drop(tx);
    let exit = loop {
        if let Some(exec_event::Event::Exit(e)) = stream.next().await.unwrap().unwrap().event {
            break e;
        }
    };
    assert_eq!(exit.code, Some(0));
    assert!(!exit.truncated);
    // Stdin bytes in the request itself are refused for an interactive exec.
    let (_tx, rx) = mpsc::channel(1);
    let mut req = argv(&["cat"]);
    req.stdin = b"x".to_vec();
    assert!(
        f.exec
            .start_interactive(req, rx, f.cwd.clone())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn timeout_kills_a_double_forked_setsid_tree() {
    let f = fx();
    let m = marker();
    let cmd = format!(
        "setsid sh -c 'sleep {m} & sleep {m}' & (sh -c 'sleep {m}' &); \
         sleep {m} & echo ready; wait"
    );
    let mut req = shell(&cmd);
    req.timeout_ms = 1500;
    let o = run(&f, req).await;
    assert!(o.exit.timed_out);
    assert!(!o.exit.cancelled);
    assert_eq!(o.out(), "ready\n");
    assert_eq!(survivors(&m), Vec::<i32>::new());
}

#[tokio::test]
async fn leftovers_of_a_finished_command_are_killed() {
    let f = fx();
    let m = marker();
    let o = run(&f, shell(&format!("(setsid sleep {m} &) ; echo done"))).await;
    assert_eq!(o.exit.code, Some(0));
    assert_eq!(o.out(), "done\n");
    assert_eq!(survivors(&m), Vec::<i32>::new());
}

#[tokio::test]
async fn cancel_kills_and_reports_cancelled() {
    let f = fx();
    let m = marker();
    let req = shell(&format!("sleep {m} & sleep {m}"));
    let id = req.exec_id.clone();
    let stream = f.exec.start(req, f.cwd.clone()).await.unwrap();
    assert!(f.exec.cancel(&id));
    let o = collect(stream).await;
    assert!(o.exit.cancelled);
    assert!(!o.exit.timed_out);
    assert_eq!(o.exit.signal, Some(libc::SIGKILL));
    assert_eq!(survivors(&m), Vec::<i32>::new());
    assert!(
        !f.exec.cancel(&id),
        "a finished exec is no longer cancellable"
    );
}

#[tokio::test]
async fn dropping_the_stream_kills_the_tree() {
    let f = fx();
    let m = marker();
    let req = shell(&format!("(setsid sleep {m} &); sleep {m}"));
    let id = req.exec_id.clone();
    let mut stream = f.exec.start(req, f.cwd.clone()).await.unwrap();
    drop(stream.next());
    drop(stream);
    // The driver notices, kills and unregisters; wait for that (bounded).
    for _ in 0..500 {
        if !kill::registry().lock().contains_key(&id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!kill::registry().lock().contains_key(&id));
    assert_eq!(survivors(&m), Vec::<i32>::new());
}

#[tokio::test]
async fn kill_all_ends_every_command() {
    let f = fx();
    let m = marker();
    let s1 = f
        .exec
        .start(shell(&format!("sleep {m}")), f.cwd.clone())
        .await
        .unwrap();
    let s2 = f
        .exec
        .start(argv(&["sleep", &m]), f.cwd.clone())
        .await
        .unwrap();
    f.exec.kill_all();
    assert!(collect(s1).await.exit.cancelled);
    assert!(collect(s2).await.exit.cancelled);
    assert_eq!(survivors(&m), Vec::<i32>::new());
}

#[tokio::test]
async fn long_output_is_cut_with_a_marker_and_kept_whole_in_a_file() {
    let f = fx();
    let mut req = shell("head -c 200000 /dev/zero | tr '\\0' a; echo; echo tail-line");
    req.output_limit = 1000;
    let o = run(&f, req).await;
    assert!(o.exit.truncated);
    assert_eq!(o.exit.code, Some(0));
    let total = 200_000 + 1 + 10;
    assert_eq!(o.exit.total_output_bytes, total);
    let out = o.out();
    assert!(out.starts_with(&"a".repeat(1000)));
    assert!(!out.starts_with(&"a".repeat(1001)));
    assert!(out.contains(&format!(
        "[output truncated: {total} bytes total; full output in "
    )));
    let path = PathBuf::from(&o.exit.full_output_path);
    assert!(path.starts_with(&f.config.tmp_dir));
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full.len() as u64, total);
    assert!(full.ends_with("a\ntail-line\n"));
}

#[tokio::test]
async fn short_output_keeps_no_file() {
    let f = fx();
    let o = run(&f, shell("echo small")).await;
    assert!(!o.exit.truncated);
    assert!(o.exit.full_output_path.is_empty());
}

#[tokio::test]
async fn cd_carries_over_and_exports_do_not() {
    let f = fx();
    let o = run(&f, shell("mkdir -p sub && cd sub && export X=1")).await;
    let sub = f.config.workspace.canonicalize().unwrap().join("sub");
    assert_eq!(PathBuf::from(&o.exit.cwd_after), sub, "{o:?}");
    let o = run(&f, shell("pwd; echo \"[$X]\"")).await;
    assert_eq!(o.out(), format!("{}\n[]\n", sub.display()));
    // `exit N` still records the directory and keeps its status.
    let o = run(&f, shell("cd / && exit 4")).await;
    assert_eq!(o.exit.code, Some(4));
    assert_eq!(o.exit.cwd_after, "/");
    // A request's own cwd is used for that call.
    let mut req = shell("pwd");
    req.cwd = sub.display().to_string();
    assert_eq!(run(&f, req).await.out(), format!("{}\n", sub.display()));
}

#[tokio::test]
async fn the_environment_is_clean_plus_the_request() {
    let f = fx();
    let mut req = argv(&["env"]);
    req.env = HashMap::from([("EXTRA".to_string(), "yes".to_string())]);
    let o = run(&f, req).await;
    let mut keys: Vec<String> = o
        .out()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "CORDON_EXEC_ID",
            "EXTRA",
            "HOME",
            "LANG",
            "LOGNAME",
            "PATH",
            "SHELL",
            "TERM",
            "TMPDIR",
            "USER"
        ]
    );
    assert!(
        o.out()
            .contains(&format!("TMPDIR={}\n", f.config.tmp_dir.display()))
    );
}

#[tokio::test]
async fn only_stdio_descriptors_are_inherited() {
    let f = fx();
    // ls opens one descriptor of its own (the directory it lists), numbered 3.
    let o = run(&f, argv(&["ls", "/proc/self/fd"])).await;
    assert_eq!(o.out(), "0\n1\n2\n3\n");
}

#[tokio::test]
async fn each_command_leads_its_own_session_with_core_dumps_off() {
    let f = fx();
    let o = run(&f, shell("ps -o sid= -o pgid= -p $$ 2>/dev/null || cut -d' ' -f6 /proc/$$/stat; echo $$; ulimit -c")).await;
    let out = o.out();
    let lines: Vec<&str> = out.lines().collect();
    let pid = lines[lines.len() - 2].trim();
    assert!(lines[0].split_whitespace().all(|x| x == pid), "{out}");
    assert_eq!(lines[lines.len() - 1], "0");
}

#[tokio::test]
async fn bad_requests_are_refused() {
    let f = fx();
    let mut both = shell("true");
    both.argv = vec!["true".into()];
    let err = f.exec.start(both, f.cwd.clone()).await.err().unwrap();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    let mut long = shell("true");
    long.timeout_ms = limits::MAX_EXEC_TIMEOUT_MS + 1;
    let err = f.exec.start(long, f.cwd.clone()).await.err().unwrap();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    let err = f
        .exec
        .start(argv(&["/nonexistent/cordon-test"]), f.cwd.clone())
        .await
        .err()
        .unwrap();
    assert_eq!(err.code, ErrorCode::NotFound);
    let mut bad_env = shell("true");
    bad_env.env.insert("A=B".into(), "x".into());
    assert!(f.exec.start(bad_env, f.cwd.clone()).await.is_err());
}
