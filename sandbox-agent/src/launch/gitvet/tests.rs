use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::launch::gitguard::tests::git;

fn now() -> (i64, i64) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (t.as_secs() as i64, i64::from(t.subsec_nanos()))
}

fn record(ws: &Path, pinned: &[&str]) -> GuardRecord {
    GuardRecord {
        workspace: ws.to_path_buf(),
        started: now(),
        git_dirs: pinned.iter().map(|p| ws.join(p)).collect(),
    }
}

fn hook(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\ntouch /nonexistent/x\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn quarantine(git_dir: &Path) -> PathBuf {
    std::fs::read_dir(git_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("cordon-quarantine-")
        })
        .expect("a quarantine dir")
}

#[test]
fn a_repository_made_in_the_session_keeps_only_harmless_config_and_sample_hooks() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    let rec = record(ws, &[]);
    git(ws, &["init", "-q"]);
    let g = ws.join(".git");
    let mut config = std::fs::read_to_string(g.join("config")).unwrap();
    config.push_str(
        "[core]\n\tfsmonitor = touch /nonexistent/x\n[user]\n\tname = Me\n\
         [remote \"origin\"]\n\turl = https://example.com/r.git\n\
         [remote \"evil\"]\n\turl = ext::sh -c touch% /nonexistent/x\n\
         [alias]\n\tst = !touch /nonexistent/x\n[include]\n\tpath = ../planted.cfg\n",
    );
    std::fs::write(g.join("config"), config).unwrap();
    hook(&g.join("hooks/pre-commit"));
    let other = tempfile::tempdir().unwrap();
    std::fs::write(g.join("commondir"), other.path().to_str().unwrap()).unwrap();
    let findings = vet(&rec, gitguard::policy().unwrap());
    assert!(!findings.is_empty());

    let kept = crate::hostgit::list_config(&std::fs::read(g.join("config")).unwrap(), ws).unwrap();
    let keys: Vec<String> = kept.iter().map(key_of).collect();
    assert!(
        keys.contains(&"core.repositoryformatversion".to_string()),
        "{keys:?}"
    );
    assert!(keys.contains(&"user.name".to_string()));
    assert!(keys.contains(&"remote.origin.url".to_string()));
    for gone in [
        "core.fsmonitor",
        "remote.evil.url",
        "alias.st",
        "include.path",
    ] {
        assert!(!keys.contains(&gone.to_string()), "{gone} kept");
    }
    assert!(!g.join("hooks/pre-commit").exists());
    assert!(g.join("hooks/pre-commit.sample").exists(), "samples stay");
    assert!(!g.join("commondir").exists());
    let q = quarantine(&g);
    let report = std::fs::read_to_string(q.join("removed.txt")).unwrap();
    assert!(report.contains("core.fsmonitor") && report.contains("hooks/pre-commit"));
    let moved = std::fs::metadata(q.join("hooks/pre-commit")).unwrap();
    assert_eq!(
        moved.permissions().mode() & 0o111,
        0,
        "no longer executable"
    );
    assert!(
        std::fs::read_to_string(q.join("config"))
            .unwrap()
            .contains("fsmonitor"),
        "the original is kept"
    );
    // A second pass finds nothing left to do.
    assert!(vet(&rec, gitguard::policy().unwrap()).is_empty());
}

#[test]
fn pinned_and_untouched_repositories_are_left_alone() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    git(ws, &["init", "-q"]);
    git(&ws.join("old"), &["init", "-q"]);
    let planted = "[core]\n\tfsmonitor = mine\n";
    std::fs::write(ws.join("old/.git/config"), planted).unwrap();
    hook(&ws.join("old/.git/hooks/pre-commit"));
    // Everything above predates the session by more than the slack.
    let mut rec = record(ws, &[".git"]);
    rec.started.0 += 5;
    // The pinned root's config changes on the host (the user's own git config).
    std::fs::write(ws.join(".git/config"), planted).unwrap();
    assert!(vet(&rec, gitguard::policy().unwrap()).is_empty());
    assert_eq!(
        std::fs::read_to_string(ws.join("old/.git/config")).unwrap(),
        planted
    );
    assert!(ws.join("old/.git/hooks/pre-commit").exists());
}

