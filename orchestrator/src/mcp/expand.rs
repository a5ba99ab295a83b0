//! `${VAR}` and `${VAR:-default}` in MCP server configurations, as Claude Code expands
//! them in `.mcp.json`: in `command`, `args`, `env`, `url` and `headers`. A variable that is
//! unset and has no default is an error naming it (the server is not started with a hole
//! in its command line).

/// Expands every `${...}` in `text` with `lookup`; the error lists the missing names.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, Vec<String>> {
    let mut out = String::with_capacity(text.len());
    let mut missing = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // An unclosed `${` is kept as written.
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => missing.push(name.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_and_defaults_expand() {
        assert_eq!(expand("${HOME}/bin", &env).unwrap(), "/home/u/bin");
        assert_eq!(expand("${PORT:-8080}", &env).unwrap(), "8080");
        assert_eq!(expand("${HOME:-/x}", &env).unwrap(), "/home/u");
        assert_eq!(expand("a${EMPTY}b", &env).unwrap(), "ab");
        assert_eq!(expand("no vars $HOME", &env).unwrap(), "no vars $HOME");
        assert_eq!(expand("open ${HOME", &env).unwrap(), "open ${HOME");
    }

    #[test]
    fn a_missing_variable_without_default_is_named() {
        assert_eq!(
            expand("${A}-${HOME}-${B}", &env),
            Err(vec!["A".to_string(), "B".to_string()])
        );
    }
}
