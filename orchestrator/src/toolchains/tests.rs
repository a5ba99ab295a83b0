use std::path::{Path, PathBuf};

use super::policy::Policy;
use super::resolve::{Adjustments, resolve};
use super::{HostFacts, policy};

fn policy_ok() -> &'static Policy {
    policy().unwrap()
}

struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    facts: HostFacts,
}

/// A fake home with a rustup-style toolchain, pyenv, a `~/.local/bin` and secrets.
fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(dir.path()).unwrap().join("u");
    for d in [
        ".cargo/bin",
        ".rustup/toolchains",
        ".pyenv/shims",
        ".pyenv/versions",
        ".local/bin",
        ".ssh",
        "work",
        ".cordon",
    ] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "key").unwrap();
    std::fs::write(home.join(".pyenv/creds"), "x").unwrap();
    let facts = HostFacts {
        home: home.clone(),
        path: vec![
            home.join(".cargo/bin"),
            home.join(".pyenv/shims"),
            home.join(".local/bin"),
            home.join("missing/bin"),
            PathBuf::from("/usr/bin"),
            PathBuf::from("/nonexistent/bin"),
        ],
        cordon_home: home.join(".cordon"),
        workspace: home.join("work"),
    };
    Home {
        _dir: dir,
        home,
        facts,
    }
}

#[test]
fn the_shipped_policy_parses_and_every_entry_says_why() {
    assert!(!policy_ok().roots.is_empty());
    assert!(policy_ok().secrets.iter().any(|s| s.path == "~/.ssh"));
}

#[test]
fn toolchains_are_shown_and_the_home_and_its_secrets_are_not() {
    let h = home();
    let e = resolve(policy_ok(), &h.facts, &Adjustments::default());
    let ro = &e.toolchains.view.read_only;
    for shown in [".cargo/bin", ".rustup", ".pyenv", ".local/bin"] {
        assert!(ro.contains(&h.home.join(shown)), "{shown} not in {ro:?}");
    }
    assert!(
        !ro.iter()
            .any(|p| p == &h.home || p.starts_with(h.home.join(".ssh")))
    );
    // Not shown at all, so nothing to hide there: ~/.cargo itself is not a root.
    assert!(!ro.contains(&h.home.join(".cargo")));
    let env: std::collections::HashMap<_, _> = e.toolchains.env.iter().cloned().collect();
    assert_eq!(env["RUSTUP_HOME"], h.home.join(".rustup").to_string_lossy());
    assert_eq!(env["PYENV_ROOT"], h.home.join(".pyenv").to_string_lossy());
    assert_eq!(
        env["CARGO_HOME"],
        h.home.join(".cordon/caches/cargo").to_string_lossy()
    );
    // PATH keeps what is visible inside, in order, and drops what is not.
    let path: Vec<&str> = env["PATH"].split(':').collect();
    assert_eq!(
        path,
        [
            h.home.join(".cargo/bin").to_str().unwrap(),
            h.home.join(".pyenv/shims").to_str().unwrap(),
            h.home.join(".local/bin").to_str().unwrap(),
            "/usr/bin",
        ]
    );
    e.toolchains
        .view
        .validate(&h.facts.workspace, Path::new("/run/state"))
        .unwrap();
}

#[test]
fn secrets_inside_a_shown_root_are_hidden_and_secret_roots_refused() {
    let h = home();
    let adjust = Adjustments {
        allow_read: vec![h.home.join(".cargo"), h.home.join(".ssh"), h.home.clone()],
        deny_read: vec![h.home.join(".pyenv/creds")],
    };
    let e = resolve(policy_ok(), &h.facts, &adjust);
    let view = &e.toolchains.view;
    assert!(view.read_only.contains(&h.home.join(".cargo")));
    assert!(
        view.hidden
            .contains(&h.home.join(".cargo/credentials.toml"))
    );
    assert!(view.hidden.contains(&h.home.join(".pyenv/creds")));
    let refused: Vec<&PathBuf> = e.refused.iter().map(|r| &r.path).collect();
    assert!(refused.contains(&&h.home.join(".ssh")), "{refused:?}");
    assert!(refused.contains(&&h.home), "{refused:?}");
    assert!(
        !view
            .read_only
            .iter()
            .any(|p| p.starts_with(h.home.join(".ssh")))
    );
}

#[test]
fn a_root_reached_through_a_symlink_is_shown_at_its_real_path() {
    let h = home();
    let real = h.home.join("tools/node/bin");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(&real, h.home.join("nodebin")).unwrap();
    let mut facts = h.facts.clone();
    facts.path.insert(0, h.home.join("nodebin"));
    // A link into the secrets is refused, whatever its name.
    std::os::unix::fs::symlink(h.home.join(".ssh"), h.home.join("sshbin")).unwrap();
    facts.path.insert(0, h.home.join("sshbin"));
    let e = resolve(policy_ok(), &facts, &Adjustments::default());
    assert!(e.toolchains.view.read_only.contains(&real));
    assert!(e.refused.iter().any(|r| r.path == h.home.join("sshbin")));
    let path = &e
        .toolchains
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .unwrap()
        .1;
    assert!(path.starts_with(real.to_str().unwrap()), "{path}");
}

