//! The one way Cordon runs git on the host.
//!
//! Everything a session wrote is untrusted data for the host, and git is a program that
//! runs programs named in its configuration (`core.fsmonitor`, hooks, filter drivers, the
//! pager, the editor, `core.sshCommand`, credential helpers...). So every git process Cordon
//! starts outside a sandbox is built by [`command`]: a cleared environment, no system or
//! global configuration, and command-line settings that switch off each configurable
//! program git could reach in the commands Cordon runs. What remains readable from a
//! repository's own configuration is then neutralised by the caller, which never points
//! git at an untrusted repository's configuration at all: the checkpoint store is Cordon's
//! own bare repository, and the orchestrator reads a workspace's status through a private
//! shadow git dir (`orchestrator::hostgit`). The launcher only asks git to *parse* a
//! configuration text fed on stdin ([`list_config`]), which runs nothing.
//!
//! A test (`orchestrator::hostgit`'s `no_other_git_commands`) fails when any other source
//! file of the workspace builds a `git` command.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where HOME and XDG_CONFIG_HOME point: a path that does not exist, so no user
/// configuration (`~/.gitconfig`, `~/.config/git/*`) is found.
pub const NO_HOME: &str = "/nonexistent/cordon-hostgit";

/// Settings passed with `-c` (command scope, which wins over every file). Each one turns
/// off a program git could start or a side effect of a read-only query.
pub const OVERRIDES: &[&str] = &[
    // Hooks run on commit, checkout, merge, gc...: none, from any directory.
    "core.hooksPath=/dev/null",
    // The fsmonitor hook runs on every status; the daemon is a long-lived helper.
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    // Programs git hands text or terminals to.
    "core.pager=cat",
    "core.editor=false",
    "sequence.editor=false",
    "core.askPass=false",
    "core.sshCommand=false",
    "core.gitProxy=false",
    "core.alternateRefsCommand=false",
    // An empty value resets the list of credential helpers.
    "credential.helper=",
    "gpg.program=false",
    // No transport at all: Cordon never fetches or pushes on the host.
    "protocol.allow=never",
    // No attribute files outside the repository; no background work.
    "core.attributesFile=/dev/null",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
];

/// Environment variables set on every host git. The environment is cleared first, so
/// `GIT_DIR`, `GIT_COMMON_DIR`, `GIT_CONFIG_*`, `GIT_EXEC_PATH`, `GIT_SSH*`, `GIT_EXTERNAL_DIFF`,
/// `GIT_PAGER`, `LD_PRELOAD` and the like from Cordon's own environment never reach it.
pub const ENV: &[(&str, &str)] = &[
    ("HOME", NO_HOME),
    ("XDG_CONFIG_HOME", NO_HOME),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_SYSTEM", "/dev/null"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_PROTOCOL_FROM_USER", "0"),
    // Environment variables win over configuration for these programs.
    ("GIT_EDITOR", "false"),
    ("GIT_SEQUENCE_EDITOR", "false"),
    ("GIT_SSH_COMMAND", "false"),
    ("GIT_ASKPASS", "false"),
    ("GIT_PAGER", "cat"),
    ("LC_ALL", "C"),
];

/// A `git` command with the hardening above: cleared environment, the settings of [`ENV`]
/// and [`OVERRIDES`], `--no-pager` and `--no-optional-locks`, stdin closed. Callers add
/// their git dir, work tree and arguments; they must not point it at an untrusted
/// repository's own configuration (see the module docs).
///
/// `untrusted` is the tree a session could write (the workspace): the user's `PATH` is kept
/// without its relative entries and without any entry inside that tree, and `git` is looked
/// up in what remains, so a `bin/git` a session planted in a workspace that is on the
/// user's `PATH` is never what runs.
pub fn command(untrusted: &Path) -> Command {
    let path = safe_path(std::env::var_os("PATH").as_deref(), untrusted);
    let mut cmd = Command::new(find_git(&path));
    cmd.env_clear();
    if let Ok(joined) = std::env::join_paths(&path) {
        cmd.env("PATH", joined);
    }
    cmd.envs(ENV.iter().copied());
    cmd.args(["--no-pager", "--no-optional-locks"]);
    for setting in OVERRIDES {
        cmd.arg("-c").arg(setting);
    }
    cmd.current_dir("/").stdin(Stdio::null());
    cmd
}

