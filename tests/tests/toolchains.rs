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

/// Every file under `dir` with its content and mode: what "unchanged" is checked against.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p.clone());
            }
            let body = if meta.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                Vec::new()
            };
            out.push((p, body, meta.mode()));
        }
    }
    out.sort();
    out
}

/// The host's caches seed Cordon's: a session sees what the user already downloaded,
/// changes, deletes and hard-links it, and all of that lands in Cordon's own layer. The
/// host's caches are byte for byte and mode for mode as they were, and the next session
/// sees the first one's changes (Cordon's layer persists), never the host's cache moved.
#[test]
fn the_hosts_caches_seed_cordons_and_stay_unchanged() {
    let fake = FakeHome::new();
    let h = fake.home();
    write(&h.join(".cache/pip/http/ab/wheel"), "host wheel\n");
    write(
        &h.join(".cargo/registry/cache/idx/dep-1.0.0.crate"),
        "crate\n",
    );
    let host_pip = snapshot(&h.join(".cache/pip"));
    let host_registry = snapshot(&h.join(".cargo/registry"));
    let ws = tempfile::tempdir().unwrap();
    let cordon_home = tempfile::tempdir().unwrap();
    let script = "cat \"$PIP_CACHE_DIR/http/ab/wheel\" && \
         cat \"$CARGO_HOME/registry/cache/idx/dep-1.0.0.crate\" && \
         echo poisoned > \"$PIP_CACHE_DIR/http/ab/wheel\" && \
         rm \"$CARGO_HOME/registry/cache/idx/dep-1.0.0.crate\" && \
         ln \"$PIP_CACHE_DIR/http/ab/wheel\" \"$PIP_CACHE_DIR/linked\" && \
         echo more >> \"$PIP_CACHE_DIR/linked\" && \
         echo fresh > \"$CARGO_HOME/registry/cache/idx/new-2.0.0.crate\" && \
         (chmod 4755 \"$PIP_CACHE_DIR/linked\" 2>/dev/null; true) && echo session-done";
    let out = sandboxed(cordon_home.path(), ws.path(), &h, &fake.path(), script);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("host wheel") && all.contains("crate"), "{all}");
    assert!(all.contains("session-done"), "{all}");

    // The host's caches: nothing changed, nothing added, nothing removed.
    assert_eq!(snapshot(&h.join(".cache/pip")), host_pip);
    assert_eq!(snapshot(&h.join(".cargo/registry")), host_registry);
    // Cordon's layer holds the session's changes, without a privilege bit.
    let upper = cordon_home.path().join("caches/.seeded/pip-0/upper");
    assert_eq!(
        std::fs::read_to_string(upper.join("http/ab/wheel")).unwrap(),
        "poisoned\nmore\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(upper.join("linked"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o6000,
        0,
        "a privilege bit in Cordon's cache: {mode:o}"
    );

    // The next session sees the first one's cache, seeded as before.
    let out = sandboxed(
        cordon_home.path(),
        ws.path(),
        &h,
        &fake.path(),
        "cat \"$PIP_CACHE_DIR/http/ab/wheel\"; \
         ls \"$CARGO_HOME/registry/cache/idx\"",
    );
    let all = text(&out);
    assert!(all.contains("poisoned\nmore"), "{all}");
    assert!(all.contains("new-2.0.0.crate"), "{all}");
    assert!(
        !all.contains("dep-1.0.0.crate"),
        "deleted in Cordon's layer: {all}"
    );
}

/// `cargo build --offline` inside a session finds a crate that only the host's registry
/// cache has (Cordon's own starts empty): the seed is what makes it build.
#[test]
fn cargo_builds_offline_from_what_the_hosts_registry_already_has() {
    let Some(_) = home_tool("cargo") else {
        eprintln!("skipped: no cargo under $HOME on this host");
        return;
    };
    let home = PathBuf::from(std::env::var_os("HOME").unwrap());
    // A crate the host's registry holds (this workspace's own build fetched it).
    let Some((crate_file, name, version)) = std::fs::read_dir(home.join(".cargo/registry/cache"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let stem = file.strip_suffix(".crate")?.to_string();
            let (name, version) = stem.rsplit_once('-')?;
            (name == "itoa").then(|| (e.path(), name.to_string(), version.to_string()))
        })
        .next()
    else {
        eprintln!("skipped: the host's cargo registry has no itoa");
        return;
    };
    // Only this crate's file is compared afterwards: other builds on the machine may add
    // to the host's registry meanwhile.
    let crate_bytes = std::fs::read(&crate_file).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let cordon_home = tempfile::tempdir().unwrap();
    let app = ws.path().join("app");
    write(
        &app.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{name} = \"={version}\"\n"
        ),
    );
    write(
        &app.join("src/main.rs"),
        "fn main() { println!(\"seeded {}\", itoa::Buffer::new().format(42)); }\n",
    );
    let path = std::env::var("PATH").unwrap();
    let out = sandboxed(
        cordon_home.path(),
        ws.path(),
        &home,
        &path,
        "cd app && cargo run --offline -q",
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("seeded 42"), "{all}");
    // What cargo unpacked and recorded went to Cordon's layer; the host's crate stayed.
    assert_eq!(std::fs::read(&crate_file).unwrap(), crate_bytes);
    assert!(
        cordon_home
            .path()
            .join("caches/.seeded/cargo-0/upper")
            .is_dir()
    );
}

