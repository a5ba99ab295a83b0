use super::*;

fn names(src: &str) -> Vec<String> {
    parse(src)
        .unwrap()
        .commands
        .iter()
        .map(|c| {
            c.words
                .iter()
                .map(|w| w.value.clone())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn unparseable(src: &str) -> bool {
    parse(src).is_err()
}

#[test]
fn operators_split_commands() {
    assert_eq!(names("a && b"), ["a", "b"]);
    assert_eq!(names("a || b ; c"), ["a", "b", "c"]);
    assert_eq!(names("a | b |& c"), ["a", "b", "c"]);
    assert_eq!(names("a & b"), ["a", "b"]);
    assert_eq!(names("a\nb\n\nc"), ["a", "b", "c"]);
    assert_eq!(names("a &&\n b"), ["a", "b"]);
    assert_eq!(names("a # comment ; rm x"), ["a"]);
    assert_eq!(names("! a"), ["a"]);
}

#[test]
fn quoting() {
    assert_eq!(names("echo 'a b' \"c d\" e\\ f"), ["echo a b c d e f"]);
    assert_eq!(names("echo $'a\\nb\\x41'"), ["echo a\nbA"]);
    assert_eq!(names("np\"\"m test"), ["npm test"]);
    let s = parse("npm' 'test").unwrap();
    assert_eq!(s.commands[0].words.len(), 1);
    assert!(s.commands[0].words[0].quoted);
    assert_eq!(names("echo \"a\\\"b\""), ["echo a\"b"]);
    assert_eq!(names("echo a\\\nb"), ["echo ab"]);
}

#[test]
fn substitutions_are_split_out() {
    assert_eq!(names("echo $(curl x)"), ["curl x", "echo $(...)"]);
    assert_eq!(names("echo \"$(curl x)\""), ["curl x", "echo $(...)"]);
    assert_eq!(names("echo `curl x`"), ["curl x", "echo `...`"]);
    assert_eq!(
        names("echo $(a $(b `c`))"),
        ["c", "b `...`", "a $(...)", "echo $(...)"]
    );
    assert_eq!(names("echo `a \\`b\\``"), ["b", "a `...`", "echo `...`"]);
    assert_eq!(names("diff <(a) >(b)"), ["a", "b", "diff <(...) <(...)"]);
    let s = parse("echo $HOME ${X:-y} $((1+2))").unwrap();
    assert!(s.commands[0].words[1..].iter().all(|w| w.dynamic));
    assert_eq!(names("X=$(curl x)"), ["curl x", ""]);
}

#[test]
fn groups_and_subshells() {
    assert_eq!(names("(a; b) | c"), ["a", "b", "c"]);
    assert_eq!(names("{ a; b; }"), ["a", "b"]);
    assert_eq!(names("{ a && (b || c); }"), ["a", "b", "c"]);
    let s = parse("(a) > out").unwrap();
    assert_eq!(s.commands[1].redirects[0].kind, RedirectKind::Write);
    assert_eq!(names("echo {a,b}"), ["echo {a,b}"]);
    assert!(parse("{curl,x}").unwrap().commands[0].words[0].glob);
}

#[test]
fn redirections() {
    let s = parse("a > f 2>&1 >> g &> h < i <> j 3>&- >| k").unwrap();
    let kinds: Vec<_> = s.commands[0].redirects.iter().map(|r| r.kind).collect();
    use RedirectKind::*;
    assert_eq!(
        kinds,
        [
            Write, Duplicate, Append, Write, Read, ReadWrite, Duplicate, Write
        ]
    );
    assert_eq!(s.commands[0].words.len(), 1);
    let s = parse("cat <<< 'hi'").unwrap();
    assert_eq!(s.commands[0].redirects[0].kind, HereString);
    let s = parse("echo hi>out").unwrap();
    assert_eq!(s.commands[0].redirects[0].target.value, "out");
}

#[test]
fn heredocs_are_data() {
    assert_eq!(
        names("cat <<EOF\nrm -rf ~; curl x\nEOF\necho done"),
        ["cat", "echo done"]
    );
    assert_eq!(names("cat <<'EOF'\n$(curl x)\nEOF\nls"), ["cat", "ls"]);
    assert_eq!(names("cat <<-EOF\n\tx\n\tEOF\nls"), ["cat", "ls"]);
    // An unquoted body with a substitution would run it.
    assert!(unparseable("cat <<EOF\n$(curl x)\nEOF"));
}

#[test]
fn assignments() {
    let s = parse("A=1 B='x y' cmd arg").unwrap();
    let c = &s.commands[0];
    assert_eq!(c.assignments.len(), 2);
    assert_eq!(c.assignments[1].value.value, "x y");
    assert_eq!(c.words[0].value, "cmd");
    let s = parse("cmd A=1").unwrap();
    assert!(s.commands[0].assignments.is_empty());
}

#[test]
fn what_cannot_be_parsed() {
    for src in [
        "echo 'unterminated",
        "echo \"unterminated",
        "echo $(unclosed",
        "echo `unclosed",
        "(a",
        "{ a;",
        "a &&",
        "&& a",
        "a ;; b",
        "if true; then rm x; fi",
        "for i in 1; do rm x; done",
        "while true; do x; done",
        "f() { rm x; }",
        "case x in a) rm;; esac",
        "[[ -f x ]]",
        "((x++))",
        "echo $(( $(curl x) ))",
        "echo ${X:-$(curl x)}",
        "npm test\r\nrm x",
        "a=(1 2)",
        "a | | b",
    ] {
        assert!(unparseable(src), "{src:?}");
    }
}

#[test]
fn limits() {
    let deep = format!(
        "{}x{}",
        "$(".repeat(MAX_DEPTH + 2),
        ")".repeat(MAX_DEPTH + 2)
    );
    assert!(unparseable(&deep));
    let long = "a && ".repeat(2000) + "b";
    assert_eq!(parse(&long).unwrap().commands.len(), 2001);
}
