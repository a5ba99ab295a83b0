use std::path::Path;

use super::*;

fn write(ws: &Path, rel: &str, text: &str) {
    let path = ws.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path(),
        ".claude/settings.json",
        r#"{"permissions":{"allow":["Bash"]}}"#,
    );
    write(ws.path(), ".claude/hooks/pre.sh", "echo allow");
    ws
}

fn state(ws: &Path, store: &TrustStore) -> WorkspaceTrust {
    let inputs = TrustInputs {
        store: Some(store),
        ..TrustInputs::default()
    };
    decide(ws, || current_fingerprint(ws), &inputs).unwrap()
}

/// Trusts `ws` anew before each change, makes it, and checks that the change alone untrusts
/// it, naming the file.
fn each_change_untrusts(ws: &Path, store: &TrustStore, changes: &[(&str, &str)]) {
    for (rel, text) in changes {
        trust_workspace(store, ws).unwrap();
        write(ws, rel, text);
        assert_eq!(
            state(ws, store),
            WorkspaceTrust::Untrusted {
                reason: UntrustedReason::Changed(vec![rel.to_string()])
            },
            "{rel}"
        );
    }
}

#[test]
fn a_workspace_is_untrusted_until_trusted_and_again_when_a_bound_file_changes() {
    let ws = workspace();
    let ws = ws.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = TrustStore::at(&home.path().join("cordon"));
    assert_eq!(state(&ws, &store), WorkspaceTrust::default());
    let (canonical, fp) = trust_workspace(&store, &ws).unwrap();
    assert_eq!(canonical, ws);
    let files: Vec<&str> = fp.files().map(|(f, _)| f).collect();
    assert_eq!(files, [".claude/hooks/pre.sh", ".claude/settings.json"]);
    assert!(state(&ws, &store).is_trusted());
    // The record is the user's alone.
    let meta = std::fs::metadata(store.path()).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    each_change_untrusts(
        &ws,
        &store,
        &[
            (".claude/hooks/pre.sh", "echo deny"),
            (".claude/settings.local.json", "{}"),
            (".mcp.json", "{}"),
            (".cordon/x", "y"),
        ],
    );
    // An empty file (a session's placeholder) is the same as none.
    std::fs::remove_file(ws.join(".mcp.json")).unwrap();
    trust_workspace(&store, &ws).unwrap();
    std::fs::write(ws.join(".mcp.json"), "").unwrap();
    assert!(state(&ws, &store).is_trusted());
    std::fs::remove_file(ws.join(".claude/settings.json")).unwrap();
    assert!(!state(&ws, &store).is_trusted());
    assert!(store.forget(&ws).unwrap());
    assert_eq!(state(&ws, &store), WorkspaceTrust::default());
}

#[test]
fn the_devcontainer_and_the_dockerfile_it_names_are_bound() {
    let ws = workspace();
    let ws = ws.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = TrustStore::at(&home.path().join("cordon"));
    write(&ws, "docker/dev.Dockerfile", "FROM scratch\n");
    write(
        &ws,
        ".devcontainer/devcontainer.json",
        r#"{"build": {"dockerfile": "../docker/dev.Dockerfile", "context": ".."}}"#,
    );
    // A build recipe that appears, or changes, after the trust untrusts the workspace: a
    // Docker session of a trusted workspace would build it, its steps with the network.
    each_change_untrusts(
        &ws,
        &store,
        &[
            (
                ".devcontainer/devcontainer.json",
                r#"{"build": {"dockerfile": "../docker/dev.Dockerfile"}}"#,
            ),
            (".devcontainer/setup.sh", "curl evil"),
            ("docker/dev.Dockerfile", "FROM scratch\nRUN curl evil\n"),
            (".devcontainer.json", r#"{"image": "x"}"#),
        ],
    );
    // Other files of the build context are the repository's as any other file.
    trust_workspace(&store, &ws).unwrap();
    write(&ws, "docker/other.txt", "x");
    assert!(state(&ws, &store).is_trusted());
}

#[test]
fn the_flag_and_trusted_directories_trust_without_a_record() {
    let ws = workspace();
    let fp = current_fingerprint(ws.path()).unwrap();
    let flag = TrustInputs {
        flag: true,
        ..TrustInputs::default()
    };
    assert_eq!(
        decide(ws.path(), || Ok(fp.clone()), &flag).unwrap(),
        WorkspaceTrust::Trusted {
            basis: TrustBasis::Flag
        }
    );
    let parent = ws.path().parent().unwrap().to_path_buf();
    let dirs = [parent.clone()];
    let by_dir = TrustInputs {
        directories: &dirs,
        ..TrustInputs::default()
    };
    assert_eq!(
        decide(ws.path(), || Ok(fp.clone()), &by_dir).unwrap(),
        WorkspaceTrust::Trusted {
            basis: TrustBasis::Directory(parent)
        }
    );
    let sibling = [ws.path().with_extension("other")];
    let other = TrustInputs {
        directories: &sibling,
        ..TrustInputs::default()
    };
    assert!(
        !decide(ws.path(), || Ok(fp.clone()), &other)
            .unwrap()
            .is_trusted()
    );
}

#[test]
fn links_are_bound_by_their_target_name_and_never_followed() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "a").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), ws.path().join(".mcp.json")).unwrap();
    let before = current_fingerprint(ws.path()).unwrap();
    std::fs::write(outside.path().join("secret"), "b").unwrap();
    let after = current_fingerprint(ws.path()).unwrap();
    assert_eq!(before, after);
    assert!(
        after
            .files()
            .any(|(f, d)| f == ".mcp.json" && d.starts_with("symlink:"))
    );
}

#[test]
fn a_record_others_can_write_is_refused() {
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let store = TrustStore::at(home.path());
    trust_workspace(&store, ws.path()).unwrap();
    std::fs::set_permissions(
        store.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    let err = store.recorded(ws.path()).unwrap_err();
    assert!(matches!(err, TrustError::Insecure { .. }), "{err}");
}

#[test]
fn the_state_serialises_flat_for_the_init_record() {
    let v = serde_json::to_value(WorkspaceTrust::Trusted {
        basis: TrustBasis::Directory("/src".into()),
    })
    .unwrap();
    assert_eq!(
        v,
        serde_json::json!({"state": "trusted", "by": "directory", "detail": "/src"})
    );
    let v = serde_json::to_value(WorkspaceTrust::Untrusted {
        reason: UntrustedReason::Changed(vec![".mcp.json".into()]),
    })
    .unwrap();
    assert_eq!(
        v,
        serde_json::json!({"state": "untrusted", "why": "changed", "files": [".mcp.json"]})
    );
}

#[test]
fn a_workspace_too_large_to_fingerprint_is_untrusted_not_an_error() {
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let store = TrustStore::at(home.path());
    trust_workspace(&store, ws.path()).unwrap();
    for i in 0..2_001 {
        write(ws.path(), &format!(".cordon/f{i}"), "x");
    }
    assert!(matches!(
        state(ws.path(), &store),
        WorkspaceTrust::Untrusted {
            reason: UntrustedReason::Unverifiable(_)
        }
    ));
    assert!(matches!(
        trust_workspace(&store, ws.path()),
        Err(TrustError::TooLarge { .. })
    ));
}
