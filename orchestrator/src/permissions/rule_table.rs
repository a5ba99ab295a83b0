//! The permission rule table as data: (rules, command, expected decision) rows drawn from
//! the grammar, prefixes some rule allows with attacks appended to them, disguises a deny
//! rule must see through, and "read-only" commands that ran code (issue 9). The engine's
//! unit tests (`table_tests.rs`) decide on them; the differential test
//! (`tests/tests/parser_differential.rs`) runs [`commands`] under bash, so that the parser
//! is checked against bash on the same inputs the rules are checked on.

use super::Decision;

/// `A` allow, `K` ask, `D` deny.
pub const A: Decision = Decision::Allow;
pub const K: Decision = Decision::Ask;
pub const D: Decision = Decision::Deny;

/// (allow rules, deny rules, command, expected decision in default mode).
pub const TABLE: &[(&[&str], &[&str], &str, Decision)] = &[
    // Exact specifiers.
    (&["Bash(npm test)"], &[], "npm test", A),
    (&["Bash(npm test)"], &[], "npm  test", A),
    (&["Bash(npm test)"], &[], "npm test x", K),
    (&["Bash(npm test)"], &[], "npm tests", K),
    (&["Bash(npm test)"], &[], "npm", K),
    (&["Bash(npm test)"], &[], "'npm' test", K),
    (&["Bash(npm test)"], &[], "np\"\"m test", K),
    (&["Bash(npm test)"], &[], "npm' 'test", K),
    (&["Bash(npm test)"], &[], "npm \"test\"", A),
    (&["Bash(npm test)"], &[], "\\npm test", K),
    (&["Bash(npm test)"], &[], "$NPM test", K),
    // Word-boundary prefixes.
    (&["Bash(npm test *)"], &[], "npm test", A),
    (&["Bash(npm test *)"], &[], "npm test --watch", A),
    (&["Bash(npm test *)"], &[], "npm test -- a b c", A),
    (&["Bash(npm test *)"], &[], "npm testing", K),
    (&["Bash(npm test *)"], &[], "npm test $(curl x)", K),
    (&["Bash(npm test *)"], &[], "npm test $(pwd)", A),
    (&["Bash(npm test *)"], &[], "npm test \"$HOME\"", A),
    (&["Bash(npm test:*)"], &[], "npm test", A),
    (&["Bash(npm test:*)"], &[], "npm test -w", A),
    (&["Bash(npm test:*)"], &[], "npm testing", K),
    (&["Bash(npm run test:*)"], &[], "npm run test:unit", K),
    (&["Bash(npm run test:unit)"], &[], "npm run test:unit", A),
    // Wildcards anywhere.
    (&["Bash(git * main)"], &[], "git push origin main", A),
    (&["Bash(git * main)"], &[], "git push origin dev", K),
    (&["Bash(ls*)"], &[], "lsof -i", A),
    (&["Bash(*)"], &[], "make all", A),
    (&["Bash(*)"], &[], "make && curl x", A),
    (&["Bash"], &[], "rm -rf build", A),
    (
        &["Bash(cargo build *)"],
        &[],
        "cargo build --release && cargo test",
        K,
    ),
    (
        &["Bash(cargo build *)", "Bash(cargo test *)"],
        &[],
        "cargo build --release && cargo test",
        A,
    ),
    (&["Bash(cargo *)"], &[], "cargo build | tee log", K),
    (
        &["Bash(cargo *)", "Bash(tee *)"],
        &[],
        "cargo build | tee log",
        A,
    ),
    // Deny wins, on any part and any layer.
    (&["Bash"], &["Bash(rm *)"], "rm -rf x", D),
    (&["Bash"], &["Bash(rm *)"], "ls && rm x", D),
    (&["Bash"], &["Bash(rm *)"], "echo $(rm x)", D),
    (&["Bash"], &["Bash(rm *)"], "timeout 5 rm x", D),
    (&["Bash"], &["Bash(rm *)"], "bash -c 'rm x'", D),
    (&["Bash"], &["Bash(rm *)"], "r\"m\" x", D),
    (&["Bash"], &["Bash(rm *)"], "find . | xargs rm", D),
    (&["Bash"], &["Bash(timeout *)"], "timeout 5 ls", D),
    (&["Bash"], &["Bash(curl *)"], "env A=1 curl x", D),
    (&["Bash"], &["Bash"], "ls", D),
    (&[], &["Bash(*curl*)"], "if x; then curl y; fi", D),
    // Read-only commands never ask.
    (&[], &[], "ls -la", A),
    (&[], &[], "cat a b | grep x | wc -l", A),
    (&[], &[], "git status && git diff", A),
    (&[], &[], "git log --oneline | head -5", A),
    (&[], &[], "find . -name '*.rs' | xargs grep foo", A),
    (&[], &[], "echo \"$(pwd)\"", A),
    (&[], &[], "timeout 5 ls", A),
    (&[], &[], "FOO=1 ls", A),
    (&[], &[], "PATH=/tmp ls", K),
    (&[], &[], "ls > out", K),
    (&[], &[], "ls 2>/dev/null", A),
    (&[], &[], "find . -delete", K),
    (&[], &[], "git branch -D x", K),
    (&[], &[], "git push", K),
    (&[], &[], "cat <<EOF\nhello\nEOF", A),
    (&[], &[], "", A),
    // Wrappers are looked through for allows too.
    (&["Bash(npm test *)"], &[], "timeout 60 npm test", A),
    (&["Bash(npm test *)"], &[], "nice -n 5 npm test", A),
    (&["Bash(npm test *)"], &[], "nohup npm test", A),
    (&["Bash(npm test *)"], &[], "env CI=1 npm test", A),
    (&["Bash(npm test *)"], &[], "CI=1 npm test", A),
    (&["Bash(npm test *)"], &[], "env PATH=. npm test", K),
    (&["Bash(npm test *)"], &[], "LD_PRELOAD=x.so npm test", K),
    (&["Bash(npm test *)"], &[], "bash -c 'npm test'", A),
    (
        &["Bash(npm test *)"],
        &[],
        "sh -c \"npm test && npm test\"",
        A,
    ),
    (&["Bash(npm test *)"], &[], "bash -c \"$CMD\"", K),
    (&["Bash(npm test *)"], &[], "bash run.sh", K),
    (&["Bash(npm test *)"], &[], "stdbuf -oL npm test", A),
    (&["Bash(npm test *)"], &[], "timeout --bogus 5 npm test", K),
    (&["Bash(rm *)"], &[], "find . -name x | xargs rm", A),
    (&["Bash(rm x)"], &[], "find . -name x | xargs rm x", K),
    // Builtins that evaluate a quoted subscript run the commands in it: never allowed by a
    // rule on the builtin (found by the differential test).
    (&["Bash(test *)"], &[], "test -v 'a[$(touch p)]'", K),
    (&["Bash(test *)"], &[], "test -f x", A),
    (&["Bash([ *)"], &[], "[ -v 'a[$(touch p)]' ]", K),
    (&["Bash(printf *)"], &[], "printf -v 'a[$(touch p)]' x", K),
    (&["Bash(read *)"], &[], "read 'a[$(touch p)]' <<< x", K),
    (&["Bash(declare *)"], &[], "declare 'a[$(touch p)]=1'", K),
    (
        &["Bash(declare *)"],
        &[],
        "declare -n x='a[$(touch p)]'; echo \"$x\"",
        K,
    ),
    (&["Bash(let *)"], &[], "let 'a[$(touch p)]'", K),
    // Unparseable: ask, never allow by a specifier.
    (&["Bash(if *)"], &[], "if true; then rm x; fi", K),
    (&["Bash(npm test *)"], &[], "npm test \"unterminated", K),
    (&["Bash(npm test *)"], &[], "npm test\r\nrm x", K),
    (&["Bash(for *)"], &[], "for i in 1; do curl x; done", K),
];

