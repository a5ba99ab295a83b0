use super::*;

/// Test set-up git (on a repository the test itself made), through the same helper.
fn git(dir: &Path, args: &[&str]) {
    let out = command(Path::new("/nonexistent"))
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository on branch `work` with one commit and one modified file.
fn repo() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    git(ws.path(), &["init", "-q", "-b", "work"]);
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    git(ws.path(), &["add", "a.txt"]);
    git(ws.path(), &["commit", "-qm", "one"]);
    std::fs::write(ws.path().join("a.txt"), "two\n").unwrap();
    ws
}

/// Plants every configured program a status could reach; each touches `marker`.
fn plant(ws: &Path, marker: &Path) {
    let touch = format!("touch {}", marker.display());
    let mut config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    config.push_str(&format!(
        "[core]\n\tfsmonitor = \"{touch}\"\n\tpager = \"{touch}\"\n\thooksPath = hooks2\n\
         [filter \"evil\"]\n\tclean = \"{touch}\"\n\tprocess = \"{touch}\"\n\trequired = true\n\
         [diff \"evil\"]\n\ttextconv = \"{touch}\"\n[include]\n\tpath = extra.cfg\n"
    ));
    std::fs::write(ws.join(".git/config"), config).unwrap();
    std::fs::write(
        ws.join(".git/extra.cfg"),
        format!("[core]\n\tuntrackedCache = true\n\teditor = \"{touch}\"\n"),
    )
    .unwrap();
    std::fs::write(ws.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
    std::fs::write(ws.join(".git/info/attributes"), "* filter=evil diff=evil\n").unwrap();
    for dir in [".git/hooks", "hooks2"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
        for hook in [
            "post-index-change",
            "reference-transaction",
            "fsmonitor-watchman",
        ] {
            let p = ws.join(dir).join(hook);
            std::fs::write(&p, format!("#!/bin/sh\n{touch}\n")).unwrap();
            std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
    }
}

#[test]
fn a_hostile_repository_is_read_and_runs_nothing() {
    let ws = repo();
    let out = tempfile::tempdir().unwrap();
    let marker = out.path().join("ran");
    plant(ws.path(), &marker);
    let repo = WorkspaceRepo::open(ws.path()).unwrap();
    assert_eq!(
        repo.output(ws.path(), &["rev-parse", "--abbrev-ref", "HEAD"])
            .as_deref(),
        Some("work")
    );
    let status = repo.output(ws.path(), &["status", "--short"]).unwrap();
    assert!(status.contains("M a.txt"), "{status}");
    assert!(status.contains("?? .gitattributes"), "{status}");
    assert!(!marker.exists(), "a planted program ran");
    // The real index was not rewritten (no optional locks).
    assert!(!ws.path().join(".git/index.lock").exists());
}

#[test]
fn a_subdirectory_finds_its_repository() {
    let ws = repo();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let repo = WorkspaceRepo::open(&ws.path().join("sub")).unwrap();
    assert_eq!(repo.work_tree(), ws.path());
}

#[test]
fn redirected_git_dirs_are_refused() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(".git"), "gitdir: /elsewhere\n").unwrap();
    assert!(matches!(
        WorkspaceRepo::open(ws.path()),
        Err(RepoError::Redirected { .. })
    ));

    let ws = repo();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join(".git/commondir"),
        other.path().to_str().unwrap(),
    )
    .unwrap();
    assert!(matches!(
        WorkspaceRepo::open(ws.path()),
        Err(RepoError::Redirected { .. })
    ));
    // The sandbox's pinning placeholder (the git dir itself) is accepted.
    std::fs::write(ws.path().join(".git/commondir"), ".\n").unwrap();
    assert!(WorkspaceRepo::open(ws.path()).is_ok());

    let ws = repo();
    let real = ws.path().join("real-git");
    std::fs::rename(ws.path().join(".git"), &real).unwrap();
    std::os::unix::fs::symlink(&real, ws.path().join(".git")).unwrap();
    assert!(matches!(
        WorkspaceRepo::open(ws.path()),
        Err(RepoError::Redirected { .. })
    ));
}

