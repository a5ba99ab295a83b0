use std::os::unix::fs::symlink;

use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A plugin directory with one of each component.
fn toolkit() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("toolkit");
    write(
        &root,
        ".claude-plugin/plugin.json",
        r#"{"name": "toolkit", "version": "1.0.0"}"#,
    );
    write(
        &root,
        "commands/greet.md",
        "---\ndescription: Greets\nallowed-tools: Bash(*)\n---\nSay hello to $ARGUMENTS from ${CLAUDE_PLUGIN_ROOT}.\n",
    );
    write(
        &root,
        "agents/checker.md",
        "---\nname: checker\ndescription: Checks\ntools: Read\n---\nYou check.\n",
    );
    write(
        &root,
        "skills/lint/SKILL.md",
        "---\nname: lint\ndescription: Lints\n---\nRun ${CLAUDE_PLUGIN_ROOT}/bin/lint.\n",
    );
    write(
        &root,
        "hooks/hooks.json",
        r#"{"description": "d", "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/hook.sh"}]}]}}"#,
    );
    write(
        &root,
        ".mcp.json",
        r#"{"mcpServers": {"clock": {"command": "${CLAUDE_PLUGIN_ROOT}/clock"}}}"#,
    );
    (dir, root)
}

#[test]
fn components_are_named_as_claude_code_names_them() {
    let (_dir, root) = toolkit();
    let p = load(&root).unwrap();
    assert_eq!(
        (p.name.as_str(), p.version.as_deref()),
        ("toolkit", Some("1.0.0"))
    );
    assert_eq!(p.commands[0].name, "toolkit:greet");
    assert_eq!(p.commands[0].description, "Greets");
    let root_text = root.display().to_string();
    assert_eq!(
        p.commands[0].expand("Bob"),
        format!("Say hello to Bob from {root_text}.")
    );
    assert_eq!(p.agents[0].name, "toolkit:checker");
    assert_eq!(p.agents[0].tools, Some(vec!["Read".to_string()]));
    assert_eq!(p.skills[0].name, "toolkit:lint");
    assert_eq!(p.skills[0].body, format!("Run {root_text}/bin/lint."));
    let hook = &p.hooks[0];
    assert!(hook.origin.ends_with("hooks/hooks.json"), "{}", hook.origin);
    assert_eq!(hook.source, crate::hooks::HookSource::Plugin);
    assert!(
        matches!(&hook.handler, crate::hooks::Handler::Command { command, runs_on, .. }
            if *command == format!("{root_text}/hook.sh") && *runs_on == crate::hooks::RunsOn::Sandbox),
        "{hook:?}"
    );
    assert_eq!(hook.env, [(ROOT_VAR.to_string(), root_text.clone())]);
    assert_eq!(p.mcp_servers[0].0, "plugin:toolkit:clock");
    assert!(p.runs_programs());
    assert_eq!(p.summary()["path"], root_text);
}

#[test]
fn without_a_manifest_the_directory_names_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("bare-kit");
    write(&root, "commands/go.md", "Go.");
    let p = load(&root).unwrap();
    assert_eq!(p.name, "bare-kit");
    assert_eq!(p.commands[0].name, "bare-kit:go");
    assert!(!p.runs_programs());
}

#[test]
fn nothing_outside_the_plugin_is_read() {
    let (dir, root) = toolkit();
    let outside = dir.path().canonicalize().unwrap().join("secret.md");
    std::fs::write(&outside, "---\nname: leak\n---\nTHE SECRET").unwrap();
    symlink(&outside, root.join("commands/leak.md")).unwrap();
    symlink("../../secret.md", root.join("agents/leak.md")).unwrap();
    // A link that stays inside the plugin is followed.
    symlink("greet.md", root.join("commands/hello.md")).unwrap();
    let p = load(&root).unwrap();
    let commands: Vec<&str> = p.commands.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(commands, ["toolkit:greet", "toolkit:hello"]);
    assert!(p.agents.iter().all(|a| !a.prompt.contains("SECRET")));
    write(
        &root,
        ".claude-plugin/plugin.json",
        r#"{"name": "toolkit", "commands": "../"}"#,
    );
    let err = load(&root).unwrap_err();
    assert_eq!(err.kind, "manifest-validation-error");
    assert!(err.why.contains("./"), "{err}");
}

#[test]
fn bad_directories_and_names_are_reported() {
    let (_dir, root) = toolkit();
    assert_eq!(
        load(&root.join("missing")).unwrap_err().kind,
        "path-not-found"
    );
    write(
        &root,
        ".claude-plugin/plugin.json",
        r#"{"name": "bad name"}"#,
    );
    assert_eq!(load(&root).unwrap_err().kind, "manifest-validation-error");
    assert_eq!(load(Path::new("/")).unwrap_err().kind, "refused");
    let (plugins, errors) = load_all(&[PathBuf::from("/nonexistent-plugin")]);
    assert!(plugins.is_empty());
    assert_eq!(errors[0].kind, "path-not-found");
    write(
        &root,
        ".claude-plugin/plugin.json",
        r#"{"name": "toolkit"}"#,
    );
    write(
        &root,
        "hooks/hooks.json",
        r#"{"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}"#,
    );
    assert_eq!(load(&root).unwrap_err().kind, "hooks-load-failed");
}
