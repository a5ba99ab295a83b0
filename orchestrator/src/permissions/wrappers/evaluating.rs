//! Builtins that evaluate an argument as arithmetic or as a variable name with an array
//! subscript, and so run the command substitutions inside it: `test -v 'a[$(cmd)]'`,
//! `printf -v 'a[$(cmd)]' x`, `read 'a[$(cmd)]'`, `declare 'a[$(cmd)]=1'`, `let
//! 'a[$(cmd)]'`, `declare -n x='a[$(cmd)]'` (every later `$x`), `declare -i x` (every later
//! assignment to `x`). The code is in a quoted word the parser reads as data, so such a
//! form is unresolved: no allow rule may pass it, and deny rules see every tail.
//!
//! Found by the differential test (`tests/tests/parser_differential.rs`): bash started the
//! `touch` of `test -v 'a[$(touch p)]'`, which the parser reported as `test` alone.

use super::{Layer, Read};
use crate::permissions::shell::Word;

/// Reads the layer of the builtin `name` (its words in `words`, the name first).
pub(super) fn check(name: &str, words: &[Word]) -> Read {
    let args = &words[1..];
    let found = match name {
        "test" | "[" => option_then_name(args, |o| matches!(o, "-v" | "-R")),
        "printf" => printf(args),
        "wait" => option_then_name(args, |o| o == "-p"),
        "read" | "unset" => args.iter().find(|w| may_subscript(w)),
        "declare" | "typeset" | "local" | "readonly" | "export" => declaration(args),
        "let" => args.first(),
        _ => None,
    };
    match found {
        Some(w) => Err(format!(
            "evaluates `{}` as arithmetic or an array subscript, which can run commands",
            w.value
        )),
        None => Ok(Layer::Plain),
    }
}

/// Whether a word may hold an array subscript: computed, or containing `[`.
fn may_subscript(w: &Word) -> bool {
    w.literal().is_none_or(|v| v.contains('['))
}

/// A word that is (or, computed, may be) an option accepted by `is_option`, followed by one
/// that may hold a subscript: the option's operand is evaluated as a name.
fn option_then_name(args: &[Word], is_option: impl Fn(&str) -> bool) -> Option<&Word> {
    args.windows(2)
        .find(|pair| pair[0].literal().is_none_or(&is_option) && may_subscript(&pair[1]))
        .map(|pair| &pair[1])
}

/// `printf -v NAME` (also `-vNAME`): NAME is assigned, its subscript evaluated.
fn printf(args: &[Word]) -> Option<&Word> {
    if let Some(w) = args.first().filter(|w| {
        w.literal()
            .is_some_and(|v| v.starts_with("-v") && v.contains('['))
    }) {
        return Some(w);
    }
    option_then_name(args, |o| o == "-v")
}

/// `declare`, `typeset`, `local`, `readonly`, `export`: a name with a subscript, a computed
/// name, a compound or nameref value holding one, or the integer and nameref attributes,
/// which make later assignments and expansions evaluate values.
fn declaration(args: &[Word]) -> Option<&Word> {
    args.iter().find(|w| match w.literal() {
        Some(v) if v.starts_with(['-', '+']) => v[1..].contains(['i', 'n']),
        Some(v) => v.contains('['),
        None => w
            .value
            .split('=')
            .next()
            .is_none_or(|n| n.contains(['$', '`'])),
    })
}