/// The entries of `path` that are absolute and lie outside `untrusted` (compared after
/// resolving links too, so an entry linking into the workspace is dropped as well).
pub fn safe_path(path: Option<&std::ffi::OsStr>, untrusted: &Path) -> Vec<PathBuf> {
    let real_untrusted =
        std::fs::canonicalize(untrusted).unwrap_or_else(|_| untrusted.to_path_buf());
    let Some(path) = path else {
        return Vec::new();
    };
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute() && !dir.starts_with(untrusted))
        .filter(|dir| {
            let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            !real.starts_with(&real_untrusted)
        })
        .collect()
}

/// The first executable `git` in `dirs`; plain `git` (which then fails to start with a
/// clear error if the cleared `PATH` has none) when there is none.
pub fn find_git(dirs: &[PathBuf]) -> PathBuf {
    dirs.iter()
        .map(|dir| dir.join("git"))
        .find(|git| is_executable(git))
        .unwrap_or_else(|| PathBuf::from("git"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// One entry of a git configuration file, as git itself parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Lower-cased section name (`core`, `remote`, `includeif`).
    pub section: String,
    /// The subsection exactly as written (`origin`, `gitdir:~/work/`), if any.
    pub subsection: Option<String>,
    /// Lower-cased variable name (`hookspath`).
    pub name: String,
    /// `None` for a bare `name` line (boolean true).
    pub value: Option<String>,
}

impl ConfigEntry {
    /// Whether this is `section.name` (both lower-case), whatever the subsection.
    pub fn is(&self, section: &str, name: &str) -> bool {
        self.section == section && self.name == name
    }
}

/// Why asking git failed.
#[derive(Debug, thiserror::Error)]
pub enum HostGitError {
    #[error("running git: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("git refused the configuration: {0}")]
    Parse(String),
}

/// The largest configuration text [`list_config`] accepts.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// Parses a configuration text with git's own parser (so what Cordon sees is exactly what
/// git would see), without following includes: `git config --file - --list -z
/// --no-includes`, the text on stdin. Parsing runs nothing, whatever the text says.
/// `untrusted` as for [`command`].
pub fn list_config(text: &[u8], untrusted: &Path) -> Result<Vec<ConfigEntry>, HostGitError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(HostGitError::Parse(format!(
            "larger than {MAX_CONFIG_BYTES} bytes"
        )));
    }
    let mut cmd = command(untrusted);
    cmd.args(["config", "--file", "-", "--list", "-z", "--no-includes"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(HostGitError::Spawn)?;
    if let Some(mut stdin) = child.stdin.take() {
        // At most 1 MiB; git reads all of stdin before it writes anything.
        stdin.write_all(text).map_err(HostGitError::Spawn)?;
    }
    let out = child.wait_with_output().map_err(HostGitError::Spawn)?;
    if !out.status.success() {
        return Err(HostGitError::Parse(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(parse_listing(&out.stdout))
}

/// Splits `git config --list -z` output: `key\nvalue\0` or `key\0` per entry, the key
/// `section[.subsection].name` with section and name lower-cased by git.
pub fn parse_listing(out: &[u8]) -> Vec<ConfigEntry> {
    out.split(|b| *b == 0)
        .filter(|rec| !rec.is_empty())
        .filter_map(|rec| {
            let rec = String::from_utf8_lossy(rec);
            let (key, value) = match rec.split_once('\n') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (rec.to_string(), None),
            };
            let (section, rest) = key.split_once('.')?;
            let (subsection, name) = match rest.rsplit_once('.') {
                Some((sub, name)) => (Some(sub.to_string()), name.to_string()),
                None => (None, rest.to_string()),
            };
            Some(ConfigEntry {
                section: section.to_string(),
                subsection,
                name,
                value,
            })
        })
        .collect()
}

/// Writes entries back as a configuration text git reads as the same entries: every
/// value quoted with `\`, `"`, newline, tab and backspace escaped.
pub fn render_config(entries: &[ConfigEntry]) -> String {
    let mut out = String::new();
    let mut current: Option<(&str, Option<&str>)> = None;
    for e in entries {
        let head = (e.section.as_str(), e.subsection.as_deref());
        if current != Some(head) {
            match &e.subsection {
                Some(sub) => out.push_str(&format!("[{} \"{}\"]\n", e.section, escape(sub))),
                None => out.push_str(&format!("[{}]\n", e.section)),
            }
            current = Some(head);
        }
        match &e.value {
            Some(v) => out.push_str(&format!("\t{} = \"{}\"\n", e.name, escape(v))),
            None => out.push_str(&format!("\t{}\n", e.name)),
        }
    }
    out
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_planted_on_the_path_inside_the_workspace_is_not_used() {
        let ws = tempfile::tempdir().unwrap();
        let bin = ws.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let fake = bin.join("git");
        std::fs::write(&fake, "#!/bin/sh\necho planted\n").unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let link = elsewhere.path().join("link-to-bin");
        std::os::unix::fs::symlink(&bin, &link).unwrap();
        let mut dirs = vec![
            bin.clone(),
            link.clone(),
            PathBuf::from("."),
            "rel/bin".into(),
        ];
        dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap()));
        let joined = std::env::join_paths(&dirs).unwrap();
        let safe = safe_path(Some(&joined), ws.path());
        for bad in [&bin, &link, &PathBuf::from("."), &PathBuf::from("rel/bin")] {
            assert!(!safe.contains(bad), "{bad:?} kept");
        }
        let git = find_git(&safe);
        assert_ne!(git, fake);
        assert!(git.is_absolute(), "the host's own git is found: {git:?}");
    }

    #[test]
    fn git_parses_what_git_would_read() {
        let text = b"[core]\n\thooksPath = \"a b\\\"c\" ; note\n[include]\npath=../x\n\
                     [includeIf \"gitdir:~/w/\"]\n  path = y\n[remote \"o.r\"]\n url = \\\n z\n\
                     [Core]\nbare\n";
        let got = list_config(text, Path::new("/nonexistent")).unwrap();
        let find = |s: &str, n: &str| got.iter().find(|e| e.is(s, n)).unwrap();
        assert_eq!(find("core", "hookspath").value.as_deref(), Some("a b\"c"));
        assert_eq!(find("include", "path").value.as_deref(), Some("../x"));
        let inc = find("includeif", "path");
        assert_eq!(inc.subsection.as_deref(), Some("gitdir:~/w/"));
        let remote = find("remote", "url");
        assert_eq!(remote.subsection.as_deref(), Some("o.r"));
        assert_eq!(remote.value.as_deref(), Some("z"));
        assert_eq!(find("core", "bare").value, None);
    }

    #[test]
    fn a_broken_config_is_an_error_and_runs_nothing() {
        assert!(list_config(b"[core\n", Path::new("/nonexistent")).is_err());
        // A fsmonitor or an alias in the text is only parsed.
        let got = list_config(
            b"[core]\nfsmonitor = touch /nonexistent/x\n",
            Path::new("/nonexistent"),
        )
        .unwrap();
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn rendering_round_trips_through_git() {
        let entries = vec![
            ConfigEntry {
                section: "remote".into(),
                subsection: Some("we\"ird\\name".into()),
                name: "url".into(),
                value: Some("a\tb\n\"c\"\\ ; # d".into()),
            },
            ConfigEntry {
                section: "core".into(),
                subsection: None,
                name: "bare".into(),
                value: None,
            },
        ];
        let text = render_config(&entries);
        assert_eq!(
            list_config(text.as_bytes(), Path::new("/nonexistent")).unwrap(),
            entries
        );
    }

    #[test]
    fn the_environment_is_cleared_and_hardened() {
        let cmd = command(Path::new("/nonexistent"));
        let envs: Vec<_> = cmd.get_envs().collect();
        assert!(
            envs.iter()
                .any(|(k, v)| *k == "GIT_CONFIG_GLOBAL" && v.is_some_and(|v| v == "/dev/null"))
        );
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert!(args.iter().any(|a| a == "core.hooksPath=/dev/null"));
        assert!(args.iter().any(|a| a == "--no-optional-locks"));
    }
}
