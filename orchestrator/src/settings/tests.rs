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
    store: TrustStore,
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
        store: TrustStore::at(&root.join("cordon")),
        ws,
        home,
        _dir: dir,
    }
}

/// The command line of a run with `--trust`.
fn trusted() -> CliSettings {
    CliSettings {
        trust: true,
        ..CliSettings::default()
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
        let sources = SettingsSources {
            managed: self.managed.clone(),
            user: Some(self.user.clone()),
            home: Some(self.home.clone()),
            trust_store: Some(self.store.clone()),
        };
        Settings::load_from(&self.ws, cli, &sources)
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
    let s = f.load(trusted()).unwrap();
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
            settings: Some(SettingsArg::File(file.clone())),
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
            settings: Some(SettingsArg::File(file)),
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
    for cli in [CliSettings::default(), trusted()] {
        let e = f.engine(cli);
        assert_eq!(bash(&e, "curl x"), Decision::Deny);
        assert_eq!(bash(&e, "cat .env"), Decision::Deny);
        let env = f.ws.join(".env").display().to_string();
        assert_eq!(
            e.decide("Read", &json!({"file_path": env}), true).decision,
            Decision::Deny
        );
    }
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
        json!({"allowManagedPermissionRulesOnly": true, "permissions": {"allow": ["Bash(make)"]},
            "sandbox": {"autoAllowBashIfSandboxed": false}}),
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
    let s = f.load(trusted()).unwrap();
    assert!(
        s.warnings()
            .iter()
            .any(|w| w.contains("allowManagedHooksOnly is honoured only"))
    );
}

#[test]
fn bypass_mode_from_the_repository_needs_trust() {
    let f = fixture();
    f.project(json!({"permissions": {"defaultMode": "bypassPermissions"}}));
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(s.mode(), PermissionMode::Default);
    assert!(
        s.ignored()
            .iter()
            .any(|i| i.key == "permissions.defaultMode = \"bypassPermissions\""),
        "{:?}",
        s.ignored()
    );
    assert_eq!(
        f.load(trusted()).unwrap().mode(),
        PermissionMode::BypassPermissions
    );
    std::fs::remove_file(f.ws.join(".claude/settings.json")).unwrap();
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
    let s = f.load(trusted()).unwrap();
    let sources: Vec<Source> = s.hooks_by_source().into_iter().map(|(s, _)| s).collect();
    assert_eq!(sources, [Source::Managed, Source::Project]);
    // Untrusted, the repository's hooks never run.
    let s = f.load(CliSettings::default()).unwrap();
    let sources: Vec<Source> = s.hooks_by_source().into_iter().map(|(s, _)| s).collect();
    assert_eq!(sources, [Source::Managed]);
    write(
        &f.managed,
        json!({"hooks": hook, "allowManagedHooksOnly": true}),
    );
    let s = f.load(CliSettings::default()).unwrap();
    let sources: Vec<Source> = s.hooks_by_source().into_iter().map(|(s, _)| s).collect();
    assert_eq!(sources, [Source::Managed]);
}

#[test]
fn a_workspace_cannot_switch_off_the_users_or_the_operators_hooks() {
    let f = fixture();
    let hook = json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}]});
    write(&f.managed, json!({"hooks": hook}));
    write(&f.user, json!({"hooks": hook}));
    f.project(json!({"hooks": hook, "disableAllHooks": true}));
    let sources =
        |s: &Settings| -> Vec<Source> { s.hooks_by_source().into_iter().map(|(s, _)| s).collect() };
    // Untrusted or trusted, the workspace's flag drops only the workspace's own hooks.
    for cli in [CliSettings::default(), trusted()] {
        let s = f.load(cli).unwrap();
        assert_eq!(sources(&s), [Source::Managed, Source::User]);
        assert!(!s.hooks_disabled_for(Source::User));
    }
    // The user's flag drops all but the operator's; the operator's drops everything.
    write(&f.user, json!({"hooks": hook, "disableAllHooks": true}));
    let s = f.load(trusted()).unwrap();
    assert_eq!(sources(&s), [Source::Managed]);
    assert!(s.hooks_disabled_for(Source::User) && !s.hooks_disabled_for(Source::Managed));
    write(&f.managed, json!({"hooks": hook, "disableAllHooks": true}));
    let s = f.load(trusted()).unwrap();
    assert!(sources(&s).is_empty());
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
            settings: Some(SettingsArg::File(f.ws.join("missing.json"))),
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
    let s = f.load(trusted()).unwrap();
    assert_eq!(
        s.permissions.additional_directories,
        vec![
            (PathBuf::from("/tmp"), Source::Project),
            (f.home.join("extra"), Source::User)
        ]
    );
    let e = Engine::new(s.engine_config(&f.ws.join("src")));
    let p = f.ws.join("src/a.rs").display().to_string();
    assert_eq!(
        e.decide("Edit", &json!({"file_path": p}), false).decision,
        Decision::Allow
    );
}

