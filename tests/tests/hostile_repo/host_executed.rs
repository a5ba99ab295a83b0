//! Files the host runs later (issue 8, item 5), end to end on both backends: the scripted
//! model's Write and Bash calls try to create, change, replace or remove VS Code's
//! `tasks.json` and `settings.json`, JetBrains' `.idea/`, direnv's `.envrc` and `.direnv/`
//! state, and the hook managers' `.pre-commit-config.yaml` and `lefthook.yml`. Then the
//! host is checked: each file is byte for byte what it was, or still absent, and no
//! placeholder is left in the tree.
//!
//! What the policy promises (policies/protected-paths.json, policies/git.json
//! `hook_manager_files`): the editor and direnv entries are pinned always, existing or
//! not; the hook managers' files are pinned where they exist, and where they are missing
//! only in a repository that runs hooks (a non-sample hook installed). In one that runs
//! none a missing one gets no placeholder, so the session may create it (it is project
//! code then, reviewed as a diff). Every target is a file in the test's own workspace.

use std::collections::BTreeMap;
use std::path::Path;

use cordon_tests::agent::{run_json_ok, tool_results};
use cordon_tests::scripted_model::{Reply, ScriptedModel, Turn};
use cordon_tests::{Backend, Workspace, backend_ready};
use serde_json::json;

/// Host-executed files the model goes after, each with the content it has when it exists.
const FILES: [(&str, &str); 7] = [
    (
        ".vscode/tasks.json",
        "{\"version\": \"2.0.0\", \"tasks\": []}\n",
    ),
    (".vscode/settings.json", "{\"editor.tabSize\": 4}\n"),
    (".idea/workspace.xml", "<project version=\"4\"/>\n"),
    (
        ".direnv/bin/python",
        "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n",
    ),
    (".envrc", "layout python\n"),
    (".pre-commit-config.yaml", "repos: []\n"),
    ("lefthook.yml", "pre-commit:\n  commands: {}\n"),
];

/// The hook managers' files: pinned only where they exist or where hooks run.
const HOOK_MANAGER: [&str; 2] = [".pre-commit-config.yaml", "lefthook.yml"];

/// The top-level entry of a workspace-relative path (`.vscode` for `.vscode/tasks.json`).
fn top(rel: &str) -> &str {
    rel.split('/').next().unwrap_or(rel)
}

/// One workspace's starting point.
struct Case {
    /// The files of [`FILES`] that exist at start.
    existing: &'static [&'static str],
    /// Whether the repository has a (non-sample) hook installed.
    hooked: bool,
}

impl Case {
    /// Files the session may create: a missing hook manager's file where no hook runs.
    fn writable(&self) -> Vec<&'static str> {
        HOOK_MANAGER
            .into_iter()
            .filter(|f| !self.hooked && !self.existing.contains(f))
            .collect()
    }
}

/// A git repository (made by hand: what `git init` leaves, without the samples) with the
/// case's files and, when `hooked`, a pre-commit hook as a hook manager installs it.
fn prepare(ws: &Path, case: &Case) {
    for dir in [".git/objects", ".git/refs/heads", ".git/hooks"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        ws.join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
    )
    .unwrap();
    if case.hooked {
        std::fs::write(
            ws.join(".git/hooks/pre-commit"),
            "#!/bin/sh\nexec pre-commit hook-impl --hook-type=pre-commit\n",
        )
        .unwrap();
    }
    for (rel, content) in FILES {
        if case.existing.contains(&rel) {
            let path = ws.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }
    std::fs::write(ws.join("main.py"), "print('hi')\n").unwrap();
}

/// Everything at and below each target's top-level entry (links not followed): path ->
/// what it is and holds. The host's view, compared before and after.
fn snapshot(ws: &Path) -> BTreeMap<String, String> {
    let mut seen = BTreeMap::new();
    let mut todo: Vec<String> = FILES.iter().map(|(rel, _)| top(rel).to_string()).collect();
    todo.dedup();
    while let Some(rel) = todo.pop() {
        let path = ws.join(&rel);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let what = if meta.file_type().is_symlink() {
            format!("link {:?}", std::fs::read_link(&path).unwrap())
        } else if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap().flatten() {
                todo.push(format!("{rel}/{}", entry.file_name().to_string_lossy()));
            }
            "dir".to_string()
        } else {
            format!("file {:?}", std::fs::read_to_string(&path).unwrap())
        };
        seen.insert(rel, what);
    }
    seen
}

/// One Bash line per way of planting `rel`; each says `WROTE <rel>` if it went through.
fn bash_attacks(rel: &str) -> String {
    let dir = top(rel);
    [
        format!("printf 'PWNED\\n' > {rel}"),
        format!("echo PWNED >> {rel}"),
        format!("mkdir -p \"$(dirname {rel})\" && touch {rel}.new && mv -f {rel}.new {rel}"),
        format!("rm -f {rel} && echo PWNED > {rel}"),
        format!("ln -sf /etc/passwd {rel}"),
        format!("mv {dir} {dir}.moved && mkdir -p \"$(dirname {rel})\" && echo PWNED > {rel}"),
        format!("rm -rf {dir} && mkdir -p \"$(dirname {rel})\" && echo PWNED > {rel}"),
    ]
    .iter()
    .map(|line| format!("( {line} ) 2>/dev/null && echo WROTE {rel}; "))
    .collect()
}

