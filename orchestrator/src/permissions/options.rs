//! Command-line options read the way GNU `getopt_long` reads them, for the permission checks
//! that must know which option a word really is.
//!
//! Two uses:
//! - [`OptionSpec::parse`] walks a wrapper's options (`timeout -s KILL 5 rm x`) with the
//!   wrapper's complete option table, so it finds the wrapped command exactly: short options
//!   cluster (`-fw`), a short option's value may be attached (`-sKILL`), a long option may be
//!   abbreviated to any unambiguous prefix (`--sig=KILL`) and takes its value after `=` or as
//!   the next word. Anything else (an unknown or ambiguous option, a computed word where an
//!   option may be) is an error, and the caller treats the command as not understood.
//! - [`long_option_is`] tells whether a word may name one of a few long options (by exact
//!   name or by abbreviation), for the read-only table, which lists only the options it
//!   forbids. Security: without the program's full table an abbreviation cannot be proven
//!   unambiguous, so every prefix of a forbidden option counts as that option (`sort --co`
//!   is `--compress-program`, even though getopt would call it ambiguous). This can only
//!   make a command ask, never allow one.

use super::shell::Word;

/// A program's options, as its `getopt_long` call declares them.
#[derive(Debug, Clone, Copy, Default)]
pub struct OptionSpec {
    /// Short options without a value.
    pub short_flags: &'static str,
    /// Short options with a value (`-n 5`, `-n5`).
    pub short_values: &'static str,
    /// Short options with an optional value, attached only (`-i{}`).
    pub short_optional: &'static str,
    /// Long options without a value.
    pub long_flags: &'static [&'static str],
    /// Long options with a value (`--signal KILL`, `--signal=KILL`).
    pub long_values: &'static [&'static str],
    /// Long options with an optional value, after `=` only (`--mount=/x`).
    pub long_optional: &'static [&'static str],
}

/// The options found, as `-x` or `--name` (the full name, abbreviations resolved), with
/// their values (`None` without one; a computed value reads as its source text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub options: Vec<(String, Option<String>)>,
    /// Index of the first operand (the wrapped command, or the wrapper's own operands).
    pub rest: usize,
}

impl Parsed {
    /// Whether any of `names` (`-p`, `--pid`) was given.
    pub fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(o, _)| names.contains(&o.as_str()))
    }

    /// The value of the last of `names` given.
    pub fn value(&self, names: &[&str]) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(o, _)| names.contains(&o.as_str()))
            .and_then(|(_, v)| v.as_deref())
    }
}

impl OptionSpec {
    /// Parses options from `words[start..]` up to the first operand (getopt's
    /// REQUIRE_ORDER, the `+` that every wrapper here puts in its option string) or `--`.
    pub fn parse(&self, words: &[Word], start: usize) -> Result<Parsed, String> {
        let mut out = Parsed::default();
        let mut i = start;
        while let Some(word) = words.get(i) {
            let Some(arg) = word.literal() else {
                return Err(format!(
                    "`{}` is computed where an option may stand",
                    word.value
                ));
            };
            if arg == "--" {
                i += 1;
                break;
            }
            if !arg.starts_with('-') || arg == "-" {
                break;
            }
            i += 1;
            if let Some(long) = arg.strip_prefix("--") {
                i = self.long(long, words, i, &mut out)?;
            } else {
                i = self.short(&arg[1..], words, i, &mut out)?;
            }
        }
        out.rest = i;
        Ok(out)
    }