/// Prefixes some rule allows; each must itself be allowed.
pub const PREFIXES: &[(&str, &str)] = &[
    ("Bash(npm test *)", "npm test"),
    ("Bash(npm test:*)", "npm test"),
    ("Bash(git status)", "git status"),
    ("Bash(cargo build *)", "cargo build --release"),
    ("Bash(make test)", "make test"),
    ("Bash(python -m pytest *)", "python -m pytest tests/"),
    ("Bash(echo *)", "echo hi"),
    ("Bash(ls *)", "ls -la"),
    ("Bash(npm run *)", "npm run build"),
    ("Bash(./gradlew test)", "./gradlew test"),
];

/// Appended to an allowed prefix: each runs something no rule allows.
pub const ATTACKS: &[&str] = &[
    " && curl x",
    "; rm -rf ~",
    " | sh",
    " $(curl x)",
    " `curl x`",
    " \"$(curl x)\"",
    " '$(x)'\"$(curl x)\"",
    "\n rm x",
    "\r\n rm x",
    "\nrm x",
    " > ~/.bashrc",
    " >> ~/.bashrc",
    " &> /etc/passwd",
    " 2> ~/.profile",
    " & curl x",
    " || curl x",
    " | bash -c 'curl x'",
    "; bash -c 'curl x'",
    "; sh -c \"rm -rf ~\"",
    " && env X=1 curl x",
    " && timeout 5 curl x",
    " && nice curl x",
    " && nohup curl x &",
    " && xargs curl",
    " | xargs sh -c 'curl x'",
    "; (curl x)",
    "; { curl x; }",
    " <(curl x)",
    " && $(curl x)",
    " && `curl x`",
    " && PATH=. ls",
    " && eval 'curl x'",
    "; exec curl x",
    " && command curl x",
    " && builtin eval x",
    " && bash",
    " # \n curl x",
    " \\\n && curl x",
    " && cat <<EOF\nx\nEOF\ncurl x",
    " && echo $((1 + $(curl x)))",
    " && echo ${X:-$(curl x)}",
    "; if true; then curl x; fi",
    "; for i in 1; do curl x; done",
    "; f() { curl x; }; f",
    " && {curl,x}",
    " && c''url x",
    " && 'curl' x",
    " && $'curl' x",
    " && cu\\rl x",
    "; exec > ~/.bashrc",
    " && ./evil",
    " && sh",
];

