//! The bash oracle for the permission parser, shared by the differential test
//! (`tests/tests/parser_differential.rs`) and the fuzz target `shell_parser_bash`: what the
//! parser reports a command runs, which commands are safe to hand to bash, and a driver that
//! runs commands under the real bash inside the sandbox (`cordon sandbox`) with a logging
//! shim in front of every program on PATH.
//!
//! The driver is one long-lived sandbox: a Python loop that reads commands (one JSON string
//! a line) from a named pipe in the workspace and answers each with one JSON line on
//! another. One sandbox start (tens of
//! milliseconds) serves every command, so a fuzzer pays only bash's own start per input.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use cordon::permissions::bash_rules::{Part, split};
use cordon::permissions::read_only::command_name;
use cordon::permissions::shell::Word;

/// What bash started for one command.
#[derive(Debug, serde::Deserialize)]
pub struct Outcome {
    /// Program names, in the order their shims ran.
    pub programs: Vec<String>,
    pub timed_out: bool,
}

/// What the parser says a command runs.
#[derive(Debug)]
pub enum Reported {
    /// The parser does not understand it: never allowed by a rule, not run.
    NotUnderstood,
    /// Program names of every layer of every part, and whether some part's program is not
    /// known (a computed name, or a wrapper the parser does not follow: such a part is
    /// never allowed by a rule, so anything it starts counts as reported).
    Names {
        names: BTreeSet<String>,
        computed: bool,
    },
}

/// What the parser (`bash_rules::split`) reports `cmd` runs.
pub fn reported(cmd: &str) -> Reported {
    let Ok(parts) = split(cmd) else {
        return Reported::NotUnderstood;
    };
    let mut names = BTreeSet::new();
    let mut computed = false;
    for part in &parts {
        computed |= part.unresolved.is_some();
        for layer in layers(part) {
            let Some(w) = layer.first() else { continue };
            match w.literal().and_then(|v| v.rsplit('/').next()) {
                Some(name) => {
                    names.insert(name.to_string());
                }
                None => computed = true,
            }
        }
    }
    Reported::Names { names, computed }
}

fn layers(part: &Part) -> Vec<Vec<Word>> {
    let mut out = part.wrappers.clone();
    out.push(part.words.clone());
    out
}

/// Whether `cmd` is harmless even outside a sandbox, so that it may be run by the driver
/// (the sandbox is the boundary for the host; this filter also keeps a command from
/// touching the driver's own files, the shims and the log, which would falsify the
/// answer): every part understood, no program named by a path outside the system
/// directories, no file written (a redirect only to `/dev/null`), no `PATH` assignment,
/// and no wrapper, directory change or builtin that runs or changes what runs.
pub fn harmless(cmd: &str) -> bool {
    const AVOID: &[&str] = &[
        "cd", "pushd", "popd", "exec", "command", "builtin", "eval", "source", ".", "trap",
        "alias", "env", "timeout", "nice", "nohup", "stdbuf", "setsid", "flock", "ionice",
        "taskset", "chrt", "xargs", "find", "bash", "sh", "dash", "sudo", "kill", "ulimit",
        "enable", "hash", "exit", "logout",
    ];
    let Ok(parts) = split(cmd) else {
        return false;
    };
    parts.iter().all(|p| {
        p.unresolved.is_none()
            && p.redirects
                .iter()
                .all(|r| !r.kind.writes() || r.target.literal() == Some("/dev/null"))
            && p.assignments.iter().all(|a| a.name != "PATH")
            && layers(p).iter().all(|l| {
                l.first()
                    .and_then(|w| w.literal())
                    .is_none_or(|n| command_name(n) == Some(n) && !AVOID.contains(&n))
            })
    })
}

/// How a started program is accounted for.
#[derive(Debug, Default)]
pub struct Tally {
    /// Programs bash started.
    pub started: usize,
    /// Started programs not named by the parser but covered by a part it does not
    /// understand exactly (a computed name or an unfollowed wrapper).
    pub with_computed: usize,
    /// Started programs the parser did not report: each is a bug.
    pub misses: Vec<String>,
}