/// An earlier session could leave a link where a seed is mounted (Cordon's cache is the
/// sessions' to write): the next session refuses to mount over it, so nothing lands in the
/// link's target on the host, and the other seeds and the session still work.
#[test]
fn a_link_planted_at_a_seed_point_is_not_mounted_over() {
    let fake = FakeHome::new();
    let h = fake.home();
    write(&h.join(".npm/_cacache/index"), "host npm\n");
    write(&h.join(".cache/pip/wheel"), "host wheel\n");
    let ws = tempfile::tempdir().unwrap();
    let cordon_home = tempfile::tempdir().unwrap();
    let target = tempfile::tempdir().unwrap();
    let npm = cordon_home.path().join("caches/npm");
    std::fs::create_dir_all(&npm).unwrap();
    std::os::unix::fs::symlink(target.path(), npm.join("_cacache")).unwrap();
    let out = sandboxed(
        cordon_home.path(),
        ws.path(),
        &h,
        &fake.path(),
        "cat \"$PIP_CACHE_DIR/wheel\"; ls \"$npm_config_cache/_cacache/\" 2>&1; \
         echo planted > \"$npm_config_cache/_cacache/x\" 2>&1; echo session-done",
    );
    let all = text(&out);
    assert!(
        all.contains("host wheel") && all.contains("session-done"),
        "{all}"
    );
    assert!(
        !all.contains("host npm"),
        "mounted over the planted link: {all}"
    );
    assert_eq!(
        std::fs::read_dir(target.path()).unwrap().count(),
        0,
        "the link's target on the host was written: {all}"
    );
    assert_eq!(
        std::fs::read_to_string(h.join(".npm/_cacache/index")).unwrap(),
        "host npm\n"
    );
}

/// pyenv's shims get a layer of the session's own. `pip install` through a shim ends with
/// `pyenv rehash`, which rewrites every shim; with the shims read-only it failed (exit 1,
/// after a good install). Inside, the install now exits 0 and its module imports, and what
/// the session did to the shims (the rehash, a file planted, a shim removed) is seen by it
/// alone: the host's shims are byte for byte and mode for mode as they were.
#[test]
fn pip_install_through_a_pyenv_shim_succeeds_and_leaves_the_hosts_shims_alone() {
    let Some(pip) = home_tool("pip") else {
        eprintln!("skipped: no pip under $HOME on this host");
        return;
    };
    let home = std::fs::canonicalize(std::env::var_os("HOME").unwrap()).unwrap();
    let shims = home.join(".pyenv/shims");
    if !pip.starts_with(&shims) {
        eprintln!("skipped: pip is not a pyenv shim here");
        return;
    }
    let host_shims = snapshot(&shims);
    let ws = tempfile::tempdir().unwrap();
    let cordon_home = tempfile::tempdir().unwrap();
    let wheel = "tinypkg-0.1-py3-none-any.whl";
    cordon_tests::wheel::build_wheel(&ws.path().join(wheel));
    let script = format!(
        "pip install -q --no-index --no-cache-dir --target site ./{wheel} && echo pip-exit-0 && \
         python -m pip install -q --no-index --no-cache-dir --target site2 ./{wheel} && \
         echo python-m-pip-exit-0 && \
         PYTHONPATH=site python -c 'import tinypkg; print(tinypkg.VALUE)' && \
         echo planted > \"$PYENV_ROOT/shims/cordon-planted\" && \
         rm \"$PYENV_ROOT/shims/pip\" && ls \"$PYENV_ROOT/shims\" | grep -c cordon-planted"
    );
    let out = sandboxed(
        cordon_home.path(),
        ws.path(),
        &home,
        &std::env::var("PATH").unwrap(),
        &script,
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("pip-exit-0"), "{all}");
    assert!(all.contains("python-m-pip-exit-0"), "{all}");
    assert!(all.contains("served by the test index"), "{all}");
    assert!(!all.contains("cannot rehash"), "{all}");
    assert_eq!(snapshot(&shims), host_shims, "the host's shims changed");
    // And the next session starts from the host's shims again.
    let out = sandboxed(
        cordon_home.path(),
        ws.path(),
        &home,
        &std::env::var("PATH").unwrap(),
        "ls \"$PYENV_ROOT/shims\"",
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(!all.contains("cordon-planted"), "{all}");
    assert!(
        all.lines().any(|l| l == "pip"),
        "the removed shim is back: {all}"
    );
}
