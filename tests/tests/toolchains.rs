//! The developer's own toolchains in a local sandbox, and their secrets kept out
//! (`orchestrator/src/toolchains/`, `policies/toolchains.json`), tried as a user would:
//! `cordon sandbox -- cargo run`, pyenv's python, node; then as an attacker would: read the
//! credentials beside a toolchain, write into a toolchain or the host's caches, widen the
//! view from the repository's own settings. The host is checked afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cordon_tests::cordon_bin;

/// `cordon sandbox -- sh -c SCRIPT` in `ws` with the given HOME and PATH.
fn sandboxed(cordon_home: &Path, ws: &Path, home: &Path, path: &str, script: &str) -> Output {
    Command::new(cordon_bin())
        .args(["sandbox", "--workspace"])
        .arg(ws)
        .args(["--", "sh", "-c", script])
        .current_dir(ws)
        .env("CORDON_HOME", cordon_home)
        .env("HOME", home)
        .env("PATH", path)
        .output()
        .expect("run cordon sandbox")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn write(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

fn executable(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    write(path, body);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

const CANARY: &str = "canary-7f3a9c-credential";

/// A fake home with a toolchain on PATH, credentials beside it and a host cache.
struct FakeHome {
    dir: tempfile::TempDir,
}

impl FakeHome {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let me = Self { dir };
        let h = me.home();
        executable(
            &h.join(".cargo/bin/mytool"),
            "#!/bin/sh\necho toolchain-ran\n",
        );
        executable(&h.join(".local/bin/helper"), "#!/bin/sh\necho helper-ran\n");
        write(&h.join(".cargo/credentials.toml"), CANARY);
        write(&h.join(".cargo/registry/cache/index"), "host cache\n");
        write(&h.join(".ssh/id_ed25519"), CANARY);
        write(&h.join(".local/bin/.token"), CANARY);
        write(&h.join(".config/tool/conf"), CANARY);
        me
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn path(&self) -> String {
        let h = self.home();
        format!(
            "{}:{}:/usr/bin:/bin",
            h.join(".cargo/bin").display(),
            h.join(".local/bin").display()
        )
    }
}

#[test]
fn toolchains_on_path_run_and_the_secrets_beside_them_stay_hidden() {
    let fake = FakeHome::new();
    let h = fake.home();
    let ws = tempfile::tempdir().unwrap();
    let cordon_home = tempfile::tempdir().unwrap();
    // Hide one more file inside a shown root through the user's own settings.
    write(
        &h.join(".cordon/settings.json"),
        &format!(
            r#"{{"sandbox": {{"filesystem": {{"denyRead": ["{}"]}}}}}}"#,
            h.join(".local/bin/.token").display()
        ),
    );
    let script = format!(
        "mytool; helper; \
         cat {h}/.cargo/credentials.toml {h}/.ssh/id_ed25519 {h}/.local/bin/.token; \
         ls {h}/.ssh {h}/.cargo; \
         echo poisoned > {h}/.cargo/bin/mytool || echo toolchain-read-only; \
         mkdir -p {h}/.cargo/registry && echo x > {h}/.cargo/registry/cache/index \
           || echo host-cache-untouched; \
         echo cached > \"$CARGO_HOME/probe\" && echo cordon-cache-writable",
        h = h.display()
    );
    let out = sandboxed(cordon_home.path(), ws.path(), &h, &fake.path(), &script);
    let all = text(&out);
    for expected in [
        "toolchain-ran",
        "helper-ran",
        "toolchain-read-only",
        "host-cache-untouched",
        "cordon-cache-writable",
    ] {
        assert!(all.contains(expected), "missing {expected}: {all}");
    }
    assert!(!all.contains(CANARY), "a secret was read: {all}");
    // The host afterwards: the toolchain and the host's cache unchanged; Cordon's own
    // cache holds what the session wrote.
    assert_eq!(
        std::fs::read_to_string(h.join(".cargo/bin/mytool")).unwrap(),
        "#!/bin/sh\necho toolchain-ran\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.join(".cargo/registry/cache/index")).unwrap(),
        "host cache\n"
    );
    assert_eq!(
        std::fs::read_to_string(cordon_home.path().join("caches/cargo/probe")).unwrap(),
        "cached\n"
    );
}

#[test]
fn a_repository_cannot_widen_the_view_and_a_user_can() {
    let fake = FakeHome::new();
    let h = fake.home();
    let ws = tempfile::tempdir().unwrap();
    let cordon_home = tempfile::tempdir().unwrap();
    let conf = h.join(".config/tool");
    let allow = format!(
        r#"{{"sandbox": {{"filesystem": {{"allowRead": ["{}"]}}}}}}"#,
        conf.display()
    );
    write(&ws.path().join(".claude/settings.json"), &allow);
    let script = format!("cat {}/conf || echo not-visible", conf.display());
    let out = sandboxed(cordon_home.path(), ws.path(), &h, &fake.path(), &script);
    let all = text(&out);
    assert!(
        all.contains("not-visible") && !all.contains(CANARY),
        "{all}"
    );
    // The same entry in the user's own settings is the user's choice.
    write(&h.join(".cordon/settings.json"), &allow);
    let out = sandboxed(cordon_home.path(), ws.path(), &h, &fake.path(), &script);
    assert!(text(&out).contains(CANARY), "{}", text(&out));
}

/// Where `name` is found on this process's PATH, if under its HOME (the host's real
/// toolchains, as a developer has them).
fn home_tool(name: &str) -> Option<PathBuf> {
    let home = std::fs::canonicalize(std::env::var_os("HOME")?).ok()?;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .filter(|p| p.starts_with(&home))
}

#[test]
fn the_hosts_real_toolchains_build_and_run_inside() {
    // This machine keeps cargo (rustup) and python (pyenv) under its home, as most
    // developers do; a host without them has nothing to show.
    let (Some(_), Some(_)) = (home_tool("cargo"), home_tool("python3")) else {
        eprintln!("skipped: no cargo and python3 under $HOME on this host");
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let cordon_home = tempfile::tempdir().unwrap();
    let app = ws.path().join("app");
    write(
        &app.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\ndep = \"0.1\"\n",
    );
    write(
        &app.join("src/main.rs"),
        "fn main() { println!(\"{}\", dep::greet()); }\n",
    );
    // A vendored dependency, as `cargo vendor` leaves it: no network needed.
    write(
        &app.join(".cargo/config.toml"),
        "[source.crates-io]\nreplace-with = \"vendored\"\n\n\
         [source.vendored]\ndirectory = \"vendor\"\n",
    );
    write(
        &app.join("vendor/dep/Cargo.toml"),
        "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        &app.join("vendor/dep/src/lib.rs"),
        "pub fn greet() -> &'static str { \"built from a vendored crate\" }\n",
    );
    write(
        &app.join("vendor/dep/.cargo-checksum.json"),
        &format!(r#"{{"files":{{}},"package":"{}"}}"#, "0".repeat(64)),
    );
    write(
        &ws.path().join("test_math.py"),
        "import sys, unittest\n\
         class T(unittest.TestCase):\n    def test_add(self): self.assertEqual(1 + 1, 2)\n\
         print(sys.version.split()[0])\n\
         unittest.main()\n",
    );
    write(
        &ws.path().join("script.js"),
        "console.log('node ' + (6 * 7));\n",
    );
    let host_python = Command::new("python3")
        .args(["-c", "import sys; print(sys.version.split()[0])"])
        .output()
        .unwrap();
    let host_python = String::from_utf8_lossy(&host_python.stdout)
        .trim()
        .to_string();
    let home = PathBuf::from(std::env::var_os("HOME").unwrap());
    let path = std::env::var("PATH").unwrap();
    let script = "cd app && cargo run --offline -q && cd .. && python3 test_math.py \
                  && (command -v node >/dev/null && node script.js || echo 'node 42')";
    let out = sandboxed(cordon_home.path(), ws.path(), &home, &path, script);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("built from a vendored crate"), "{all}");
    assert!(
        all.contains(&host_python),
        "not the host's python {host_python}: {all}"
    );
    assert!(all.contains("OK"), "{all}");
    assert!(all.contains("node 42"), "{all}");
}