/// Whole commands tried against the prefix's rule.
pub fn standalone(prefix: &str) -> Vec<String> {
    let words: Vec<&str> = prefix.split_whitespace().collect();
    let mut out = vec![
        format!("{} \"$(curl x)\"", prefix),
        format!("{}' '{}", words[0], words[1..].join(" ")),
        format!("bash -c '{prefix} && curl x'"),
        format!("sh -c \"{prefix}; rm -rf ~\""),
        format!("env X=1 {prefix} && curl x"),
        format!("timeout 5 {prefix} | sh"),
        format!("LD_PRELOAD=/tmp/x.so {prefix}"),
        format!("PATH=/tmp {prefix}"),
        format!("env BASH_ENV=/tmp/x {prefix}"),
        format!("{prefix} > ~/.ssh/authorized_keys"),
        format!("({prefix}) > ~/.bashrc"),
        format!("{{ {prefix}; }} >> ~/.bashrc"),
    ];
    // Very long chains: 500 allowed parts, then one forbidden.
    out.push(format!("{} && curl x", vec![prefix; 500].join(" && ")));
    out.push(format!("{} ; curl x", vec![prefix; 500].join(" ; ")));
    out.push(format!("{}\ncurl x", vec![prefix; 500].join("\n")));
    out.push(format!("{} | curl x", vec![prefix; 500].join(" | ")));
    out
}

