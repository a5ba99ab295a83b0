//! Git redirection, end to end (Docker too for the file-level plants and for a repository
//! made from nothing, where its minimal image has no git): a scripted model's Bash tries every
//! way to make the host's git run a program (a `commondir` to a config of its own, a
//! `config.worktree` with `extensions.worktreeConfig` on, a hook in the in-tree
//! `core.hooksPath` dir, an included config file, a nested repository's and a submodule's
//! config, `.git` replaced by a gitdir file, a submodule repointed, a fresh nested
//! repository reached through a gitlink, `git init` in a workspace without one). Then the
//! test does what a user does on the host: `git status` and `git commit` in each
//! repository, and a second `cordon run` (whose prompt runs git on the host). Every
//! planted command only touches a marker file in the test's own temp dir; none may exist.
//! Meanwhile ordinary git (add, commit, checkout -b, stash, rebase) must work inside.
//!
//! Host git here runs with the test's own HOME and GIT_CONFIG_GLOBAL (temp files), never
//! the real ones.

use std::path::{Path, PathBuf};
use std::process::Command;

use cordon_tests::Workspace;
use cordon_tests::agent::{run_json_ok, tool_results};
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use serde_json::json;

/// The test's own host environment for git: temp HOME and global config.
struct HostGit {
    home: PathBuf,
    global: PathBuf,
}

impl HostGit {
    fn new(dir: &Path) -> Self {
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let global = dir.join("gitconfig");
        std::fs::write(
            &global,
            "[user]\n\tname = Host User\n\temail = host@example.com\n\
             [init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n",
        )
        .unwrap();
        Self { home, global }
    }

    /// `git ARGS` in `dir` as the user would run it (their hooks and config honoured).
    fn run(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_GLOBAL", &self.global)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap()
    }

    /// What a user does next in the repository at `dir`: `git status`, a commit (its
    /// hooks run), `git log`.
    fn as_the_user_next(&self, dir: &Path) {
        self.ok(dir, &["status"]);
        self.ok(dir, &["commit", "-q", "--allow-empty", "-m", "host"]);
        self.ok(dir, &["log", "-1"]);
    }

