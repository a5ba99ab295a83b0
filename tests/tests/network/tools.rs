//! Real tools through the proxy, in `cordon sandbox` on the local backend: `pip install`
//! of a wheel the test builds, from a package index the test serves over HTTPS, and `git
//! clone` over HTTPS (the dumb protocol, a bare repository served as files) from the same
//! server; its certificate is signed by a CA of the test's own that only the sandboxed
//! commands are told to trust (`PIP_CERT`, `GIT_SSL_CAINFO`). Debian's python: a pyenv
//! shim would do as well (tests/tests/toolchains.rs tries it), but this test is about egress,
//! not the user's toolchains.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Command;

use cordon_tests::net::{self, DNS, SERVER};
use cordon_tests::tls::TestCa;
use cordon_tests::wheel::build_wheel;
use cordon_tests::{Workspace, cordon_bin};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=cordon test",
            "-c",
            "user.email=test@cordon.test",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bare repository with one commit (`hello.txt`), ready for dumb HTTP; its files as
/// `/repo.git/...` paths.
fn bare_repo(dir: &Path) -> HashMap<String, Vec<u8>> {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    std::fs::write(src.join("hello.txt"), "cloned through the proxy\n").unwrap();
    git(&src, &["add", "hello.txt"]);
    git(&src, &["commit", "-q", "-m", "one"]);
    git(dir, &["clone", "-q", "--bare", "src", "repo.git"]);
    let bare = dir.join("repo.git");
    git(&bare, &["update-server-info"]);
    let mut files = HashMap::new();
    let mut stack = vec![bare.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&bare).unwrap().display().to_string();
                files.insert(format!("/repo.git/{rel}"), std::fs::read(&p).unwrap());
            }
        }
    }
    files
}

#[test]
fn pip_install_and_git_clone_go_through_the_proxy() {
    let ips = [IpAddr::V4(SERVER), IpAddr::V4(DNS)];
    net::run(&ips, Some(IpAddr::V4(DNS)), || async {
        let names = ["pypi.test", "git.test"]
            .into_iter()
            .map(|n| (n.to_string(), SERVER))
            .collect();
        let _asked = net::dns_server(IpAddr::V4(DNS), names).await;
        let host = tempfile::tempdir().unwrap();
        let ca = TestCa::new(host.path(), &["pypi.test", "git.test"]);
        let wheel = "tinypkg-0.1-py3-none-any.whl";
        let sha = build_wheel(&host.path().join(wheel));
        let mut files = bare_repo(host.path());
        files.insert(
            "/simple/tinypkg/".into(),
            format!(
                "<!DOCTYPE html><html><body><a href=\"/files/{wheel}#sha256={sha}\">{wheel}</a></body></html>\n"
            )
            .into_bytes(),
        );
        files.insert(
            format!("/files/{wheel}"),
            std::fs::read(host.path().join(wheel)).unwrap(),
        );
        let heads = net::file_server(
            SocketAddr::new(IpAddr::V4(SERVER), 443),
            files,
            Some(ca.acceptor()),
        )
        .await;

        let ws = Workspace::new();
        std::fs::copy(&ca.ca_pem, ws.join("ca.pem")).unwrap();
        let w = ws.path().display().to_string();
        let script = format!(
            "set -e\n\
             export PIP_CERT={w}/ca.pem GIT_SSL_CAINFO={w}/ca.pem\n\
             /usr/bin/python3 -m pip install -q --no-cache-dir --disable-pip-version-check \
               --target {w}/site --index-url https://pypi.test/simple/ tinypkg\n\
             PYTHONPATH={w}/site /usr/bin/python3 -c 'import tinypkg; print(tinypkg.VALUE)'\n\
             git clone -q https://git.test/repo.git {w}/clone\n\
             cat {w}/clone/hello.txt\n"
        );
        let out = tokio::process::Command::new(cordon_bin())
            .args(["sandbox", "--workspace", &w])
            .args(["--allow-domain", "pypi.test", "--allow-domain", "git.test"])
            .args(["--", "sh", "-c", &script])
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("served by the test index"),
            "{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("cloned through the proxy"),
            "{stdout}\n{stderr}"
        );
        let heads = heads.lock().unwrap().clone();
        let asked = |p: &str| {
            heads
                .iter()
                .any(|h| h.split(' ').nth(1).is_some_and(|t| t.starts_with(p)))
        };
        assert!(asked("/simple/tinypkg/"), "{heads:?}");
        assert!(asked(&format!("/files/{wheel}")), "{heads:?}");
        assert!(asked("/repo.git/info/refs"), "{heads:?}");
        // Each tool reached the server under the name it asked for (the proxy checked
        // the TLS server name against the CONNECT host; the Host header is the name).
        assert!(
            heads
                .iter()
                .all(|h| h.contains("Host: pypi.test") || h.contains("Host: git.test")),
            "{heads:?}"
        );
    });
}
