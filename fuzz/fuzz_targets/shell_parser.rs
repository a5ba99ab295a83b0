//! Feeds arbitrary text to the permission parser (`bash_rules::split`, which runs the shell
//! parser and looks through wrappers), as a hostile model's Bash command would be.
//!
//! Oracle, cheap and without bash:
//! - no panic, no hang, bounded work (the parser caps length and nesting);
//! - the same text always gives the same parts;
//! - for a script the parser understands: followed by a newline and one more command, that
//!   command is reported after the same parts (nothing the script left open swallows it;
//!   checked when the script opens no here-document and does not end in a backslash,
//!   where bash would indeed swallow it);
//! - the same script as the body of `bash -c '...'` gives the same commands one layer down
//!   (quoting and re-parsing agree), unless it then nests too deeply or grows too long.
#![no_main]

use cordon::permissions::bash_rules::{Part, split};
use cordon::permissions::read_only::is_read_only;
use libfuzzer_sys::fuzz_target;

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

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parts) = split(src) else {
        return;
    };
    for p in &parts {
        let _ = p.layers();
        let _ = is_read_only(&p.words);
    }
    assert_eq!(split(src).ok().as_ref(), Some(&parts), "not deterministic");

    if !src.contains("<<") && !src.ends_with('\\') {
        let more = format!("{src}\nzqmark");
        match split(&more) {
            Ok(more_parts) => {
                let mut want = rendered(&parts);
                want.push(("zqmark".to_string(), false));
                assert_eq!(rendered(&more_parts), want, "{more:?}");
            }
            Err(e) => assert!(within_limits(&e.reason), "{more:?}: {e}"),
        }
    }

    let quoted = format!("bash -c '{}'", src.replace('\'', r"'\''"));
    match split(&quoted) {
        Ok(inner) => assert_eq!(rendered(&inner), rendered(&parts), "{quoted:?}"),
        Err(e) => assert!(within_limits(&e.reason), "{quoted:?}: {e}"),
    }
});