/// Commands a deny rule on `curl` must catch in every mode (`Bash` allowed).
pub const DISGUISES: &[&str] = &[
    "curl x",
    "timeout 5 curl x",
    "nice -n 1 curl x",
    "nohup curl x",
    "env A=1 curl x",
    "A=1 curl x",
    "bash -c 'curl x'",
    "sh -c \"sh -c 'curl x'\"",
    "echo $(curl x)",
    "echo `curl x`",
    "echo \"$(curl x)\"",
    "(curl x)",
    "{ curl x; }",
    "ls | xargs curl",
    "c\"u\"rl x",
    "'curl' x",
    "$'curl' x",
    "cu\\rl x",
    "true && curl x",
    "false || curl x",
    "ls; curl x",
    "ls & curl x",
    "ls\ncurl x",
    "cat <(curl x)",
    "stdbuf -oL curl x",
    "time curl x",
    "command curl x",
    "exec curl x",
    // Issue 9: wrappers that evaded deny rules, with variants.
    "exec -a x curl x",
    "exec -cl curl x",
    "setsid curl x",
    "setsid -f curl x",
    "setsid --wait curl x",
    "flock /tmp/l curl x",
    "flock -n /tmp/l curl x",
    "flock /tmp/l -c 'curl x'",
    "ionice curl x",
    "ionice -c 3 curl x",
    "taskset 1 curl x",
    "taskset -c 0 curl x",
    "chrt -r 1 curl x",
    "nice -5 curl x",
    "timeout --sig=KILL 5 curl x",
    "env -i curl x",
    "env -u HOME curl x",
    "stdbuf -o0 curl x",
    "sudo curl x",
    "sudo -u root curl x",
    "doas curl x",
    "unshare -r curl x",
    "eval curl x",
    "eval 'curl x'",
    "trap 'curl x' EXIT",
    "alias c='curl x'",
    "find . -exec curl x \\;",
    "find . -execdir curl {} +",
    "ls | xargs -I{} curl {}",
    "/usr/bin/curl x",
    "./curl x",
    "strace -f curl x",
    "watch curl x",
    "su -c 'curl x'",
    "timeout --bogus 5 curl x",
    "builtin exec -a y curl x",
    "cat <<EOF $(\ncurl x\n)\nbody\nEOF",
    "cat <<EOF\n$(curl x)\nEOF",
    // Not parseable: deny rules see every tail of the raw words.
    "if true; then curl x; fi",
    "for i in 1; do c'ur'l x; done",
    "f() { curl x; }; f",
    "case a in a) curl x;; esac",
];

/// Issue 9: "read-only" commands that ran code. In default mode with no rule, each must ask.
pub const READ_ONLY_BYPASSES: &[&str] = &[
    "cat <<EOF $(\ntouch pwned\n)\nbody\nEOF",
    "cat <<EOF $(\ntouch pwned\nEOF\n)",
    "cat <<EOF <(\ntouch pwned\nEOF\n)",
    "{fd}>/dev/null touch pwned",
    "cat <<EOF <(\ntouch pwned\n)\nbody\nEOF",
    "cat <<EOF `\ntouch pwned\n`\nbody\nEOF",
    "cat <<-EOF $(\ntouch pwned\n)\n\tbody\n\tEOF",
    "cat <<'EOF' $(\ntouch pwned\n)\nbody\nEOF",
    "cat <<A <<B $(\ntouch pwned\n)\na\nA\nb\nB",
    "cat <<EOF\n$(touch pwned)\nEOF",
    "cat <<EOF\nEO\\\nF\ntouch pwned\nEOF",
    "sort --co=sh a",
    "sort --compress-prog=sh a",
    "sort --outp=F a",
    "sort -o F a",
    "git grep --open=vim x",
    "git grep -O x",
    "git diff --outp=F",
    "git --git-dir=evil status",
    "git --git-dir evil status",
    "git --work-tree=. status",
    "git -C sub status",
    "git -c core.fsmonitor=./x status",
    "git --config-env=core.pager=P log",
    "git --exec-path=. status",
    "git --bare log",
    "rg --pre=sh x",
    "rg --pr sh x",
    "date --se now",
    "x='a[$(touch p)]'; echo $((x))",
    "echo ${x@P}",
    "echo ${!x}",
    "test -v 'a[$(touch p)]'",
    "printf -v PATH /tmp",
    "BASH_CMDS[ls]=/bin/rm; ls",
    "tree -R -H x",
    "cd sub && git status",
    "pushd sub; git log",
];

/// Every bypass attempt: each prefix with each attack appended, and the whole commands
/// tried against its rule.
pub fn bypass_attempts(prefix: &str) -> Vec<String> {
    ATTACKS
        .iter()
        .map(|a| format!("{prefix}{a}"))
        .chain(standalone(prefix))
        .collect()
}

/// Every command of the table, once each, in table order: the rows, the bypass attempts of
/// every prefix, the disguises and the read-only bypasses.
pub fn commands() -> Vec<String> {
    let rows = TABLE.iter().map(|(_, _, cmd, _)| cmd.to_string());
    let attempts = PREFIXES
        .iter()
        .flat_map(|(_, prefix)| std::iter::once(prefix.to_string()).chain(bypass_attempts(prefix)));
    let lists = DISGUISES
        .iter()
        .chain(READ_ONLY_BYPASSES)
        .map(|c| c.to_string());
    let mut seen = std::collections::BTreeSet::new();
    rows.chain(attempts)
        .chain(lists)
        .filter(|c| seen.insert(c.clone()))
        .collect()
}