#[test]
fn an_untrusted_workspace_may_only_narrow_and_says_what_it_lost() {
    let f = fixture();
    let hook = json!({"SessionStart": [{"hooks": [{"type": "command", "command": "touch m"}]}]});
    f.project(json!({
        "permissions": {"allow": ["Bash"], "deny": ["Bash(curl *)"], "ask": ["Edit"],
            "defaultMode": "bypassPermissions"},
        "hooks": hook, "env": {"BASH_ENV": "./x"}
    }));
    f.local(json!({"permissions": {"defaultMode": "plan"}}));
    write(
        &f.ws.join(".mcp.json"),
        json!({"mcpServers": {"x": {"command": "x"}}}),
    );
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(s.trust(), &WorkspaceTrust::default());
    assert!(s.permissions.allow.is_empty());
    assert_eq!((s.permissions.deny.len(), s.permissions.ask.len()), (1, 1));
    assert_eq!(s.mode(), PermissionMode::Plan, "narrowing modes count");
    assert!(s.hooks_by_source().is_empty() && s.env.is_empty());
    let keys: Vec<&str> = s.ignored().iter().map(|i| i.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "env",
            "hooks",
            "permissions.allow",
            "permissions.defaultMode = \"bypassPermissions\"",
            "mcpServers"
        ]
    );
    let notice = s.untrusted_notice().unwrap();
    assert!(
        notice.contains("cordon trust") && notice.contains("permissions.allow"),
        "{notice}"
    );
    assert_eq!(s.trust_record()["ignored"].as_array().unwrap().len(), 5);
    // Trusted: all of it counts; a changed file untrusts again, naming it.
    crate::trust::trust_workspace(&f.store, &f.ws).unwrap();
    let s = f.load(CliSettings::default()).unwrap();
    assert!(s.trust().is_trusted() && s.ignored().is_empty());
    assert_eq!(s.permissions.allow.len(), 1);
    assert_eq!(s.env.get("BASH_ENV").map(String::as_str), Some("./x"));
    assert_eq!(s.hooks_by_source().len(), 1);
    f.local(json!({"permissions": {"defaultMode": "acceptEdits"}}));
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(
        s.trust(),
        &WorkspaceTrust::Untrusted {
            reason: crate::trust::UntrustedReason::Changed(vec![LOCAL_FILE.into()])
        }
    );
    assert!(s.untrusted_notice().unwrap().contains("changed since"));
}

#[test]
fn trusted_directories_count_from_the_user_and_the_operator_only() {
    let f = fixture();
    f.project(json!({"permissions": {"allow": ["Bash"]}, "trustedDirectories": ["/"]}));
    let s = f.load(CliSettings::default()).unwrap();
    assert!(!s.trust().is_trusted());
    write(&f.user, json!({"trustedDirectories": ["~/nowhere"]}));
    assert!(!f.load(CliSettings::default()).unwrap().trust().is_trusted());
    write(
        &f.managed,
        json!({"trustedDirectories": [f.ws.parent().unwrap()]}),
    );
    let s = f.load(CliSettings::default()).unwrap();
    assert!(s.trust().is_trusted());
    assert_eq!(s.permissions.allow.len(), 1);
}