#[test]
fn links_are_removed_never_followed() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = ws.path();
    let rec = record(ws, &[]);
    git(&ws.join("r"), &["init", "-q"]);
    let g = ws.join("r/.git");
    let target = outside.path().join("victim.cfg");
    std::fs::write(&target, "[core]\n\tfsmonitor = x\n").unwrap();
    std::fs::remove_file(g.join("config")).unwrap();
    std::os::unix::fs::symlink(&target, g.join("config")).unwrap();
    std::fs::remove_dir_all(g.join("hooks")).unwrap();
    hook(&outside.path().join("hooks/pre-commit"));
    std::os::unix::fs::symlink(outside.path().join("hooks"), g.join("hooks")).unwrap();
    vet(&rec, gitguard::policy().unwrap());
    assert!(std::fs::symlink_metadata(g.join("config")).is_err());
    assert!(std::fs::symlink_metadata(g.join("hooks")).is_err());
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "[core]\n\tfsmonitor = x\n"
    );
    assert!(outside.path().join("hooks/pre-commit").exists());
}

#[test]
fn a_bare_looking_directory_is_vetted_too() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    let rec = record(ws, &[]);
    let src = ws.join("src");
    std::fs::create_dir_all(src.join("objects")).unwrap();
    std::fs::create_dir_all(src.join("refs")).unwrap();
    std::fs::write(src.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        src.join("config"),
        "[core]\n\tpager = touch /nonexistent/x\n",
    )
    .unwrap();
    std::fs::write(src.join("main.rs"), "fn main() {}\n").unwrap();
    vet(&rec, gitguard::policy().unwrap());
    let text = std::fs::read_to_string(src.join("config")).unwrap();
    assert!(!text.contains("pager"), "{text}");
    assert!(src.join("main.rs").exists());
}

#[test]
fn a_dot_git_that_is_not_yet_a_repository_is_vetted() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    let rec = record(ws, &[]);
    hook(&ws.join(".git/hooks/post-checkout"));
    std::fs::write(ws.join(".git/config"), "[core]\n\tfsmonitor = x\n").unwrap();
    vet(&rec, gitguard::policy().unwrap());
    assert!(!ws.join(".git/hooks/post-checkout").exists());
    let text = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    assert!(!text.contains("fsmonitor"), "{text}");
}

/// A session (running as the user) plants an fsmonitor in a repository it made, a hook,
/// and then makes the git dir unlistable: git still reads `config` and runs
/// `hooks/pre-commit` by path, so the vetting must not skip what it cannot list. Run as
/// the user (nobody when the tests run as root, which never meets EACCES).
#[test]
fn a_git_dir_and_hooks_made_unlistable_in_the_session_are_vetted() {
    use crate::hostside::walk::tests::{as_walker, chmod, give_to_walker, mode};
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    let rec = record(ws, &[]);
    git(ws, &["init", "-q"]);
    git(&ws.join("planted"), &["init", "-q"]);
    for g in [ws.join(".git"), ws.join("planted/.git")] {
        let mut config = std::fs::read_to_string(g.join("config")).unwrap();
        config.push_str("[core]\n\tfsmonitor = \"touch /nonexistent/x\"\n");
        std::fs::write(g.join("config"), config).unwrap();
    }
    hook(&ws.join(".git/hooks/pre-commit"));
    give_to_walker(ws);
    chmod(&ws.join(".git/hooks"), 0o311);
    chmod(&ws.join(".git"), 0o311);
    chmod(&ws.join("planted/.git"), 0o111);
    let status = as_walker(|| {
        assert!(!vet(&rec, gitguard::policy().unwrap()).is_empty());
    });
    assert_eq!(
        status,
        nix::sys::wait::WaitStatus::Exited(status.pid().unwrap(), 0)
    );
    for g in [ws.join(".git"), ws.join("planted/.git")] {
        assert_eq!(mode(&g) & 0o700, 0o700, "{g:?} is listable again");
        let text = std::fs::read_to_string(g.join("config")).unwrap();
        assert!(!text.contains("fsmonitor"), "{g:?}: {text}");
        let report = std::fs::read_to_string(quarantine(&g).join("removed.txt")).unwrap();
        assert!(report.contains("core.fsmonitor"), "{report}");
    }
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(
        ws.join(".git/hooks/pre-commit.sample").exists(),
        "samples stay"
    );
    assert!(
        quarantine(&ws.join(".git"))
            .join("hooks/pre-commit")
            .exists()
    );
}