    fn ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.run(dir, args);
        assert!(out.status.success(), "git {args:?} in {dir:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// A workspace repository with everything an attacker would aim at: an in-tree hooks
/// path, an included config, worktree config on, a nested repository and a submodule.
fn hostile_target(git: &HostGit, root: &Path, ws: &Path) {
    git.ok(ws, &["init", "-q"]);
    std::fs::create_dir(ws.join(".githooks")).unwrap();
    std::fs::write(ws.join(".githooks/README"), "team hooks\n").unwrap();
    std::fs::write(ws.join(".gitconfig.project"), "[user]\n\tname = Team\n").unwrap();
    git.ok(ws, &["config", "core.hooksPath", ".githooks"]);
    git.ok(ws, &["config", "include.path", "../.gitconfig.project"]);
    git.ok(ws, &["config", "extensions.worktreeConfig", "true"]);
    std::fs::write(ws.join("app.txt"), "v1\n").unwrap();
    let lib = ws.join("vendor/lib");
    std::fs::create_dir_all(&lib).unwrap();
    git.ok(&lib, &["init", "-q"]);
    git.ok(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
    let upstream = root.join("upstream-sub");
    std::fs::create_dir_all(&upstream).unwrap();
    git.ok(&upstream, &["init", "-q"]);
    std::fs::write(upstream.join("s.txt"), "sub\n").unwrap();
    git.ok(&upstream, &["add", "s.txt"]);
    git.ok(&upstream, &["commit", "-q", "-m", "sub"]);
    git.ok(
        ws,
        &["submodule", "add", "-q", upstream.to_str().unwrap(), "sub"],
    );
    git.ok(ws, &["add", "app.txt", ".githooks", ".gitconfig.project"]);
    git.ok(ws, &["commit", "-q", "-m", "start"]);
}

/// The Bash the hostile model runs: each line plants one redirection whose command
/// touches `marks/<name>`, and reports whether the write went through. With `redirect`
/// off, the lines that redirect the whole git dir (commondir, `.git` replaced, the
/// submodule repointed) are left out, so each file-level plant stands on its own.
fn attacks(marks: &Path, redirect: bool) -> String {
    let m = |name: &str| format!("touch {}/{name}", marks.display());
    let cfg = |name: &str| format!("[core]\\n\\tfsmonitor = \\\"{}\\\"\\n", m(name));
    let hook = |name: &str| format!("#!/bin/sh\\n{}\\n", m(name));
    [
        // A common dir of our own, with its own config.
        "mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/".to_string(),
        format!("printf '{}' > evil/config", cfg("commondir")),
        "echo \"$PWD/evil\" > .git/commondir && echo WROTE commondir".to_string(),
        format!(
            "printf '{}' > .git/config.worktree && echo WROTE config.worktree",
            cfg("worktree")
        ),
        format!(
            "printf '{}' > .githooks/pre-commit && chmod +x .githooks/pre-commit && echo WROTE hookspath",
            hook("hookspath")
        ),
        format!(
            "printf '{}' >> .gitconfig.project && echo WROTE include",
            cfg("include")
        ),
        format!(
            "printf '{}' >> .git/config && echo WROTE config",
            cfg("config")
        ),
        format!(
            "printf '{}' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo WROTE hooks",
            hook("hooks")
        ),
        format!(
            "printf '{}' >> vendor/lib/.git/config && echo WROTE nested",
            cfg("nested")
        ),
        format!(
            "printf '{}' > vendor/lib/.git/hooks/pre-commit && chmod +x vendor/lib/.git/hooks/pre-commit && echo WROTE nested-hook",
            hook("nested-hook")
        ),
        format!(
            "printf '{}' >> .git/modules/sub/config && echo WROTE submodule",
            cfg("submodule")
        ),
        "echo 'gitdir: ../evil' > sub/.git && echo WROTE sub-gitfile".to_string(),
        "mv .git .git-moved && echo WROTE moved-git".to_string(),
        "echo 'gitdir: evil' > .git && echo WROTE git-file".to_string(),
        // A git dir the start never saw, whose data are links to the root's (git follows
        // them), reached through a gitlink and a `.git` file: the root's status runs the
        // submodule's status in it.
        format!(
            "mkdir -p .git/modules/lnk lnk && printf 'ref: refs/heads/main\\n' > .git/modules/lnk/HEAD && ln -s ../../objects .git/modules/lnk/objects && ln -s ../../refs .git/modules/lnk/refs && printf '{}' > .git/modules/lnk/config && echo 'gitdir: ../.git/modules/lnk' > lnk/.git && git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),lnk && echo WROTE linked",
            cfg("linked")
        ),
        // A stale worktree entry that is a link: git's prune empties what it names.
        format!(
            "mkdir -p .git/worktrees && ln -s {}/victim .git/worktrees/w && echo WROTE worktree-link",
            marks.parent().unwrap().display()
        ),
        // A fresh nested repository the root's status recurses into through a gitlink.
        format!(
            "git init -q planted && printf '{}' >> planted/.git/config && printf '{}' > planted/.git/hooks/pre-commit && chmod +x planted/.git/hooks/pre-commit && git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),planted && echo WROTE planted",
            cfg("planted"),
            hook("planted-hook")
        ),
    ]
    .iter()
    .filter(|line| {
        redirect
            || !["commondir", "sub-gitfile", "moved-git", "git-file"]
                .iter()
                .any(|r| line.ends_with(&format!("WROTE {r}")))
    })
    .map(|line| format!("( {line} ) 2>/dev/null; "))
    .collect()
}

/// Ordinary git inside the sandbox: all of it must work.
const ORDINARY: &str = "set -e; G='git -c user.name=agent -c user.email=a@b'; \
    echo v2 > app.txt; $G add app.txt; $G commit -q -m inside; \
    $G checkout -q -b feature; echo f > f.txt; $G add f.txt; $G commit -q -m feat; \
    echo wip >> app.txt; $G stash -q; $G stash pop -q; $G checkout -q app.txt; \
    $G checkout -q main; echo m > m.txt; $G add m.txt; $G commit -q -m main2; \
    $G rebase -q feature; $G branch --list; echo GITOK";

/// The planted `git init` in a workspace that had no repository.
fn init_attack(marks: &Path) -> String {
    let m = |name: &str| format!("touch {}/{name}", marks.display());
    format!(
        "git init -q && git -c user.name=a -c user.email=b commit -q --allow-empty -m inside && \
         printf '[core]\\n\\tfsmonitor = \\\"{}\\\"\\n\\tpager = \\\"{}\\\"\\n' >> .git/config && \
         printf '#!/bin/sh\\n{}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo INITOK",
        m("init-fsmonitor"),
        m("init-pager"),
        m("init-hook")
    )
}

/// The control: the same kind of plant, made on the host, does run with this host git
/// (so an empty marker dir below means the plants were stopped, not that git ignored them).
fn control(git: &HostGit, root: &Path) {
    let repo = root.join("control");
    let marks = root.join("control-marks");
    std::fs::create_dir_all(&marks).unwrap();
    std::fs::create_dir_all(&repo).unwrap();
    git.ok(&repo, &["init", "-q"]);
    let fsmonitor = format!("touch {}/fsmonitor", marks.display());
    git.ok(&repo, &["config", "core.fsmonitor", &fsmonitor]);
    let hook = repo.join(".git/hooks/pre-commit");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\ntouch {}/hook\n", marks.display()),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git.run(&repo, &["status"]);
    git.ok(&repo, &["commit", "-q", "--allow-empty", "-m", "c"]);
    let mut ran = marks_in(&marks);
    ran.sort();
    assert_eq!(ran, ["fsmonitor", "hook"], "the control plants must run");
}

/// A second session on `ws` (its prompt runs git on the host, and shows the branch), and
/// then nothing planted has run.
async fn second_session_runs_nothing(home: &Path, ws: &Path, args: &[&str], marks: &Path) {
    let again = ScriptedModel::start(vec![Turn::text("again")])
        .await
        .unwrap();
    run_json_ok(&again, home, ws, args, "again").await;
    assert!(
        marks_in(marks).is_empty(),
        "planted commands ran on the host: {:?}",
        marks_in(marks)
    );
    let system = again.requests()[0].body["system"].to_string();
    assert!(system.contains("Git branch: main"), "{system}");
}

fn marks_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_git_redirections_never_run_on_the_host() {
    let root = tempfile::tempdir().unwrap();
    let marks = root.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let git = HostGit::new(root.path());
    control(&git, root.path());
    let ws = Workspace::new();
    hostile_target(&git, root.path(), ws.path());
    let fresh = Workspace::new();
    std::fs::write(fresh.join("readme.txt"), "no repository yet\n").unwrap();
    // What the worktree link names: a directory of the test's own.
    let victim = root.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("precious.txt"), "keep\n").unwrap();

    let turns = vec![
        Turn::tool_use("a1", "Bash", json!({"command": attacks(&marks, true)})),
        Turn::tool_use("g1", "Bash", json!({"command": ORDINARY})),
        Turn::text("done"),
    ];
    let model = ScriptedModel::start(turns).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let mode = ["--permission-mode", "bypassPermissions"];
    run_json_ok(&model, home.path(), ws.path(), &mode, "attack").await;
    let requests = model.requests();
    let (_, attack_out, _) = tool_results(&requests[1].body).remove(0);
    let (_, ordinary_out, ordinary_err) = tool_results(&requests[2].body).remove(0);
    // Kernel-held: none of these writes went through inside the sandbox.
    for pinned in [
        "commondir",
        "config.worktree",
        "hookspath",
        "include",
        "config",
        "hooks",
        "nested",
        "nested-hook",
        "submodule",
        "sub-gitfile",
        "moved-git",
        "git-file",
    ] {
        let wrote = attack_out.lines().any(|l| l == format!("WROTE {pinned}"));
        assert!(!wrote, "{pinned} was writable: {attack_out}");
    }
    for live in ["planted", "linked", "worktree-link"] {
        assert!(
            attack_out.contains(&format!("WROTE {live}")),
            "{live}: {attack_out}"
        );
    }
    assert!(
        ordinary_out.contains("GITOK") && !ordinary_err,
        "ordinary git failed inside: {ordinary_out}"
    );

    // The other workspace: `git init` works inside, and its plants are vetted.
    let model2 = ScriptedModel::start(vec![
        Turn::tool_use("i1", "Bash", json!({"command": init_attack(&marks)})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    run_json_ok(&model2, home.path(), fresh.path(), &mode, "init").await;
    let (_, init_out, _) = tool_results(&model2.requests()[1].body).remove(0);
    assert!(
        init_out.contains("INITOK"),
        "git init failed inside: {init_out}"
    );

    // What a user does next on the host.
    let w = ws.path();
    git.ok(w, &["status"]);
    git.ok(w, &["commit", "-q", "--allow-empty", "-m", "host"]);
    git.ok(w, &["log", "-1"]);
    git.ok(&w.join("vendor/lib"), &["status"]);
    git.ok(
        &w.join("vendor/lib"),
        &["commit", "-q", "--allow-empty", "-m", "h"],
    );
    git.ok(&w.join("sub"), &["status"]);
    git.ok(&w.join("planted"), &["status"]);
    git.ok(
        &w.join("planted"),
        &["commit", "-q", "--allow-empty", "-m", "h"],
    );
    git.ok(&w.join("lnk"), &["status"]);
    // Git's maintenance prunes stale worktrees; the link it would have deleted through is
    // gone, and what it named is whole.
    git.ok(w, &["worktree", "prune"]);
    git.ok(w, &["gc", "--quiet"]);
    assert_eq!(
        std::fs::read_to_string(victim.join("precious.txt")).unwrap(),
        "keep\n"
    );
    git.ok(fresh.path(), &["status"]);
    git.ok(fresh.path(), &["log", "-1"]);
    git.ok(fresh.path(), &["commit", "-q", "--allow-empty", "-m", "h"]);
    second_session_runs_nothing(home.path(), w, &mode, &marks).await;
    // The ordinary work done inside is all there.
    let log = git.ok(w, &["log", "--format=%s"]);
    for subject in ["host", "main2", "feat", "inside", "start"] {
        assert!(log.contains(subject), "{subject} missing from {log}");
    }
    assert!(git.ok(w, &["branch", "--list"]).contains("feature"));
    // Nothing of the pinning is left behind.
    for gone in [".git/commondir", ".git/config.worktree"] {
        assert!(!w.join(gone).exists(), "{gone} left behind");
    }
    // What the vetting removed is kept, not lost.
    let quarantined = std::fs::read_dir(fresh.join(".git"))
        .unwrap()
        .flatten()
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("cordon-quarantine-")
        });
    assert!(quarantined, "the vetting keeps what it removed");
}

/// The file-level plants alone (no redirection of the whole git dir shadowing them): the
/// worktree config, the in-tree hooks path, the included file, the repository's own
/// config and hooks, the nested repository's and the submodule's config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pinned_control_file_holds_on_its_own() {
    each_pinned_control_file(&[]).await;
}

/// The same on the Docker backend (its masks come from the same plan). The minimal image
/// has no git, so the one plant that needs git inside (a fresh nested repository) is not
/// made there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pinned_control_file_holds_on_its_own_in_docker() {
    if let Err(why) = cordon_tests::docker_ready() {
        eprintln!("skipped: {why}");
        return;
    }
    each_pinned_control_file(&["--sandbox", "docker", "--image", "cordon-minimal"]).await;
}

/// A repository set up as husky 9 sets one up: `core.hooksPath` is `.husky/_`, whose
/// shims run the script of the same name one level up (`.husky/pre-commit`), outside the
/// hooks path. The session rewrites that script; the user's next `git commit` on the host
/// must not run it. The same rewrite made on the host then does run (the control).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_husky_hook_script_cannot_be_rewritten() {
    husky_hook_script_cannot_be_rewritten(".husky").await;
}