/// The oracle: every program bash started for `cmd` (in `outcome`) is among the names the
/// parser reported, or covered by a part it does not understand exactly.
pub fn compare(
    cmd: &str,
    names: &BTreeSet<String>,
    computed: bool,
    outcome: &Outcome,
    tally: &mut Tally,
) {
    tally.started += outcome.programs.len();
    for program in &outcome.programs {
        if names.contains(program) {
            continue;
        }
        if computed {
            tally.with_computed += 1;
            continue;
        }
        tally.misses.push(format!(
            "{cmd:?}: bash ran `{program}`, parser reported {names:?}"
        ));
    }
}

/// Directories whose programs get a shim (the sandbox's PATH).
const PATH_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Wrappers the parser follows: their shim runs the real program so that the command they
/// wrap reaches a shim too. (`sudo`, `doas`, `unshare` cannot work in the sandbox.)
const PASS_THROUGH: &str = "env timeout nice nohup stdbuf setsid ionice taskset chrt flock \
                            xargs find bash sh dash";

/// A running driver: bash with the shims, inside one `cordon sandbox`.
pub struct BashOracle {
    child: Child,
    /// The named pipe the driver reads commands from (opened read-write, so opening never
    /// waits for the driver and a driver that died shows as the end of its output).
    commands: Option<File>,
    answers: BufReader<File>,
}

impl BashOracle {
    /// Starts the driver in a sandbox made by the `cordon` binary on the workspace `root`
    /// (a directory visible at the same path inside the sandbox, so not under /tmp). Each
    /// command may run `timeout_secs` before its processes are killed.
    pub fn start(cordon: &Path, root: &Path, timeout_secs: u32) -> BashOracle {
        write_shims(root);
        let driver = root.join("driver.py");
        fs::write(&driver, DRIVER).unwrap();
        let commands = fifo(&root.join("commands.fifo"));
        let answers = BufReader::new(fifo(&root.join("answers.fifo")));
        let timeout = timeout_secs.to_string();
        let child = Command::new(cordon)
            .args(["sandbox", "--backend", "local", "--workspace"])
            .arg(root)
            .args(["--", "python3"])
            .args([driver.as_os_str(), root.as_os_str()])
            .arg(&timeout)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("run {} sandbox: {e}", cordon.display()));
        BashOracle {
            child,
            commands: Some(commands),
            answers,
        }
    }

    /// Runs `cmd` under `/bin/bash -c` and says which programs it started.
    pub fn run(&mut self, cmd: &str) -> Outcome {
        let mut line = serde_json::to_string(cmd).unwrap();
        line.push('\n');
        let commands = self.commands.as_mut().unwrap();
        commands.write_all(line.as_bytes()).unwrap();
        commands.flush().unwrap();
        self.wait_for_answer(cmd);
        let mut answer = String::new();
        self.answers.read_line(&mut answer).unwrap();
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("the driver stopped ({status}; see its stderr above)");
        }
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("driver answer {answer:?}: {e}"))
    }

    /// Waits until the driver's answer is readable. The answers pipe is open for writing
    /// here too (so opening it never blocked), so a driver that died would never show as
    /// the end of the pipe: poll, and fail with a message when the driver is gone or takes
    /// far longer than its own per-command limit, rather than hang the suite.
    fn wait_for_answer(&mut self, cmd: &str) {
        use std::os::fd::AsFd;
        let limit = std::time::Duration::from_secs(120);
        let started = std::time::Instant::now();
        while self.answers.buffer().is_empty() {
            let fd = self.answers.get_ref().as_fd();
            let mut fds = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
            if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(500u16)).unwrap_or(0) > 0 {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the driver stopped ({status}) while running {cmd:?}");
            }
            assert!(
                started.elapsed() < limit,
                "no answer from the driver in {limit:?} for {cmd:?}"
            );
        }
    }

    /// Runs every command; one [`Outcome`] each, in order.
    pub fn run_all(&mut self, cmds: &[String]) -> Vec<Outcome> {
        cmds.iter().map(|c| self.run(c)).collect()
    }
}