#[test]
fn the_workspace_and_cordon_home_are_never_roots() {
    let h = home();
    let mut facts = h.facts.clone();
    facts.path = vec![h.home.join("work"), h.home.join(".cordon")];
    let e = resolve(policy_ok(), &facts, &Adjustments::default());
    assert!(
        !e.toolchains
            .view
            .read_only
            .iter()
            .any(|p| p.starts_with(h.home.join("work")) || p.starts_with(h.home.join(".cordon")))
    );
}

#[test]
fn policies_without_a_why_or_with_escaping_paths_are_refused() {
    let base = |roots: &str| {
        format!(r#"{{"version":1,"why":"w","roots":[{roots}],"secrets":[],"caches":[]}}"#)
    };
    assert!(Policy::parse(&base(r#"{"path":"~/.x","why":""}"#)).is_err());
    assert!(Policy::parse(&base(r#"{"path":"~/../etc","why":"w"}"#)).is_err());
    assert!(Policy::parse(&base(r#"{"path":"/etc","why":"w"}"#)).is_err());
    assert!(Policy::parse(&base(r#"{"path":"~/.x","why":"w","extra":1}"#)).is_err());
    assert!(Policy::parse(&base(r#"{"path":"~/.x","why":"w"}"#)).is_ok());
}

#[test]
fn the_hosts_caches_seed_cordons_unless_they_hold_or_are_a_secret() {
    let h = home();
    std::fs::create_dir_all(h.home.join(".cargo/registry/cache")).unwrap();
    std::fs::create_dir_all(h.home.join(".cache/pip")).unwrap();
    // A host pip cache that is a link into the SSH directory is refused as a seed.
    std::fs::create_dir_all(h.home.join(".ssh/pip")).unwrap();
    std::fs::create_dir_all(h.home.join("go/pkg")).unwrap();
    std::os::unix::fs::symlink(h.home.join(".ssh/pip"), h.home.join("go/pkg/mod")).unwrap();
    let e = resolve(policy_ok(), &h.facts, &Adjustments::default());
    let caches = h.home.join(".cordon/caches");
    let seeded = &e.toolchains.view.seeded;
    let at = |p: &str| seeded.iter().find(|s| s.at == caches.join(p));
    let cargo = at("cargo/registry").expect("cargo's registry seeded");
    assert_eq!(cargo.lower, h.home.join(".cargo/registry"));
    assert_eq!(cargo.layers, caches.join(".seeded/cargo-0"));
    assert_eq!(at("pip").unwrap().lower, h.home.join(".cache/pip"));
    // The host has no ~/.cargo/git nor npm cache: nothing to seed from.
    assert!(at("cargo/git").is_none() && at("npm/_cacache").is_none());
    assert!(at("go-mod").is_none(), "{seeded:?}");
    assert!(
        e.refused
            .iter()
            .any(|r| r.path == h.home.join("go/pkg/mod") && r.why.contains("go-mod")),
        "{:?}",
        e.refused
    );
    // What the launcher checks holds for what the resolution gives.
    e.toolchains
        .view
        .validate(&h.facts.workspace, &h.home.join(".cordon/run/s"))
        .unwrap();
    // The caches are made, seeded parts and layers included.
    e.create_caches().unwrap();
    assert!(cargo.at.is_dir() && cargo.upper().is_dir() && cargo.work().is_dir());
}

#[test]
fn a_version_managers_shims_get_a_layer_of_the_sessions_own_unless_they_hold_a_secret() {
    let h = home();
    std::fs::create_dir_all(h.home.join(".pyenv/shims")).unwrap();
    std::fs::create_dir_all(h.home.join(".asdf")).unwrap();
    // asdf's shims are a link elsewhere: the overlay would land on the link's target.
    std::fs::create_dir_all(h.home.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(h.home.join("elsewhere"), h.home.join(".asdf/shims")).unwrap();
    let e = resolve(policy_ok(), &h.facts, &Adjustments::default());
    assert_eq!(e.toolchains.view.scratch, vec![h.home.join(".pyenv/shims")]);
    e.toolchains
        .view
        .validate(&h.facts.workspace, &h.home.join(".cordon/run/s"))
        .unwrap();
    // A secret the user hides inside the shims keeps them read-only: the overlay would
    // show it through.
    let adjust = Adjustments {
        deny_read: vec![h.home.join(".pyenv/shims/token")],
        ..Adjustments::default()
    };
    std::fs::write(h.home.join(".pyenv/shims/token"), "t").unwrap();
    let e = resolve(policy_ok(), &h.facts, &adjust);
    assert!(
        e.toolchains.view.scratch.is_empty(),
        "{:?}",
        e.toolchains.view
    );
    assert!(
        e.toolchains
            .view
            .hidden
            .contains(&h.home.join(".pyenv/shims/token"))
    );
}
