//! The differential test's inputs and its runner: generated commands, the corpus from real
//! scripts, and the driver that runs commands under bash in the sandbox with the shim.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use cordon_tests::{Backend, Workspace, sandbox};

/// What bash started for one command.
#[derive(Debug, serde::Deserialize)]
pub struct Outcome {
    /// Program names, in the order their shims ran.
    pub programs: Vec<String>,
    pub timed_out: bool,
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

/// Runs `commands` under `/bin/bash -c` in one sandbox; one [`Outcome`] per command.
pub fn run_in_sandbox(commands: &[String]) -> Vec<Outcome> {
    let ws = Workspace::new();
    let root = ws.path().to_path_buf();
    write_shims(&root);
    fs::write(root.join("driver.py"), DRIVER).unwrap();
    fs::write(
        root.join("commands.json"),
        serde_json::to_vec(commands).unwrap(),
    )
    .unwrap();
    let driver = root.join("driver.py");
    let run = sandbox(
        Backend::Local,
        &root,
        &["python3", driver.to_str().unwrap(), root.to_str().unwrap()],
    );
    assert_eq!(run.code, 0, "driver failed: {run:?}");
    let results = fs::read(root.join("results.json")).unwrap();
    serde_json::from_slice(&results).unwrap()
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

/// Runs each command under bash with the shims first on PATH, as a child subreaper so that
/// every process a command started has finished (or is killed) before the next one starts.
const DRIVER: &str = r#"
import ctypes, json, os, subprocess, sys, time

root = sys.argv[1]
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
commands = json.load(open(root + "/commands.json"))
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

out = []
for cmd in commands:
    os.makedirs(run, exist_ok=True)
    open(log, "w").close()
    p = subprocess.Popen(["/bin/bash", "-c", cmd], cwd=run, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    timed_out = False
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, 9)
        p.wait()
    deadline = time.time() + 5
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
    out.append({"programs": programs, "timed_out": timed_out})
json.dump(out, open(root + "/results.json", "w"))
"#;

/// Lines (and pairs of lines, and whole files) from this host's shell scripts.
pub fn corpus() -> Vec<String> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [
        "/usr/bin",
        "/usr/sbin",
        "/etc",
        "/etc/init.d",
        "/var/lib/dpkg/info",
    ] {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| is_shell_script(p))
            .collect();
        found.sort();
        files.extend(found);
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for file in files.iter().take(400) {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut candidates: Vec<String> = lines.iter().map(|l| l.trim().to_string()).collect();
        candidates.extend(lines.windows(2).map(|w| w.join("\n")));
        if text.len() < 4000 {
            candidates.push(text.clone());
        }
        for c in candidates {
            if !c.is_empty() && !c.starts_with('#') && seen.insert(c.clone()) {
                out.push(c);
            }
        }
    }
    out
}

fn is_shell_script(path: &Path) -> bool {
    let Ok(meta) = fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() || meta.len() > 200_000 {
        return false;
    }
    let name = path.to_string_lossy();
    if name.ends_with(".postinst")
        || name.ends_with(".preinst")
        || name.ends_with(".postrm")
        || name.ends_with(".prerm")
        || name.ends_with(".sh")
    {
        return true;
    }
    let Ok(bytes) = fs::read(path) else {
        return false;
    };
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).into_owned();
    head.starts_with("#!/bin/sh")
        || head.starts_with("#!/bin/bash")
        || head.starts_with("#! /bin/sh")
}

/// Programs the generated commands run (those present on this host).
fn pool() -> Vec<String> {
    const WANTED: &[&str] = &[
        "touch", "rm", "mkdir", "cp", "mv", "ls", "cat", "grep", "sort", "head", "tail", "wc",
        "date", "id", "uname", "tr", "cut", "seq", "sed", "awk", "basename", "dirname", "stat",
        "du", "tee", "curl", "wget", "chmod", "ln", "md5sum", "od", "uniq", "paste", "rev", "nl",
        "fold", "comm", "join", "expand", "tac",
    ];
    let have = programs_on_path();
    WANTED
        .iter()
        .filter(|n| have.contains(**n))
        .map(|n| n.to_string())
        .collect()
}

/// A small deterministic generator (no dependency, same commands on every run).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() % items.len()]
    }
}

/// Templates where `{}` is a command: wrappers the parser follows and the shell's ways of
/// running a string.
const WRAPPERS: &[&str] = &[
    "timeout 5 {}",
    "timeout --sig=KILL 5 {}",
    "timeout -k1 -sTERM 5 {}",
    "nice -n 1 {}",
    "nice -5 {}",
    "nice --adj=1 {}",
    "env A=1 {}",
    "env -u HOME B=2 {}",
    "env --unset=HOME {}",
    "stdbuf -oL {}",
    "stdbuf -o0 -eL {}",
    "nohup {}",
    "setsid {}",
    "setsid -w {}",
    "setsid --wait {}",
    "flock lockfile {}",
    "flock -x -w 5 lockfile {}",
    "flock lockfile -c '{}'",
    "ionice -c 3 {}",
    "ionice -c3 -t {}",
    "taskset 1 {}",
    "taskset -c 0 {}",
    "chrt 0 {}",
    "chrt -o 0 {}",
    "command {}",
    "exec {}",
    "exec -a other {}",
    "exec -c {}",
    "builtin eval '{}'",
    "eval '{}'",
    "eval {}",
    "trap '{}' EXIT",
    "time {}",
    "time -p {}",
    "xargs {}",
    "xargs -r {}",
    "xargs -0 -n 1 {}",
    "find . -maxdepth 0 -exec {} \\;",
    "find . -maxdepth 0 -exec {} +",
    "find . -maxdepth 0 -execdir {} \\;",
    "bash -c '{}'",
    "sh -c '{}'",
    "bash -ec '{}'",
    "dash -c '{}' name arg",
    "A=1 {}",
    "{fd}>/dev/null {}",
    "2>&1 {}",
    "</dev/null {}",
    "! {}",
    "{}\\\n",
    "\\\n{}",
    "{} #c",
    "\t{}\t",
    "{} 2>/dev/null",
    "{} <<<x",
    "{} <<< \"$(echo)\"",
    "exec 2>/dev/null; {}",
    "({})",
    "{ {}; }",
];

