//! The differential test's inputs: generated commands and the corpus from real scripts.
//! The runner and the oracle are in `cordon_tests::differential` (the fuzz target
//! `shell_parser_bash` uses them too).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use cordon_tests::differential::programs_on_path;

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

/// Generated commands: the bypasses and compositions of the templates.
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