/// A session swaps the repository's data for links to another repository of the host's
/// (or adds an alternates file naming its objects): Cordon's own status would list that
/// repository's paths and branch in the system prompt. Each is refused, and the real
/// repository still opens.
#[test]
fn data_that_leads_to_another_repository_is_refused() {
    let secret = repo();
    std::fs::write(secret.path().join("secret-plan.txt"), "x\n").unwrap();
    git(secret.path(), &["add", "secret-plan.txt"]);
    git(secret.path(), &["commit", "-qm", "secret"]);
    let theirs = secret.path().join(".git");
    for name in ["objects", "refs", "packed-refs"] {
        let ws = repo();
        let g = ws.path().join(".git");
        let target = g.join(name);
        if target.is_dir() {
            std::fs::remove_dir_all(&target).unwrap();
        } else {
            let _ = std::fs::remove_file(&target);
        }
        std::os::unix::fs::symlink(theirs.join(name), &target).unwrap();
        match WorkspaceRepo::open(ws.path()) {
            Err(RepoError::Redirected { path, .. }) => assert_eq!(path, target),
            other => panic!("{name}: {other:?}"),
        }
    }
    let ws = repo();
    std::fs::write(
        ws.path().join(".git/objects/info/alternates"),
        format!("{}\n", theirs.join("objects").display()),
    )
    .unwrap();
    assert!(matches!(
        WorkspaceRepo::open(ws.path()),
        Err(RepoError::Redirected { .. })
    ));
    std::fs::remove_file(ws.path().join(".git/objects/info/alternates")).unwrap();
    let repo = WorkspaceRepo::open(ws.path()).unwrap();
    let status = repo.output(ws.path(), &["status", "--short"]).unwrap();
    assert!(!status.contains("secret-plan"), "{status}");
}

#[test]
fn a_fifo_or_bad_head_is_refused_not_waited_on() {
    let ws = repo();
    std::fs::remove_file(ws.path().join(".git/HEAD")).unwrap();
    nix::unistd::mkfifo(
        &ws.path().join(".git/HEAD"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    assert!(matches!(
        WorkspaceRepo::open(ws.path()),
        Err(RepoError::Invalid { .. })
    ));
    std::fs::remove_file(ws.path().join(".git/HEAD")).unwrap();
    std::fs::write(ws.path().join(".git/HEAD"), "ref: ../../etc\n").unwrap();
    assert!(WorkspaceRepo::open(ws.path()).is_err());
}

/// What a session can leave for the host's git past the checks at open: a FIFO where git
/// opens a file (a `.gitignore` below the top), a ref linked to /dev/zero. The status of
/// the next session's prompt ends within its bounds instead of hanging or eating memory.
#[test]
fn a_fifo_in_the_tree_or_an_endless_ref_ends_within_bounds() {
    let ws = repo();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    nix::unistd::mkfifo(
        &ws.path().join("sub/.gitignore"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let start = std::time::Instant::now();
    let r = WorkspaceRepo::open(ws.path()).unwrap();
    assert_eq!(r.output(ws.path(), &["status", "--short"]), None);
    let spent = start.elapsed();
    assert!(spent < bounded::Bounds::PROMPT.deadline * 3, "{spent:?}");
    std::fs::remove_file(ws.path().join("sub/.gitignore")).unwrap();
    let head = ws.path().join(".git/refs/heads/work");
    std::fs::remove_file(&head).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &head).unwrap();
    if let Ok(r) = WorkspaceRepo::open(ws.path()) {
        assert_eq!(r.output(ws.path(), &["rev-parse", "HEAD"]), None);
    }
}

#[test]
fn heads_are_validated() {
    assert_eq!(
        valid_head(b"ref: refs/heads/main\n").as_deref(),
        Some("ref: refs/heads/main\n")
    );
    assert!(valid_head(&[b'a'; 40]).is_some());
    for bad in [
        &b"ref: HEAD"[..],
        b"ref: refs/../x",
        b"xyz",
        b"ref: refs/a b",
    ] {
        assert!(valid_head(bad).is_none(), "{bad:?}");
    }
}

/// Every git command Cordon runs on the host is built by `hostgit::command`: no other
/// source file of the workspace's crates may build one.
#[test]
fn no_other_git_commands() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut offenders = Vec::new();
    for krate in ["orchestrator/src", "sandbox-agent/src", "tests/src"] {
        scan(&root.join(krate), &mut offenders);
    }
    assert!(
        offenders.is_empty(),
        "build git through hostgit: {offenders:?}"
    );
}

fn scan(dir: &Path, offenders: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            scan(&path, offenders);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("hostgit.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let squeezed: String = text.split_whitespace().collect();
        if squeezed.contains("Command::new(\"git\")") {
            offenders.push(path);
        }
    }
}