    /// One `--name[=value]`; returns the index after it (and its value word).
    fn long(&self, arg: &str, words: &[Word], i: usize, out: &mut Parsed) -> Result<usize, String> {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg, None),
        };
        let all = || {
            self.long_flags
                .iter()
                .chain(self.long_values)
                .chain(self.long_optional)
        };
        let full = match all().find(|o| **o == name) {
            Some(exact) => *exact,
            None => {
                let mut hits = all().filter(|o| !name.is_empty() && o.starts_with(name));
                match (hits.next(), hits.next()) {
                    (Some(one), None) => *one,
                    (Some(_), Some(_)) => return Err(format!("`--{name}` is ambiguous")),
                    (None, _) => return Err(format!("`--{name}` is not an option it has")),
                }
            }
        };
        let key = format!("--{full}");
        if self.long_values.contains(&full) {
            if inline.is_some() {
                out.options.push((key, inline));
                return Ok(i);
            }
            let value = words
                .get(i)
                .ok_or_else(|| format!("`--{full}` lacks its value"))?;
            out.options.push((key, Some(value.value.clone())));
            return Ok(i + 1);
        }
        if self.long_flags.contains(&full) && inline.is_some() {
            return Err(format!("`--{full}` takes no value"));
        }
        out.options.push((key, inline));
        Ok(i)
    }

    /// One cluster of short options (`fw`, `sKILL`); returns the index after it.
    fn short(
        &self,
        cluster: &str,
        words: &[Word],
        i: usize,
        out: &mut Parsed,
    ) -> Result<usize, String> {
        for (at, c) in cluster.char_indices() {
            let key = format!("-{c}");
            let attached = &cluster[at + c.len_utf8()..];
            if self.short_flags.contains(c) {
                out.options.push((key, None));
            } else if self.short_values.contains(c) {
                if !attached.is_empty() {
                    out.options.push((key, Some(attached.to_string())));
                    return Ok(i);
                }
                let value = words
                    .get(i)
                    .ok_or_else(|| format!("`-{c}` lacks its value"))?;
                out.options.push((key, Some(value.value.clone())));
                return Ok(i + 1);
            } else if self.short_optional.contains(c) {
                let value = (!attached.is_empty()).then(|| attached.to_string());
                out.options.push((key, value));
                return Ok(i);
            } else {
                return Err(format!("`-{c}` is not an option it has"));
            }
        }
        Ok(i)
    }
}

/// Whether `arg` may be one of the long options `names` (given without `--`): the exact
/// name or any prefix of it, with or without `=value`. See the module docs for why every
/// prefix counts.
pub fn long_option_is(arg: &str, names: &[&str]) -> bool {
    let Some(long) = arg.strip_prefix("--") else {
        return false;
    };
    if long.is_empty() {
        return false;
    }
    // `--=x` abbreviates every option (getopt calls it ambiguous): counted as forbidden.
    let name = long.split_once('=').map_or(long, |(n, _)| n);
    names.iter().any(|n| n.starts_with(name))
}

/// Whether `arg` is a cluster of short options (`-ro`) that contains `letter`.
pub fn short_cluster_has(arg: &str, letter: char) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(letter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::shell::parse;

    const TIMEOUT: OptionSpec = OptionSpec {
        short_flags: "v",
        short_values: "ks",
        short_optional: "",
        long_flags: &["foreground", "preserve-status", "verbose"],
        long_values: &["kill-after", "signal"],
        long_optional: &[],
    };

    fn opts(cmd: &str) -> Result<Parsed, String> {
        let words = parse(cmd).unwrap().commands.remove(0).words;
        TIMEOUT.parse(&words, 1)
    }

    #[test]
    fn reads_options_as_getopt_long_does() {
        let p = opts("timeout --sig=KILL -vk5 --fore 5 rm").unwrap();
        assert_eq!(p.rest, 4);
        assert_eq!(p.value(&["-s", "--signal"]), Some("KILL"));
        assert_eq!(p.value(&["-k", "--kill-after"]), Some("5"));
        assert!(p.has(&["--foreground"]) && p.has(&["-v"]));
        assert_eq!(opts("timeout -s KILL -- 5 rm").unwrap().rest, 4);
        assert_eq!(opts("timeout --signal KILL 5").unwrap().rest, 3);
    }

    #[test]
    fn refuses_what_it_cannot_place() {
        for cmd in [
            "timeout --bogus 5 rm",
            "timeout -x 5 rm",
            "timeout --verbose=1 5 rm",
            "timeout $OPT 5 rm",
            "timeout -s",
            "timeout --=x 5 rm",
        ] {
            assert!(opts(cmd).is_err(), "{cmd}");
        }
    }

    #[test]
    fn forbidden_long_options_match_every_abbreviation() {
        let forbidden = ["compress-program", "output"];
        for arg in [
            "--co=sh",
            "--c",
            "--compress-prog",
            "--outp=F",
            "--o",
            "--output",
            "--=x",
        ] {
            assert!(long_option_is(arg, &forbidden), "{arg}");
        }
        for arg in ["--", "-o", "--check", "--output-x", "output"] {
            assert!(!long_option_is(arg, &forbidden), "{arg}");
        }
    }
}
