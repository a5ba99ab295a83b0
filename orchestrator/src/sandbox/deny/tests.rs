use std::path::{Path, PathBuf};

use super::*;

struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    fn new(files: &[&str]) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        Ws { dir }
    }

    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    fn resolve(&self, rules: &[&str]) -> KernelDenies {
        let root = self.root();
        let rules: Vec<PathRule> = rules
            .iter()
            .map(|r| PathRule::parse(r, &root).unwrap())
            .collect();
        resolve(&rules, &root, Some(Path::new("/nonexistent-home")))
    }

    fn rel(&self, paths: &[PathBuf]) -> Vec<String> {
        let root = self.root();
        paths
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect()
    }
}

#[test]
fn rules_parse_only_path_tools_with_a_specifier() {
    let root = Path::new("/p");
    assert_eq!(
        PathRule::parse("Read(./.env)", root).unwrap().pattern,
        "./.env"
    );
    assert!(PathRule::parse("Read", root).is_none());
    assert!(PathRule::parse("Bash(cat .env)", root).is_none());
    assert!(PathRule::parse("Edit()", root).is_none());
    assert_eq!(PathRule::parse("Edit(src/**)", root).unwrap().tool, "Edit");
}

#[test]
fn anchors_resolve_inside_the_workspace() {
    let ws = Ws::new(&[".env", "a/.env", "config/app.toml", "src/main.rs"]);
    let root = ws.root();
    let d = ws.resolve(&["Read(./.env)", "Edit(./config/**)"]);
    assert_eq!(ws.rel(&d.read), [".env"]);
    assert_eq!(ws.rel(&d.write), ["config"]);
    // A bare name matches at any depth; `/` is the settings file's project root; `//` is
    // absolute.
    let d = ws.resolve(&["Read(.env)"]);
    assert_eq!(ws.rel(&d.read), [".env", "a/.env"]);
    let d = ws.resolve(&["Read(/src/main.rs)"]);
    assert_eq!(ws.rel(&d.read), ["src/main.rs"]);
    let abs = format!("Read(/{}/config/)", root.display());
    let d = ws.resolve(&[abs.as_str()]);
    assert_eq!(ws.rel(&d.read), ["config"]);
}

#[test]
fn globs_expand_against_the_workspace() {
    let ws = Ws::new(&[
        "k.pem",
        "deep/er/x.pem",
        "x.pem.txt",
        "secrets/a",
        "secrets/b/c",
    ]);
    let d = ws.resolve(&["Read(**/*.pem)", "Read(./secrets/**)", "Edit(deep/*/x.?em)"]);
    assert_eq!(ws.rel(&d.read), ["deep/er/x.pem", "k.pem", "secrets"]);
    assert_eq!(ws.rel(&d.write), ["deep/er/x.pem"]);
}

#[test]
fn outside_paths_and_the_whole_workspace_are_left_to_the_tools() {
    let ws = Ws::new(&["a"]);
    let d = ws.resolve(&[
        "Read(//etc/passwd)",
        "Read(~/x)",
        "Read(./**)",
        "Edit(../x)",
    ]);
    assert_eq!(d, KernelDenies::default());
}

#[test]
fn missing_paths_bind_writes_only() {
    let ws = Ws::new(&["a"]);
    let d = ws.resolve(&["Read(./.env)", "Edit(./config/app.toml)"]);
    assert!(d.read.is_empty());
    assert_eq!(ws.rel(&d.write), ["config/app.toml"]);
}

#[test]
fn symlinks_are_replaced_by_their_targets_inside() {
    let ws = Ws::new(&["real/.env"]);
    let root = ws.root();
    std::os::unix::fs::symlink(root.join("real/.env"), root.join(".env")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", root.join("out")).unwrap();
    let d = ws.resolve(&["Read(./.env)", "Read(./out)"]);
    assert_eq!(ws.rel(&d.read), ["real/.env"]);
}

#[test]
fn deny_rules_come_from_the_merged_settings() {
    let ws = Ws::new(&[".env"]);
    let root = ws.root();
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::write(
        root.join(".claude/settings.json"),
        r#"{"permissions":{"deny":["Read(./.env)","Bash(curl *)","Edit(./config/**)"]}}"#,
    )
    .unwrap();
    let cli = crate::settings::CliSettings {
        disallowed_tools: vec!["Write(./out.txt)".into()],
        ..Default::default()
    };
    let missing = root.join("no-managed-settings.json");
    let sources = crate::settings::SettingsSources::managed_only(&missing);
    let settings = crate::settings::Settings::load_from(&root, cli, &sources).unwrap();
    let mut tools: Vec<(String, String)> = rules_from_settings(&settings)
        .into_iter()
        .map(|r| (r.tool, r.pattern))
        .collect();
    tools.sort();
    let want = [
        ("Edit", "./config/**"),
        ("Read", "./.env"),
        ("Write", "./out.txt"),
    ];
    assert_eq!(tools, want.map(|(a, b)| (a.to_string(), b.to_string())));
}
