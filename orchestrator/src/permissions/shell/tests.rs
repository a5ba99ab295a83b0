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
    // `{fd}>file cmd` allocates a descriptor: `cmd` is the command (bash runs it).
    assert_eq!(names("{fd}>/dev/null touch p"), ["touch p"]);
    assert_eq!(names("{fd}<&0 touch p"), ["touch p"]);
    assert_eq!(names("touch p {fd}>x"), ["touch p"]);
    assert_eq!(names("echo {fd} >x"), ["echo {fd}"]);
    assert_eq!(names("diff {a}<(ls)"), ["ls", "diff {a} <(...)"]);
}

#[test]
fn heredocs_are_data() {
    assert_eq!(
        names("cat <<EOF\nrm -rf ~; curl x\nEOF\necho done"),
        ["cat", "echo done"]
    );
    assert_eq!(names("cat <<'EOF'\n$(curl x)\nEOF\nls"), ["cat", "ls"]);
    assert_eq!(names("cat <<-EOF\n\tx\n\tEOF\nls"), ["cat", "ls"]);
    // An unquoted body is expanded: its substitutions run, so they are commands.
    assert_eq!(
        names("cat <<EOF\n$(curl x) `wget y`\nEOF"),
        ["cat", "curl x", "wget y"]
    );
    assert_eq!(names("cat <<EOF\n\\$(curl x)\nEOF"), ["cat"]);
    assert_eq!(names("cat <<EOF\n'$(curl x)'\nEOF"), ["cat", "curl x"]);
    assert!(unparseable("cat <<EOF\n$((x))\nEOF"));
}

/// Issue 9: a here-document opened before a multi-line substitution hid the substitution's
/// commands (bash reads the body after the line the *outer* command ends on).
#[test]
fn heredoc_bodies_belong_to_the_level_that_opened_them() {
    let cases: &[(&str, &[&str])] = &[
        (
            "cat <<EOF $(\ntouch pwned\n)\nbody\nEOF",
            &["touch pwned", "cat $(...)"],
        ),
        (
            "cat <<EOF <(\ntouch pwned\n)\nbody\nEOF",
            &["touch pwned", "cat <(...)"],
        ),
        (
            "cat <<EOF >(\ntouch pwned\n)\nbody\nEOF",
            &["touch pwned", "cat <(...)"],
        ),
        (
            "cat <<EOF `\ntouch pwned\n`\nbody\nEOF",
            &["touch pwned", "cat `...`"],
        ),
        (
            "cat <<-EOF $(\ntouch pwned\n)\n\tbody\n\tEOF",
            &["touch pwned", "cat $(...)"],
        ),
        (
            "cat <<'EOF' $(\ntouch pwned\n)\nbody\nEOF",
            &["touch pwned", "cat $(...)"],
        ),
        (
            "cat <<\"EOF\" \"$(\ntouch pwned\n)\"\nbody\nEOF",
            &["touch pwned", "cat $(...)"],
        ),
        (
            "cat <<A <<B $(\ntouch one\n) $(\ntouch two\n)\na\nA\nb\nB\nls",
            &["touch one", "touch two", "cat $(...) $(...)", "ls"],
        ),
        (
            "cat <<A $(\ncat <<B\ninner\nB\ntouch two\n)\nouter\nA\nls",
            &["cat", "touch two", "cat $(...)", "ls"],
        ),
        (
            "echo \"$(cat <<EOF\nx\nEOF\n)\" <<Z\nz\nZ\nls",
            &["cat", "echo $(...)", "ls"],
        ),
        ("(cat <<EOF\nrm x\nEOF\n) && ls", &["cat", "ls"]),
        ("{ cat <<EOF\nrm x\nEOF\n} && ls", &["cat", "ls"]),
    ];
    for (src, want) in cases {
        assert_eq!(names(src), *want, "{src:?}");
    }
    // A here-document that does not end inside its own substitution.
    assert!(unparseable("echo $(cat <<EOF)\nbody\nEOF"));
    assert!(unparseable("echo <(cat <<EOF)\nbody\nEOF"));
}

/// In an unquoted body, backslash-newline joins lines before the delimiter is compared
/// (`EO\` newline `F` ends the body), as in bash; in a quoted body it does not.
#[test]
fn heredoc_line_continuations() {
    assert_eq!(
        names("cat <<EOF\nbody\nEO\\\nF\ntouch p\nEOF"),
        ["cat", "touch p", "EOF"]
    );
    assert_eq!(
        names("cat <<EOF\nbody\\\\\nEOF\ntouch p"),
        ["cat", "touch p"]
    );
    assert_eq!(
        names("cat <<'EOF'\nEO\\\nF\ntouch p\nEOF\nls"),
        ["cat", "ls"]
    );
}

/// bash evaluates variable values as arithmetic in these forms, and arithmetic runs the
/// `$(...)` in an array subscript of the value: refused unless made of constants.
#[test]
fn expansions_that_evaluate_values() {
    for src in [
        "echo $((x))",
        "echo $((x+1))",
        "echo $(($1))",
        "echo $[x]",
        "echo ${s:x}",
        "echo ${s:0:n}",
        "echo ${a[i]}",
        "echo ${!x}",
        "echo ${x@P}",
        "echo \"${x@P}\"",
        "echo ${x:-${!y}}",
        "a[0]=1",
        "BASH_CMDS[ls]=/bin/rm ls",
        "x=1 a[$(id)]=2 ls",
    ] {
        assert!(unparseable(src), "{src:?}");
    }
    for src in [
        "echo $((1 + 2 * 0x1f - 16#ff))",
        "echo $[1+1]",
        "echo ${s:1:2} ${s: -1} ${a[0]} ${a[@]} ${#a[@]} ${!pre*} ${!a[@]}",
        "echo ${x:-d} ${x#p} ${x/a/b} ${x@Q} ${#x} ${#}",
        "echo a[0]=1",
    ] {
        assert!(parse(src).is_ok(), "{src:?}");
    }
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