#[test]
fn a_record_naming_another_workspace_or_pinning_outside_is_not_acted_on() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    let other = tempfile::tempdir().unwrap();
    let other = other.path().canonicalize().unwrap();
    // A repository with a planted hook in the other tree: a vetting acting on the
    // record's word would rewrite it.
    git(&other, &["init", "-q"]);
    hook(&other.join(".git/hooks/pre-commit"));
    let state = tempfile::tempdir().unwrap();
    let write = |record: &GuardRecord| {
        std::fs::write(
            state.path().join(gitguard::RECORD),
            serde_json::to_vec(record).unwrap(),
        )
        .unwrap();
    };
    write(&record(&other, &[]));
    assert!(vet_session(state.path(), &ws).is_empty());
    assert!(other.join(".git/hooks/pre-commit").exists(), "left alone");
    assert!(
        !state.path().join(gitguard::RECORD).exists(),
        "the record is consumed"
    );
    assert!(matches!(
        check_record(&record(&other, &[]), &ws),
        Err(RecordError::OtherWorkspace { .. })
    ));
    let mut pinned = record(&ws, &[]);
    pinned.git_dirs = vec![other.join(".git"), ws.join("../x/.git")];
    assert!(matches!(
        check_record(&pinned, &ws),
        Err(RecordError::PinnedOutside(_))
    ));
    let link = ws.join("link");
    std::os::unix::fs::symlink(&other, &link).unwrap();
    for bad in [Path::new("/"), Path::new("relative"), link.as_path()] {
        assert!(matches!(
            check_record(&record(bad, &[]), bad),
            Err(RecordError::Workspace(_))
        ));
    }
    // The session's own workspace, recorded as such: vetted.
    let own = record(&ws, &[]);
    git(&ws, &["init", "-q"]);
    hook(&ws.join(".git/hooks/pre-commit"));
    write(&own);
    assert!(!vet_session(state.path(), &ws).is_empty());
    assert!(!ws.join(".git/hooks/pre-commit").exists());
}