/// As above with husky's directory of the repository's choosing (`husky tools/git-hooks`
/// makes the hooks path `tools/git-hooks/_`): no policy names that directory, the hooks
/// path's `_` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_husky_hook_script_in_a_custom_dir_cannot_be_rewritten() {
    husky_hook_script_cannot_be_rewritten("tools/git-hooks").await;
}

async fn husky_hook_script_cannot_be_rewritten(dir: &str) {
    let root = tempfile::tempdir().unwrap();
    let marks = root.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let git = HostGit::new(root.path());
    let ws = Workspace::new();
    let w = ws.path();
    git.ok(w, &["init", "-q"]);
    std::fs::create_dir_all(w.join(dir).join("_")).unwrap();
    let exec = |rel: &str, text: &str| {
        let path = w.join(rel);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    };
    // The shim runner: the hook's name, its script one level up, run when it exists.
    exec(
        &format!("{dir}/_/h"),
        "#!/bin/sh\nn=$(basename \"$0\")\ns=$(dirname \"$(dirname \"$0\")\")/$n\n[ -f \"$s\" ] || exit 0\nsh -e \"$s\"\n",
    );
    exec(
        &format!("{dir}/_/pre-commit"),
        "#!/bin/sh\n. \"$(dirname \"$0\")/h\"\n",
    );
    std::fs::write(w.join(dir).join("pre-commit"), "true\n").unwrap();
    git.ok(w, &["config", "core.hooksPath", &format!("{dir}/_")]);
    git.ok(w, &["add", dir]);
    git.ok(w, &["commit", "-q", "-m", "husky"]);
    let plant = format!("touch {}/husky\n", marks.display());
    let model = ScriptedModel::start(vec![
        Turn::tool_use(
            "a1",
            "Bash",
            json!({"command": format!(
                "printf '{p}' > {dir}/pre-commit && echo WROTE husky; printf '{p}' > {dir}/pre-push && echo WROTE husky-new",
                p = plant.replace('\n', "\\n"),
            )}),
        ),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let args = ["--permission-mode", "bypassPermissions"];
    run_json_ok(&model, home.path(), w, &args, "attack").await;
    let (_, out, _) = tool_results(&model.requests()[1].body).remove(0);
    assert!(!out.contains("WROTE"), "{out}");
    assert_eq!(
        std::fs::read_to_string(w.join(dir).join("pre-commit")).unwrap(),
        "true\n"
    );
    assert!(!w.join(dir).join("pre-push").exists());
    git.ok(w, &["commit", "-q", "--allow-empty", "-m", "host"]);
    assert!(marks_in(&marks).is_empty(), "{:?}", marks_in(&marks));
    // The control: the same script written on the host runs at the next commit.
    std::fs::write(w.join(dir).join("pre-commit"), &plant).unwrap();
    git.ok(w, &["commit", "-q", "--allow-empty", "-m", "host2"]);
    assert_eq!(marks_in(&marks), ["husky"]);
}

/// A second name of a git control file, made in one session, used in the next: the
/// first session makes a repository and links its config under an ordinary name (its
/// config is clean, so the teardown keeps it); the second writes an fsmonitor through
/// that name while the config itself is pinned read-only. Every name of a protected file
/// is read-only, so the write fails and the host's `git status` runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_name_of_a_pinned_config_cannot_write_it() {
    let root = tempfile::tempdir().unwrap();
    let marks = root.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let git = HostGit::new(root.path());
    let ws = Workspace::new();
    let w = ws.path();
    let home = tempfile::tempdir().unwrap();
    let args = ["--permission-mode", "bypassPermissions"];
    let first = ScriptedModel::start(vec![
        Turn::tool_use(
            "a1",
            "Bash",
            json!({"command": "git init -q sub && ln sub/.git/config notes.txt && echo LINKED"}),
        ),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    run_json_ok(&first, home.path(), w, &args, "one").await;
    let (_, out, _) = tool_results(&first.requests()[1].body).remove(0);
    assert!(out.contains("LINKED"), "{out}");
    let fsmonitor = format!("touch {}/alias", marks.display());
    let second = ScriptedModel::start(vec![
        Turn::tool_use(
            "a1",
            "Bash",
            json!({"command": format!(
                "printf '[core]\\n\\tfsmonitor = \\\"{fsmonitor}\\\"\\n' >> notes.txt && echo WROTE"
            )}),
        ),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    run_json_ok(&second, home.path(), w, &args, "two").await;
    let (_, out, _) = tool_results(&second.requests()[1].body).remove(0);
    assert!(!out.contains("WROTE"), "{out}");
    git.run(&w.join("sub"), &["status"]);
    assert!(marks_in(&marks).is_empty(), "{:?}", marks_in(&marks));
    let config = std::fs::read_to_string(w.join("sub/.git/config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
    // The control: the same write made on the host runs at the next status.
    std::fs::write(
        w.join("notes.txt"),
        format!("{config}[core]\n\tfsmonitor = \"{fsmonitor}\"\n"),
    )
    .unwrap();
    git.run(&w.join("sub"), &["status"]);
    assert_eq!(marks_in(&marks), ["alias"]);
}

async fn each_pinned_control_file(backend: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    let marks = root.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let git = HostGit::new(root.path());
    let ws = Workspace::new();
    hostile_target(&git, root.path(), ws.path());
    let model = ScriptedModel::start(vec![
        Turn::tool_use("a1", "Bash", json!({"command": attacks(&marks, false)})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut args = vec!["--permission-mode", "bypassPermissions"];
    args.extend(backend);
    run_json_ok(&model, home.path(), ws.path(), &args, "attack").await;
    let (_, out, _) = tool_results(&model.requests()[1].body).remove(0);
    let wrote: Vec<&str> = out.lines().filter(|l| l.starts_with("WROTE")).collect();
    // What is not pinned but vetted at teardown (the two that need git inside are not
    // made in the minimal image).
    let expected: &[&str] = if backend.is_empty() {
        &["WROTE linked", "WROTE worktree-link", "WROTE planted"]
    } else {
        &["WROTE worktree-link"]
    };
    assert_eq!(wrote, expected, "{out}");
    let w = ws.path();
    // The worktree link was moved out at teardown, on either backend.
    assert!(
        std::fs::symlink_metadata(w.join(".git/worktrees/w")).is_err(),
        "the worktree link outlived the session"
    );
    git.ok(w, &["status"]);
    git.ok(w, &["commit", "-q", "--allow-empty", "-m", "host"]);
    git.ok(&w.join("vendor/lib"), &["status"]);
    git.ok(
        &w.join("vendor/lib"),
        &["commit", "-q", "--allow-empty", "-m", "h"],
    );
    git.ok(&w.join("sub"), &["status"]);
    assert!(
        marks_in(&marks).is_empty(),
        "planted commands ran on the host: {:?}",
        marks_in(&marks)
    );
}

/// A repository made from nothing inside a Docker session, as `git init` would leave it
/// (the minimal image has no git, so busybox writes the files): its config names an
/// fsmonitor and a pager, its hooks dir a pre-commit hook, and a nested one the same. The
/// teardown vetting runs before any host git sees them: the user's `git status` and `git
/// commit` and a second session (whose prompt runs git on the host) run nothing planted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_made_in_a_docker_session_runs_nothing_on_the_host() {
    if let Err(why) = cordon_tests::docker_ready() {
        eprintln!("skipped: {why}");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let marks = root.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let git = HostGit::new(root.path());
    control(&git, root.path());
    let ws = Workspace::new();
    std::fs::write(ws.join("readme.txt"), "no repository yet\n").unwrap();
    let m = |name: &str| format!("touch {}/{name}", marks.display());
    let init = |dir: &str, tag: &str| {
        format!(
            "mkdir -p {dir}/.git/objects/info {dir}/.git/objects/pack {dir}/.git/refs/heads \
             {dir}/.git/refs/tags {dir}/.git/hooks && \
             echo 'ref: refs/heads/main' > {dir}/.git/HEAD && \
             printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\
             \\tfsmonitor = \\\"{}\\\"\\n\\tpager = \\\"{}\\\"\\n' > {dir}/.git/config && \
             printf '#!/bin/sh\\n{}\\n' > {dir}/.git/hooks/pre-commit && \
             chmod +x {dir}/.git/hooks/pre-commit && echo INIT {tag}; ",
            m(&format!("{tag}-fsmonitor")),
            m(&format!("{tag}-pager")),
            m(&format!("{tag}-hook"))
        )
    };
    let command = format!("{}{}true", init(".", "root"), init("vendor/x", "nested"));
    let model = ScriptedModel::start(vec![
        Turn::tool_use("i1", "Bash", json!({"command": command})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let args = [
        "--sandbox",
        "docker",
        "--permission-mode",
        "bypassPermissions",
    ];
    run_json_ok(&model, home.path(), ws.path(), &args, "init").await;
    let (_, out, _) = tool_results(&model.requests()[1].body).remove(0);
    assert!(
        out.contains("INIT root") && out.contains("INIT nested"),
        "{out}"
    );

    // What a user does next on the host, in both repositories.
    for dir in [ws.path().to_path_buf(), ws.join("vendor/x")] {
        git.ok(&dir, &["-p", "log", "--all"]);
        git.as_the_user_next(&dir);
    }
    second_session_runs_nothing(home.path(), ws.path(), &args, &marks).await;
}

/// A repository made from nothing, as in the plain `git init` case, whose git dir the
/// session then makes unlistable (mode 311, its hooks dir too) along with a nested
/// repository's (mode 111): git still works in them (it opens its files by path, never
/// lists the git dir), so the teardown vetting must not skip what it cannot list. The
/// user's `git status` and `git commit` in both, and a second session, run nothing
/// planted. (Run unprivileged, this is the case where the vetting meets EACCES; as root it
/// never does.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_made_unlistable_in_the_session_runs_nothing_on_the_host() {
    let root = tempfile::tempdir().unwrap();
    let marks = root.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let git = HostGit::new(root.path());
    control(&git, root.path());
    let ws = Workspace::new();
    std::fs::write(ws.join("readme.txt"), "no repository yet\n").unwrap();
    let nested = format!(
        "git branch -M main && git init -q planted && \
         printf '[core]\\n\\tfsmonitor = \\\"touch {}/nested\\\"\\n' >> planted/.git/config && \
         chmod 311 .git/hooks .git && chmod 111 planted/.git && \
         git log -1 --format=%s && echo LOCKED",
        marks.display()
    );
    let command = format!("{} && {nested}", init_attack(&marks));
    let model = ScriptedModel::start(vec![
        Turn::tool_use("i1", "Bash", json!({"command": command})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mode = ["--permission-mode", "bypassPermissions"];
    run_json_ok(&model, home.path(), ws.path(), &mode, "init").await;
    let (_, out, _) = tool_results(&model.requests()[1].body).remove(0);
    // Git still works in a git dir it cannot list.
    assert!(
        out.contains("INITOK") && out.contains("inside\nLOCKED"),
        "{out}"
    );

    // What a user does next on the host, in both repositories.
    for dir in [ws.path().to_path_buf(), ws.join("planted")] {
        git.as_the_user_next(&dir);
    }
    second_session_runs_nothing(home.path(), ws.path(), &mode, &marks).await;
    // What the vetting removed is kept, not lost.
    for dir in [ws.join(".git"), ws.join("planted/.git")] {
        let quarantined = std::fs::read_dir(&dir).unwrap().flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("cordon-quarantine-")
        });
        assert!(quarantined, "{dir:?}: the vetting keeps what it removed");
    }
}