impl Drop for BashOracle {
    fn drop(&mut self) {
        // Closing the pipe ends the driver's loop; the sandbox then exits.
        self.commands = None;
        let _ = self.child.wait();
    }
}

/// A named pipe at `path`, opened read-write: opening never waits for the other end.
fn fifo(path: &Path) -> File {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

fn write_shims(root: &Path) {
    let bin = root.join("shim/bin");
    fs::create_dir_all(&bin).unwrap();
    let script = root.join("shim/shim.sh");
    let log = root.join("shim.log");
    fs::write(&script, shim_script(&log)).unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    for name in programs_on_path() {
        symlink(&script, bin.join(&name)).unwrap();
    }
    fs::create_dir_all(root.join("run")).unwrap();
}

/// Every executable name in [`PATH_DIRS`].
pub fn programs_on_path() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for dir in PATH_DIRS {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            // Through symbolic links (`/usr/bin/x -> /etc/alternatives/x`): every name bash
            // could find must be a shim, or the real program would run and start others.
            let executable = fs::metadata(e.path())
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
            let name = e.file_name().to_string_lossy().into_owned();
            if executable && !name.contains(['\'', '"', ' ', '\\']) {
                names.insert(name);
            }
        }
    }
    names
}

/// The shim: log the name, then exit 0, or for a followed wrapper run the real program
/// (refusing arguments that name paths, and `find`'s writing actions, so that nothing but
/// the run directory is touched).
fn shim_script(log: &Path) -> String {
    format!(
        r#"#!/bin/sh
n=${{0##*/}}
printf '%s\n' "$n" >> '{log}'
case " {PASS_THROUGH} " in
  *" $n "*) ;;
  *) exit 0 ;;
esac
for a in "$@"; do
  case $a in
    */*|*..*|-delete|-fprint*|-fls) exit 0 ;;
  esac
done
for d in {dirs}; do
  if [ -x "$d/$n" ]; then exec "$d/$n" "$@"; fi
done
exit 127
"#,
        log = log.display(),
        dirs = PATH_DIRS.join(" "),
    )
}

/// Runs each command read from the pipe under bash with the shims first on PATH, as a child
/// subreaper so that every process a command started has finished (or is killed) before
/// the next one starts; answers one JSON line per command on the answers pipe.
const DRIVER: &str = r#"
import ctypes, json, os, subprocess, sys, time

root, limit = sys.argv[1], float(sys.argv[2])
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
log = root + "/shim.log"
run = root + "/run"
env = {"PATH": root + "/shim/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "HOME": run, "LC_ALL": "C"}

def orphans():
    me, kids = os.getpid(), []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = open("/proc/%s/stat" % p).read()
                if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                    kids.append(int(p))
            except (OSError, ValueError, IndexError):
                pass
    return kids

commands = open(root + "/commands.fifo")
answers = open(root + "/answers.fifo", "w")
while True:
    line = commands.readline()
    if not line:
        break
    cmd = json.loads(line)
    os.makedirs(run, exist_ok=True)
    open(log, "w").close()
    p = subprocess.Popen(["/bin/bash", "-c", cmd], cwd=run, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    timed_out = False
    try:
        p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, 9)
        p.wait()
    deadline = time.time() + limit
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            continue
        if time.time() > deadline:
            timed_out = True
            for k in orphans():
                try:
                    os.kill(k, 9)
                except OSError:
                    pass
        time.sleep(0.002)
    programs = [l.strip() for l in open(log) if l.strip()]
    answers.write(json.dumps({"programs": programs, "timed_out": timed_out}) + "\n")
    answers.flush()
"#;
