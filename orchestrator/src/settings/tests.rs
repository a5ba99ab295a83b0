use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::permissions::{Decision, Engine};

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    managed: PathBuf,
    user: PathBuf,
    home: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    Fixture {
        managed: root.join("managed.json"),
        user: home.join("settings.json"),
        ws,
        home,
        _dir: dir,
    }
}

fn write(path: &Path, v: serde_json::Value) {
    std::fs::write(path, v.to_string()).unwrap();
}

impl Fixture {
    fn project(&self, v: serde_json::Value) {
        write(&self.ws.join(".claude/settings.json"), v);
    }
    fn local(&self, v: serde_json::Value) {
        write(&self.ws.join(".claude/settings.local.json"), v);
    }
    fn load(&self, cli: CliSettings) -> Result<Settings, SettingsError> {
        Settings::load_from(
            &self.ws,
            cli,
            &self.managed,
            Some(&self.user),
            Some(self.home.clone()),
        )
    }
    fn engine(&self, cli: CliSettings) -> Engine {
        Engine::new(self.load(cli).unwrap().engine_config(&self.ws))
    }
}

fn bash(e: &Engine, cmd: &str) -> Decision {
    e.decide("Bash", &json!({ "command": cmd }), false).decision
}

#[test]
fn lists_merge_and_scalars_take_the_highest_source() {
    let f = fixture();
    write(
        &f.managed,
        json!({"model": "managed-model", "permissions": {"deny": ["Bash(rm *)"]}}),
    );
    f.project(json!({"model": "project-model", "permissions": {"allow": ["Bash(npm test *)"], "defaultMode": "acceptEdits"}}));
    f.local(json!({"permissions": {"allow": ["Bash(make)"]}}));
    write(
        &f.user,
        json!({"permissions": {"allow": ["Bash(cargo *)"], "defaultMode": "plan"}, "env": {"A": "user", "B": "user"}}),
    );
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(s.model.as_deref(), Some("managed-model"));
    assert_eq!(s.mode(), PermissionMode::AcceptEdits);
    assert_eq!(s.permissions.allow.len(), 3);
    assert_eq!(s.env.get("A").map(String::as_str), Some("user"));
    let e = Engine::new(s.engine_config(&f.ws));
    assert_eq!(bash(&e, "npm test"), Decision::Allow);
    assert_eq!(bash(&e, "make"), Decision::Allow);
    assert_eq!(bash(&e, "cargo build"), Decision::Allow);
    let v = e.decide("Bash", &json!({"command": "rm x"}), false);
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.rule.unwrap().source, f.managed.display().to_string());
    let v = e.decide("Bash", &json!({"command": "make"}), false);
    assert_eq!(
        v.rule.unwrap().source,
        f.ws.join(".claude/settings.local.json")
            .display()
            .to_string()
    );
}

#[test]
fn cli_flags_outrank_the_settings_file_and_the_repository() {
    let f = fixture();
    let file = f.ws.join("cli.json");
    write(
        &file,
        json!({"permissions": {"defaultMode": "plan"}, "model": "file"}),
    );
    f.project(json!({"permissions": {"defaultMode": "acceptEdits"}}));
    let s = f
        .load(CliSettings {
            settings_file: Some(file.clone()),
            permission_mode: Some(PermissionMode::DontAsk),
            allowed_tools: vec!["Read Bash(git log:*)".into()],
            model: Some("flag".into()),
            ..CliSettings::default()
        })
        .unwrap();
    assert_eq!(s.mode(), PermissionMode::DontAsk);
    assert_eq!(s.model.as_deref(), Some("flag"));
    assert_eq!(s.permissions.allow[0].origin.source, "cli");
    assert_eq!(s.permissions.allow.len(), 2);
    let s = f
        .load(CliSettings {
            settings_file: Some(file),
            ..CliSettings::default()
        })
        .unwrap();
    assert_eq!(s.mode(), PermissionMode::Plan);
}