#[test]
fn the_operator_decides_whether_trust_flag_works() {
    let f = fixture();
    f.project(json!({"permissions": {"allow": ["Bash"]}}));
    assert!(f.load(trusted()).unwrap().trust().is_trusted());
    write(&f.managed, json!({"allowHeadlessTrust": false}));
    let err = f.load(trusted()).unwrap_err();
    assert!(matches!(err, SettingsError::TrustFlagRefused), "{err}");
    // Elsewhere the key is warned about and has no effect.
    write(&f.managed, json!({}));
    write(&f.user, json!({"allowHeadlessTrust": false}));
    let s = f.load(trusted()).unwrap();
    assert!(s.trust().is_trusted());
    assert!(
        s.warnings()
            .iter()
            .any(|w| w.contains("allowHeadlessTrust"))
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
fn auto_allow_defaults_on_and_the_operator_can_lock_it_off() {
    let f = fixture();
    let make = |f: &Fixture, cli| bash(&f.engine(cli), "make");
    assert_eq!(make(&f, CliSettings::default()), Decision::Allow);
    // An untrusted repository may turn it off (narrowing), not back on.
    f.project(json!({"sandbox": {"autoAllowBashIfSandboxed": false}}));
    assert_eq!(make(&f, CliSettings::default()), Decision::Ask);
    f.project(json!({"sandbox": {"autoAllowBashIfSandboxed": true}}));
    write(
        &f.user,
        json!({"sandbox": {"autoAllowBashIfSandboxed": false}}),
    );
    assert_eq!(make(&f, CliSettings::default()), Decision::Ask);
    assert_eq!(make(&f, trusted()), Decision::Allow);
    write(
        &f.managed,
        json!({"sandbox": {"autoAllowBashIfSandboxed": false}}),
    );
    write(
        &f.user,
        json!({"sandbox": {"autoAllowBashIfSandboxed": true}}),
    );
    let inline = CliSettings {
        settings: Some(SettingsArg::parse(
            r#"{"sandbox": {"autoAllowBashIfSandboxed": true}}"#,
        )),
        trust: true,
        ..CliSettings::default()
    };
    assert_eq!(make(&f, inline), Decision::Ask);
}

#[test]
fn inline_settings_json_is_a_cli_source() {
    let f = fixture();
    assert_eq!(
        SettingsArg::parse("./s.json"),
        SettingsArg::File("./s.json".into())
    );
    let cli = CliSettings {
        settings: Some(SettingsArg::parse(
            r#" {"permissions": {"allow": ["Bash(npm test *)"]}}"#,
        )),
        ..CliSettings::default()
    };
    let s = f.load(cli).unwrap();
    assert_eq!(s.permissions.allow[0].origin.source, "--settings");
    let bad = CliSettings {
        settings: Some(SettingsArg::parse("{nope")),
        ..CliSettings::default()
    };
    let err = f.load(bad).unwrap_err().to_string();
    assert!(
        err.contains("--settings") && err.contains("invalid JSON"),
        "{err}"
    );
}

#[test]
fn the_managed_override_never_replaces_the_operators_file() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("managed-settings.json");
    let test = Some(std::ffi::OsString::from("/tmp/test.json"));
    assert_eq!(
        managed_path_from(&system, test.clone()),
        PathBuf::from("/tmp/test.json")
    );
    std::os::unix::fs::symlink("/nonexistent", &system).unwrap();
    assert_eq!(managed_path_from(&system, test), system);
    assert_eq!(managed_path_from(&system, None), system);
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

#[test]
fn trust_would_enable_only_what_the_managed_settings_leave() {
    let f = fixture();
    let hook = json!({"SessionStart": [{"hooks": [{"type": "command", "command": "x"}]}]});
    f.project(json!({
        "permissions": {"allow": ["Bash"], "defaultMode": "bypassPermissions"},
        "hooks": hook, "env": {"A": "1"}
    }));
    let keys = |s: &Settings| -> Vec<String> {
        s.trust_would_enable().into_iter().map(|i| i.key).collect()
    };
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(
        keys(&s),
        [
            "env",
            "hooks",
            "permissions.allow",
            "permissions.defaultMode = \"bypassPermissions\""
        ]
    );
    assert_eq!(s.trust_would_enable()[2].value, json!(["Bash"]));
    write(
        &f.managed,
        json!({"allowManagedPermissionRulesOnly": true, "allowManagedHooksOnly": true,
            "permissions": {"disableBypassPermissionsMode": "disable"}}),
    );
    let s = f.load(CliSettings::default()).unwrap();
    assert_eq!(keys(&s), ["env"]);
    assert_eq!(s.ignored().len(), 4, "still reported as ignored");
}

#[test]
fn the_trust_question_shows_what_each_mcp_server_would_run_and_read() {
    let f = fixture();
    write(
        &f.ws.join(".mcp.json"),
        json!({"mcpServers": {"gh": {"type": "http", "url": "https://mcp.example/",
            "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}}}),
    );
    let s = f.load(CliSettings::default()).unwrap();
    let item = s
        .trust_would_enable()
        .into_iter()
        .find(|i| i.key == "mcpServers")
        .unwrap();
    let shown = crate::interactive::trust::describe(&item);
    assert!(
        shown.contains("${GITHUB_TOKEN}") && shown.contains("https://mcp.example/"),
        "{shown}"
    );
}