/// A git dir made in the session whose `objects` and `refs` are links to the pinned
/// repository's (git follows them, so git takes it for a git dir), reached by a `.git`
/// file in a subdirectory: the user's `git status` would run its fsmonitor through the
/// submodule check. It is vetted; `.git` files and links naming anything outside the
/// workspace are set aside; the outside is never touched.
#[test]
fn gitdir_files_and_linked_git_dirs_made_in_the_session_are_vetted_or_set_aside() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = ws.path();
    git(ws, &["init", "-q"]);
    let rec = record(ws, &[".git"]);
    let x = ws.join(".git/modules/x");
    std::fs::create_dir_all(&x).unwrap();
    std::fs::write(x.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::os::unix::fs::symlink("../../objects", x.join("objects")).unwrap();
    std::os::unix::fs::symlink("../../refs", x.join("refs")).unwrap();
    std::fs::write(
        x.join("config"),
        "[core]\n\tfsmonitor = touch /nonexistent/x\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/.git"), "gitdir: ../.git/modules/x\n").unwrap();
    // A gitdir file and a link naming a directory outside (a writable cache, say).
    std::fs::write(outside.path().join("config"), "[core]\n\tfsmonitor = x\n").unwrap();
    std::fs::create_dir_all(ws.join("far")).unwrap();
    let far = format!("gitdir: {}\n", outside.path().display());
    std::fs::write(ws.join("far/.git"), &far).unwrap();
    // One naming a path that carries a terminal control sequence (OSC 52: set the clipboard).
    std::fs::create_dir_all(ws.join("osc")).unwrap();
    std::fs::write(
        ws.join("osc/.git"),
        "gitdir: /nonexistent/\x1b]52;c;eA==\x07\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.join("linked")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("linked/.git")).unwrap();

    let findings = vet(&rec, gitguard::policy().unwrap());
    let config = std::fs::read_to_string(x.join("config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
    for dir in ["far", "linked"] {
        let d = ws.join(dir);
        assert!(
            std::fs::symlink_metadata(d.join(".git")).is_err(),
            "{dir}/.git stays"
        );
        let aside: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            aside
                .iter()
                .any(|n| n.to_string_lossy().starts_with(".git.cordon-quarantine-")),
            "{dir}: {aside:?}"
        );
        assert!(
            findings
                .iter()
                .any(|f| f.path == d.join(".git") && f.what.contains("moved aside")),
            "{findings:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("config")).unwrap(),
        "[core]\n\tfsmonitor = x\n"
    );
    let osc = findings
        .iter()
        .find(|f| f.path == ws.join("osc/.git"))
        .expect("the control-sequence gitdir file is set aside");
    assert!(
        !osc.what.contains('\x1b') && !osc.what.contains('\x07'),
        "{:?}",
        osc.what
    );
}

/// Links made in the session in a pinned repository's `worktrees/` and `modules/`: git's
/// worktree prune (automatic maintenance at the user's next commit, or `git gc`) would
/// empty the directories they name. They are moved to the quarantine as links, and the
/// host's `git worktree prune` afterwards leaves the outside alone.
#[test]
fn links_in_worktrees_and_modules_are_moved_out_and_never_followed() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = ws.path();
    git(ws, &["init", "-q"]);
    let victim = outside.path().join("precious.txt");
    std::fs::write(&victim, "keep me\n").unwrap();
    let rec = record(ws, &[".git"]);
    let g = ws.join(".git");
    std::fs::create_dir_all(g.join("worktrees")).unwrap();
    std::os::unix::fs::symlink(outside.path(), g.join("worktrees/w")).unwrap();
    std::fs::create_dir_all(g.join("modules/a")).unwrap();
    std::os::unix::fs::symlink(outside.path(), g.join("modules/a/b")).unwrap();

    let findings = vet(&rec, gitguard::policy().unwrap());
    assert_eq!(findings.len(), 2, "{findings:?}");
    assert!(std::fs::symlink_metadata(g.join("worktrees/w")).is_err());
    assert!(std::fs::symlink_metadata(g.join("modules/a/b")).is_err());
    let q = quarantine(&g);
    for kept in ["worktrees/w", "modules/a/b"] {
        let m = std::fs::symlink_metadata(q.join(kept)).unwrap();
        assert!(m.file_type().is_symlink(), "{kept} kept as the link it was");
    }
    // What the host's git would do next (a prune runs whatever the configuration).
    git(ws, &["worktree", "prune"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
}

/// An unfinished rebase left by the session: with `exec` lines in its to-do list (a host
/// `git rebase --continue` would run them) it is moved out whole; without, it stays for
/// the user to finish.
#[test]
fn a_rebase_whose_to_do_list_runs_commands_is_moved_out() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    git(ws, &["init", "-q"]);
    git(&ws.join("plain"), &["init", "-q"]);
    let rec = record(ws, &[".git", "plain/.git"]);
    let evil = ws.join(".git/rebase-merge");
    std::fs::create_dir_all(&evil).unwrap();
    std::fs::write(
        evil.join("git-rebase-todo"),
        "pick 0123456 first\nexec touch /nonexistent/x\n",
    )
    .unwrap();
    let stopped = ws.join("plain/.git/rebase-merge");
    std::fs::create_dir_all(&stopped).unwrap();
    std::fs::write(stopped.join("git-rebase-todo"), "pick 0123456 first\n").unwrap();
    let findings = vet(&rec, gitguard::policy().unwrap());
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(!evil.exists());
    let q = quarantine(&ws.join(".git"));
    assert!(q.join("rebase-merge/git-rebase-todo").is_file());
    assert!(
        stopped.join("git-rebase-todo").is_file(),
        "a plain rebase stays"
    );
}

/// A record whose session began a moment ago, after `setup` made what the user had.
fn started_after(ws: &Path, pinned: &[&str]) -> GuardRecord {
    // ctime has a coarse clock: a session that starts well after the setup.
    std::thread::sleep(std::time::Duration::from_millis(
        1100 + SLACK_SECS as u64 * 1000,
    ));
    record(ws, pinned)
}

#[test]
fn replace_refs_and_grafts_made_in_the_session_leave_even_a_pinned_repository() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    git(ws, &["init", "-q"]);
    for message in ["one", "two"] {
        let who = ["-c", "user.name=u", "-c", "user.email=e"];
        git(
            ws,
            &[&who[..], &["commit", "-q", "--allow-empty", "-m", message]].concat(),
        );
    }
    let g = ws.join(".git");
    // The user's own packed refs, from before the session.
    git(ws, &["pack-refs", "--all"]);
    let rec = started_after(ws, &[".git"]);
    // The session: a loose replace ref, one in packed-refs, and grafts.
    let head = String::from_utf8(
        crate::hostgit::command(Path::new("/nonexistent"))
            .current_dir(ws)
            .args(["rev-parse", "HEAD", "HEAD~1"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let ids: Vec<&str> = head.lines().collect();
    std::fs::create_dir_all(g.join("refs/replace")).unwrap();
    std::fs::write(g.join("refs/replace").join(ids[0]), format!("{}\n", ids[1])).unwrap();
    let mut packed = std::fs::read_to_string(g.join("packed-refs")).unwrap();
    packed.push_str(&format!("{} refs/replace/{}\n", ids[0], ids[1]));
    std::fs::write(g.join("packed-refs"), &packed).unwrap();
    std::fs::create_dir_all(g.join("info")).unwrap();
    std::fs::write(g.join("info/grafts"), format!("{}\n", ids[0])).unwrap();

    let findings = vet(&rec, gitguard::policy().unwrap());
    assert!(!findings.is_empty());
    assert!(!g.join("refs/replace").join(ids[0]).exists());
    assert!(!g.join("info/grafts").exists());
    let packed = std::fs::read_to_string(g.join("packed-refs")).unwrap();
    assert!(!packed.contains("refs/replace/"), "{packed}");
    assert!(
        packed.contains("refs/heads/"),
        "the branches stay: {packed}"
    );
    // The host's git sees the history as committed.
    let log = crate::hostgit::command(Path::new("/nonexistent"))
        .current_dir(ws)
        .args(["log", "--format=%s"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout), "two\none\n");
    let report = std::fs::read_to_string(quarantine(&g).join("removed.txt")).unwrap();
    assert!(
        report.contains("replace ref") && report.contains("grafts"),
        "{report}"
    );
}

#[test]
fn what_an_unpinned_repository_points_at_is_vetted_too() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    // A nested repository the start did not reach (past its caps), with a hook
    // directory and an include in its work tree, from before the session.
    let nested = ws.join("vendor/lib");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    git(&nested, &["config", "core.hooksPath", ".githooks"]);
    git(&nested, &["config", "include.path", "../../../team.cfg"]);
    std::fs::create_dir_all(nested.join(".githooks")).unwrap();
    hook(&nested.join(".githooks/pre-push"));
    std::fs::write(ws.join("team.cfg"), "[user]\n\tname = Team\n").unwrap();
    let rec = started_after(ws, &[]);
    // The session plants a hook there and an fsmonitor in the included file.
    hook(&nested.join(".githooks/pre-commit"));
    std::fs::write(
        ws.join("team.cfg"),
        "[core]\n\tfsmonitor = touch /nonexistent/x\n",
    )
    .unwrap();

    vet(&rec, gitguard::policy().unwrap());
    assert!(
        !nested.join(".githooks/pre-commit").exists(),
        "the planted hook left"
    );
    assert!(
        nested.join(".githooks/pre-push").exists(),
        "the user's own hook stays"
    );
    assert!(!ws.join("team.cfg").exists(), "the rewritten include left");
    let q = quarantine(&nested.join(".git"));
    assert!(q.join("outside/vendor/lib/.githooks/pre-commit").exists());
    assert!(
        std::fs::read_to_string(q.join("outside/team.cfg"))
            .unwrap()
            .contains("fsmonitor")
    );
}

#[test]
fn links_where_git_reads_refs_or_modules_are_taken_never_walked() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    git(ws, &["init", "-q"]);
    let g = ws.join(".git");
    // The host's files, outside the workspace, some changed during the session.
    let outside = tempfile::tempdir().unwrap();
    let rec = started_after(ws, &[".git"]);
    std::fs::write(outside.path().join("notes.txt"), "the user's").unwrap();
    std::os::unix::fs::symlink("/nonexistent", outside.path().join("lock")).unwrap();
    // The session points refs/replace and modules at them.
    std::fs::create_dir_all(g.join("refs")).unwrap();
    std::os::unix::fs::symlink(outside.path(), g.join("refs/replace")).unwrap();
    std::os::unix::fs::symlink(outside.path(), g.join("modules")).unwrap();
    vet(&rec, gitguard::policy().unwrap());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("notes.txt")).unwrap(),
        "the user's"
    );
    assert!(std::fs::symlink_metadata(outside.path().join("lock")).is_ok());
    // The link to elsewhere, made in the session where git's prune acts, is taken.
    assert!(std::fs::symlink_metadata(g.join("modules")).is_err());
}