#[test]
fn the_repository_cannot_widen_what_managed_denies() {
    let f = fixture();
    write(
        &f.managed,
        json!({"permissions": {"deny": ["Bash(curl *)", "Read(./.env)"]}}),
    );
    f.project(json!({"permissions": {"allow": ["Bash", "Bash(curl *)", "Read(./.env)"]}}));
    let e = f.engine(CliSettings::default());
    assert_eq!(bash(&e, "curl x"), Decision::Deny);
    assert_eq!(bash(&e, "cat .env"), Decision::Deny);
    let env = f.ws.join(".env").display().to_string();
    assert_eq!(
        e.decide("Read", &json!({"file_path": env}), true).decision,
        Decision::Deny
    );
    let s = f.load(CliSettings::default()).unwrap();
    let kernel = s.read_edit_deny_rules(&f.ws);
    assert_eq!(kernel.len(), 1);
    assert_eq!(kernel[0].1.literal_path(), Some(f.ws.join(".env")));
}

#[test]
fn managed_only_rules_ignore_everyone_else() {
    let f = fixture();
    write(
        &f.managed,
        json!({"allowManagedPermissionRulesOnly": true, "permissions": {"allow": ["Bash(make)"]}}),
    );
    f.project(
        json!({"permissions": {"allow": ["Bash(npm test)"]}, "allowManagedHooksOnly": false}),
    );
    let e = f.engine(CliSettings {
        allowed_tools: vec!["Bash(cargo *)".into()],
        ..CliSettings::default()
    });
    assert_eq!(bash(&e, "make"), Decision::Allow);
    assert_eq!(bash(&e, "npm test"), Decision::Ask);
    assert_eq!(bash(&e, "cargo build"), Decision::Ask);
    let s = f.load(CliSettings::default()).unwrap();
    assert!(
        s.warnings()
            .iter()
            .any(|w| w.contains("allowManagedHooksOnly is honoured only"))
    );
}

#[test]
fn bypass_mode_from_the_repository_is_refused() {
    let f = fixture();
    f.project(json!({"permissions": {"defaultMode": "bypassPermissions"}}));
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(s.mode(), PermissionMode::Default);
    assert!(
        s.warnings()
            .iter()
            .any(|w| w.contains("bypassPermissions ignored"))
    );
    // The user may.
    write(
        &f.user,
        json!({"permissions": {"defaultMode": "bypassPermissions"}}),
    );
    assert_eq!(
        f.load(CliSettings::default()).unwrap().mode(),
        PermissionMode::BypassPermissions
    );
    // Unless the operator disabled it, also for the CLI.
    write(
        &f.managed,
        json!({"permissions": {"disableBypassPermissionsMode": "disable"}}),
    );
    let s = f
        .load(CliSettings {
            permission_mode: Some(PermissionMode::BypassPermissions),
            ..CliSettings::default()
        })
        .unwrap();
    assert_eq!(s.mode(), PermissionMode::Default);
    let e = Engine::new(s.engine_config(&f.ws));
    e.set_mode(PermissionMode::BypassPermissions);
    assert_eq!(e.mode(), PermissionMode::Default);
}

#[test]
fn hooks_by_source_respect_managed_only() {
    let f = fixture();
    let hook = json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]});
    write(&f.managed, json!({"hooks": hook}));
    f.project(json!({"hooks": hook}));
    let s = f.load(CliSettings::default()).unwrap();
    let sources: Vec<Source> = s.hooks_by_source().into_iter().map(|(s, _)| s).collect();
    assert_eq!(sources, [Source::Managed, Source::Project]);
    write(
        &f.managed,
        json!({"hooks": hook, "allowManagedHooksOnly": true}),
    );
    let s = f.load(CliSettings::default()).unwrap();
    let sources: Vec<Source> = s.hooks_by_source().into_iter().map(|(s, _)| s).collect();
    assert_eq!(sources, [Source::Managed]);
}

