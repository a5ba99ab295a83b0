//! Properties the permission parser must have on any input, checkable without bash: the
//! oracle of the `shell_parser` fuzz target (`fuzz/`) and of a unit test over generated
//! token soups. The differential test (`tests/tests/parser_differential.rs`) checks the
//! parser against bash itself.
//!
//! For any text: no panic, and the same parts every time. For a script the parser
//! understands:
//! - followed by a newline and one more command, that command is reported after the same
//!   parts (nothing the script left open swallows it); checked when the script opens no
//!   here-document and does not end in a backslash, where bash would swallow it too;
//! - as the single-quoted body of `bash -c --`, it gives the same commands one layer down
//!   (quoting and re-parsing agree), unless that nests too deeply or grows too long.

use super::bash_rules::{Part, split};
use super::read_only::is_read_only;

/// Checks every property on `src`; the error says which failed.
pub fn check(src: &str) -> Result<(), String> {
    let Ok(parts) = split(src) else {
        return Ok(());
    };
    for p in &parts {
        let _ = p.layers();
        let _ = is_read_only(&p.words);
    }
    if split(src).ok().as_ref() != Some(&parts) {
        return Err(format!("{src:?}: two parses differ"));
    }
    if !src.contains("<<") && !src.ends_with('\\') {
        let more = format!("{src}\nzqmark");
        match split(&more) {
            Ok(more_parts) => {
                let mut want = rendered(&parts);
                want.push(("zqmark".to_string(), false));
                if rendered(&more_parts) != want {
                    return Err(format!("{more:?}: the appended command is not reported"));
                }
            }
            Err(e) if !within_limits(&e.reason) => {
                return Err(format!("{more:?}: no longer parses: {e}"));
            }
            Err(_) => {}
        }
    }
    // `--`: a script starting with `-` would otherwise be read as an option by bash.
    let quoted = format!("bash -c -- '{}'", src.replace('\'', r"'\''"));
    match split(&quoted) {
        Ok(inner) if rendered(&inner) != rendered(&parts) => {
            Err(format!("{quoted:?}: other commands than {src:?}"))
        }
        Err(e) if !within_limits(&e.reason) => Err(format!("{quoted:?}: does not parse: {e}")),
        _ => Ok(()),
    }
}

fn rendered(parts: &[Part]) -> Vec<(String, bool)> {
    parts
        .iter()
        .map(|p| (p.rendered(), p.unresolved.is_some()))
        .filter(|(r, _)| !r.is_empty())
        .collect()
}

fn within_limits(reason: &str) -> bool {
    reason.contains("nests too deeply") || reason.contains("longer than")
}

#[cfg(test)]
mod tests {
    use super::check;

    /// Pieces of shell syntax, glued at random (a fixed seed: the same cases every run).
    const TOKENS: &[&str] = &[
        "ls",
        "rm x",
        " ",
        " ",
        "\n",
        ";",
        "&&",
        "||",
        "|",
        "&",
        "(",
        ")",
        "{ ",
        "; }",
        "$(",
        "`",
        "'",
        "\"",
        "\\",
        "#",
        "<<EOF",
        "EOF",
        "<<-E",
        "\tE",
        "<(",
        ">(",
        ">",
        "<",
        "2>&1",
        "$X",
        "${X}",
        "${X:-a}",
        "$((1+2))",
        "x=1",
        "timeout 5",
        "env A=1",
        "bash -c",
        "eval",
        "find . -exec",
        "\\;",
        "xargs",
        "exec -a y",
        "{fd}>f",
        "*",
        "{a,b}",
        "$'a\\n'",
        "!",
        "time",
        "trap",
        "sudo",
        "flock f",
        "sort --co=x",
        "git -C d",
    ];

    #[test]
    fn the_oracle_holds_on_token_soups() {
        let mut state: u64 = 7;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let mut failures = Vec::new();
        let mut understood = 0;
        for _ in 0..20_000 {
            let len = 1 + next() % 12;
            let src: String = (0..len).map(|_| TOKENS[next() % TOKENS.len()]).collect();
            understood += usize::from(crate::permissions::bash_rules::split(&src).is_ok());
            if let Err(e) = check(&src) {
                failures.push(e);
            }
        }
        // Enough of them parse for the properties to be exercised.
        assert!(understood > 2_000, "only {understood} of 20000 parse");
        assert!(
            failures.is_empty(),
            "{}",
            failures[..failures.len().min(20)].join("\n")
        );
    }
}