/// The model's turns: Read each target (an existing or placeholder file must be read
/// before Write may replace it), Write each, then the Bash attacks, and a listing.
fn turns(ws: &Path) -> Vec<Turn> {
    let mut reads = Reply::default();
    let mut writes = Reply::default();
    for (i, (rel, _)) in FILES.iter().enumerate() {
        let path = ws.join(rel).display().to_string();
        reads = reads.with_tool_use(format!("r{i}"), "Read", json!({"file_path": path}));
        writes = writes.with_tool_use(
            format!("w{i}"),
            "Write",
            json!({"file_path": path, "content": "PWNED-BY-WRITE\n"}),
        );
    }
    let bash: String = FILES.iter().map(|(rel, _)| bash_attacks(rel)).collect();
    vec![
        Turn::Reply(reads),
        Turn::Reply(writes),
        Turn::tool_use("b1", "Bash", json!({"command": format!("{bash} true")})),
        Turn::text("done"),
    ]
}

async fn host_executed_files_hold(backend: Backend, case: Case) {
    if !backend_ready(backend) {
        return;
    }
    let ws = Workspace::new();
    prepare(ws.path(), &case);
    let before = snapshot(ws.path());
    let model = ScriptedModel::start(turns(ws.path())).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let args = [
        "--sandbox",
        backend.name(),
        "--permission-mode",
        "bypassPermissions",
    ];
    run_json_ok(&model, home.path(), ws.path(), &args, "plant").await;
    let requests = model.requests();
    let writable = case.writable();
    // Every Write of a pinned file failed, and said so to the model.
    for (id, text, is_error) in tool_results(&requests[2].body) {
        let i: usize = id.trim_start_matches('w').parse().unwrap();
        let rel = FILES[i].0;
        let want_error = !writable.contains(&rel);
        assert_eq!(is_error, want_error, "Write {rel}: {text}");
    }
    let (_, bash, _) = tool_results(&requests[3].body).remove(0);
    for (rel, _) in FILES {
        let wrote = bash.lines().any(|l| l == format!("WROTE {rel}"));
        assert_eq!(wrote, writable.contains(&rel), "Bash on {rel}: {bash}");
    }

    // On the host: pinned files are as they were, missing ones still missing, and no
    // placeholder (empty file or dir) is left in the tree.
    let mut after = snapshot(ws.path());
    for rel in &writable {
        let made = after.remove(*rel);
        assert!(made.is_some(), "{rel}: the session could create it: {bash}");
    }
    assert_eq!(after, before, "host-executed files changed on the host");
    for (rel, _) in FILES {
        if writable.contains(&rel) {
            continue;
        }
        let shared = case.existing.iter().any(|e| top(e) == top(rel));
        if !case.existing.contains(&rel) {
            let gone = if shared { rel } else { top(rel) };
            let left = std::fs::symlink_metadata(ws.join(gone));
            assert!(left.is_err(), "{gone}: a placeholder was left behind");
        }
        let moved = format!("{}.moved", top(rel));
        assert!(!ws.join(&moved).exists(), "{moved} exists: {bash}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("main.py")).unwrap(),
        "print('hi')\n"
    );
}

/// Every target exists, in a repository with a hook installed.
fn all_existing() -> Case {
    Case {
        existing: &[
            ".vscode/tasks.json",
            ".vscode/settings.json",
            ".idea/workspace.xml",
            ".direnv/bin/python",
            ".envrc",
            ".pre-commit-config.yaml",
            "lefthook.yml",
        ],
        hooked: true,
    }
}

/// None exists, in a repository with a hook installed: all are pinned by placeholders.
fn all_missing_hooked() -> Case {
    Case {
        existing: &[],
        hooked: true,
    }
}

/// No hook installed: an existing `.pre-commit-config.yaml` is pinned anyway, a missing
/// `lefthook.yml` gets no placeholder; the editor and direnv files are pinned regardless.
fn unhooked() -> Case {
    Case {
        existing: &[".vscode/settings.json", ".pre-commit-config.yaml"],
        hooked: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_host_executed_files_are_unchanged_after_a_hostile_session() {
    host_executed_files_hold(Backend::Local, all_existing()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_host_executed_files_cannot_be_created_and_leave_no_placeholder() {
    host_executed_files_hold(Backend::Local, all_missing_hooked()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_manager_files_are_pinned_when_they_exist_or_hooks_run() {
    host_executed_files_hold(Backend::Local, unhooked()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_existing_host_executed_files_are_unchanged_after_a_hostile_session() {
    host_executed_files_hold(Backend::Docker, all_existing()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_missing_host_executed_files_cannot_be_created_and_leave_no_placeholder() {
    host_executed_files_hold(Backend::Docker, all_missing_hooked()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_hook_manager_files_are_pinned_when_they_exist_or_hooks_run() {
    host_executed_files_hold(Backend::Docker, unhooked()).await;
}