/// Templates where `{0}` and `{1}` are commands.
const PAIRS: &[&str] = &[
    "{0} && {1}",
    "{0}&&{1}",
    "{0} ;{1}",
    "{0}|{1}",
    "{0}\n\n{1}",
    "({0}) | ({1})",
    "{ {0} ; } && {1}",
    "echo $( {0} ) $( {1} )",
    "echo \"$({0})\" '$(rm x)' {1}",
    "echo $({0} <<EOF\nbody\nEOF\n) ; {1}",
    "{0} || {1}",
    "{0}; {1}",
    "{0} | {1}",
    "{0} |& {1}",
    "{0} & {1}",
    "{0}\n{1}",
    "{0} &&\n{1}",
    "echo $({0}) && {1}",
    "echo \"$({0})\"; {1}",
    "echo `{0}` | {1}",
    "{1} <({0})",
    "{1} < <({0})",
    "{1} >({0})",
    "X=$({0}) {1}",
    "X=$({0})\n{1}",
    "{1} \"$(echo \"$({0})\")\"",
    "cat <<EOF $(\n{0}\n)\nbody\nEOF\n{1}",
    "cat <<EOF $(\n{0}\nEOF\n)\n{1}",
    "cat <<EOF <(\n{0}\nEOF\n) && {1}",
    "cat <<A <<B \"$(\n{0}\nA\nB\n)\"; {1}",
    "cat <<EOF `\n{0}\nEOF\n`\n{1}",
    "cat <<EOF $(\n{0}\n{1}\nEOF\n)",
    "cat <<EOF <(\n{0}\n)\nbody\nEOF\n{1}",
    "cat <<EOF `\n{0}\n`\nbody\nEOF\n{1}",
    "cat <<'EOF' $(\n{0}\n)\nbody\nEOF\n{1}",
    "cat <<-EOF $(\n{0}\n)\n\tbody\n\tEOF\n{1}",
    "cat <<A <<B $(\n{0}\n)\na\nA\nb\nB\n{1}",
    "cat <<EOF\n$({0})\nEOF\n{1}",
    "cat <<EOF\n`{0}`\nEOF\n{1}",
    "cat <<EOF\nbody\nEO\\\nF\n{0}\nEOF\n{1}",
    "cat <<\"EOF\"\n$({0})\nEOF\n{1}",
    "cat <<EOF\n\\$({0})\nEOF\n{1}",
    "echo $(cat <<EOF\n$({0})\nEOF\n) && {1}",
    "{0} # comment; rm x\n{1}",
    "{0} \\\n&& {1}",
    "if true; then {0}; fi; {1}",
    "for i in 1; do {0}; done; {1}",
    "f() { {0}; }; f; {1}",
    "echo $((1 + 2)) && {0} && {1}",
    "echo ${X:-$({0})}; {1}",
];

/// Ways to write a command's name.
fn spell(name: &str, rng: &mut Rng) -> String {
    let (head, tail) = name.split_at(1);
    match rng.next() % 8 {
        0 => format!("'{name}'"),
        1 => format!("\"{head}\"{tail}"),
        2 => format!("{head}''{tail}"),
        3 => format!("\\{name}"),
        4 => format!("$'{name}'"),
        _ => name.to_string(),
    }
}

/// Generated commands: the issue's bypasses and compositions of the templates.
pub fn generated() -> Vec<String> {
    let pool = pool();
    assert!(pool.len() >= 10, "too few programs on this host: {pool:?}");
    let mut rng = Rng(9);
    let mut out = Vec::new();
    let simple = |rng: &mut Rng| {
        let name = rng.pick(&pool).clone();
        let args = ["", " x", " -n 1 x", " 'a b'", " \"$HOME\"", " a*", " -- -x"];
        format!("{}{}", spell(&name, rng), rng.pick(&args))
    };
    // Every wrapper around a plain command, and around a pair.
    for w in WRAPPERS {
        let inner = simple(&mut rng);
        out.push(w.replace("{}", &inner));
        let pair = format!("{} && {}", simple(&mut rng), simple(&mut rng));
        if !w.contains('\'') {
            out.push(w.replace("{}", &pair));
        }
    }
    // Every pair template with plain commands and with wrapped ones.
    for p in PAIRS {
        for _ in 0..3 {
            let a = simple(&mut rng);
            let b = simple(&mut rng);
            out.push(p.replace("{0}", &a).replace("{1}", &b));
        }
        let w = rng.pick(WRAPPERS).replace("{}", &simple(&mut rng));
        if !w.contains('\'') {
            out.push(p.replace("{0}", &w).replace("{1}", &simple(&mut rng)));
        }
    }
    // Random nesting: a pair inside a pair inside a wrapper.
    for _ in 0..300 {
        let a = rng
            .pick(PAIRS)
            .replace("{0}", &simple(&mut rng))
            .replace("{1}", &simple(&mut rng));
        let b = rng
            .pick(PAIRS)
            .replace("{0}", &a)
            .replace("{1}", &simple(&mut rng));
        let w = rng.pick(WRAPPERS);
        out.push(if w.contains('\'') {
            b
        } else {
            w.replace("{}", &b)
        });
    }
    out
}