#[test]
fn replace_refs_reached_through_a_link_inside_the_workspace_are_vetted_there() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    git(ws, &["init", "-q"]);
    let g = ws.join(".git");
    let rec = started_after(ws, &[".git"]);
    // The session keeps refs/replace in a plain directory of the tree and links to it.
    std::fs::create_dir_all(ws.join("stash/replace-here")).unwrap();
    std::fs::write(ws.join("stash/replace-here/0123"), "4567\n").unwrap();
    std::os::unix::fs::symlink(ws.join("stash/replace-here"), g.join("refs/replace")).unwrap();
    vet(&rec, gitguard::policy().unwrap());
    assert!(!ws.join("stash/replace-here/0123").exists());
}

#[test]
fn what_a_configuration_points_at_through_a_link_is_never_acted_on() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    let outside = tempfile::tempdir().unwrap();
    // The repository ships a bare-looking git dir whose hooks path goes through a link
    // out of the workspace.
    let bare = ws.join("fx/bare.git");
    git(&bare, &["init", "-q", "--bare"]);
    git(&bare, &["config", "core.worktree", ".."]);
    git(&bare, &["config", "core.hooksPath", "u/hooks"]);
    std::os::unix::fs::symlink(outside.path(), ws.join("fx/u")).unwrap();
    std::fs::create_dir(outside.path().join("hooks")).unwrap();
    let rec = started_after(ws, &[]);
    std::fs::write(outside.path().join("hooks/history"), "the user's").unwrap();
    vet(&rec, gitguard::policy().unwrap());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("hooks/history")).unwrap(),
        "the user's"
    );
}

#[test]
fn a_quarantine_name_made_first_does_not_turn_keeping_into_removal() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    let rec = record(ws, &[]);
    git(ws, &["init", "-q"]);
    let g = ws.join(".git");
    hook(&g.join("hooks/pre-commit"));
    // The session made the quarantine's plain name first (and more besides).
    let stamp = rec.started.0;
    for s in stamp - 2..stamp + 3 {
        std::fs::create_dir(g.join(format!("cordon-quarantine-{s}"))).unwrap();
    }
    vet(&rec, gitguard::policy().unwrap());
    assert!(!g.join("hooks/pre-commit").exists());
    let kept = std::fs::read_dir(&g)
        .unwrap()
        .flatten()
        .any(|e| e.path().join("hooks/pre-commit").exists());
    assert!(kept, "the hook is kept in a quarantine of its own");
}