#[test]
fn invalid_values_name_the_file_and_the_path() {
    let f = fixture();
    f.project(json!({"permissions": {"allow": ["Read", "Edit", 3]}}));
    let err = f.load(CliSettings::default()).unwrap_err().to_string();
    let file = f.ws.join(".claude/settings.json").display().to_string();
    assert_eq!(
        err,
        format!("{file}: permissions.allow[2]: expected a string")
    );
    for (bad, path) in [
        (
            json!({"permissions": {"deny": ["Bash("]}}),
            "permissions.deny[0]",
        ),
        (
            json!({"permissions": {"defaultMode": "yolo"}}),
            "permissions.defaultMode",
        ),
        (json!({"permissions": []}), "permissions"),
        (json!({"env": {"A": 1}}), "env.A"),
        (json!({"model": 3}), "model"),
        (json!({"cleanupPeriodDays": "x"}), "cleanupPeriodDays"),
        (
            json!({"enabledMcpjsonServers": ["a", 1]}),
            "enabledMcpjsonServers[1]",
        ),
        (
            json!({"permissions": {"disableBypassPermissionsMode": "yes"}}),
            "permissions.disableBypassPermissionsMode",
        ),
    ] {
        f.project(bad);
        let err = f.load(CliSettings::default()).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{file}: {path}:")), "{err}");
    }
    std::fs::write(f.ws.join(".claude/settings.json"), "{").unwrap();
    let err = f.load(CliSettings::default()).unwrap_err().to_string();
    assert!(err.contains("invalid JSON"), "{err}");
    let err = f
        .load(CliSettings {
            settings_file: Some(f.ws.join("missing.json")),
            ..CliSettings::default()
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.json"), "{err}");
}

#[test]
fn unknown_keys_warn_and_known_unused_keys_are_silent() {
    let f = fixture();
    f.project(json!({
        "cleanupPeriodDays": 30, "includeCoAuthoredBy": false, "statusLine": {"type": "command"},
        "enabledPlugins": {}, "apiKeyHelper": "x", "outputStyle": "x", "forceLoginMethod": "x",
        "enableAllProjectMcpServers": true, "enabledMcpjsonServers": [], "disabledMcpjsonServers": [],
        "surprise": 1, "permissions": {"allow": [], "whatever": true}
    }));
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(s.warnings().len(), 2, "{:?}", s.warnings());
    assert!(
        s.warnings()[0].contains("permissions.whatever")
            || s.warnings()[1].contains("permissions.whatever")
    );
    assert!(
        s.warnings()
            .iter()
            .any(|w| w.contains("surprise: unknown key"))
    );
}

#[test]
fn project_root_anchor_and_additional_directories() {
    let f = fixture();
    f.project(
        json!({"permissions": {"allow": ["Edit(/src/**)"], "additionalDirectories": ["/tmp"]}}),
    );
    write(
        &f.user,
        json!({"permissions": {"additionalDirectories": ["~/extra"]}}),
    );
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(
        s.permissions.additional_directories,
        vec![(f.home.join("extra"), Source::User)]
    );
    let e = Engine::new(s.engine_config(&f.ws.join("src")));
    let p = f.ws.join("src/a.rs").display().to_string();
    assert_eq!(
        e.decide("Edit", &json!({"file_path": p}), false).decision,
        Decision::Allow
    );
}

#[test]
fn repository_settings_behind_a_link_or_a_fifo_are_ignored_with_a_warning() {
    let f = fixture();
    let outside = f.home.join("outside.json");
    write(&outside, json!({"env": {"LEAKED": "from a host file"}}));
    std::os::unix::fs::symlink(&outside, f.ws.join(".claude/settings.json")).unwrap();
    nix::unistd::mkfifo(
        &f.ws.join(".claude/settings.local.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let s = f.load(CliSettings::default()).unwrap();
    assert!(s.env.is_empty(), "{:?}", s.env);
    assert!(s.files().iter().all(|f| !f.source.is_repository()));
    let warnings = s.warnings().join("\n");
    assert!(
        warnings.contains("settings.json: is a symbolic link"),
        "{warnings}"
    );
    assert!(
        warnings.contains("settings.local.json: is a FIFO"),
        "{warnings}"
    );
}

#[test]
fn repository_settings_under_a_linked_claude_dir_are_ignored() {
    let f = fixture();
    std::fs::remove_dir(f.ws.join(".claude")).unwrap();
    let elsewhere = f.home.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    write(&elsewhere.join("settings.json"), json!({"model": "linked"}));
    std::os::unix::fs::symlink(&elsewhere, f.ws.join(".claude")).unwrap();
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(s.model, None);
}
