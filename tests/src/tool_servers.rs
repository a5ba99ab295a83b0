//! The test internet's servers for real tools: a package index (`pypi.test`, serving a
//! wheel the test builds) and a git repository over HTTPS (`git.test`, the dumb protocol:
//! a bare repository served as files), both on [`SERVER`]:443 with a certificate signed by
//! a CA of the test's own. The sandboxed script ([`ToolServers::script`]) trusts that CA
//! through `PIP_CERT` and `GIT_SSL_CAINFO` only; what it must show is checked by
//! [`ToolServers::assert_served`], whichever backend ran it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::net::{self, SERVER};
use crate::tls::TestCa;
use crate::wheel::build_wheel;

/// The names the servers answer to.
pub const NAMES: [&str; 2] = ["pypi.test", "git.test"];

const WHEEL: &str = "tinypkg-0.1-py3-none-any.whl";

/// The servers, serving until the runtime they were started on ends.
pub struct ToolServers {
    /// Every request head the server read.
    pub heads: Arc<Mutex<Vec<String>>>,
    dir: tempfile::TempDir,
}

impl ToolServers {
    /// Builds the wheel, the repository and the certificates, and serves them on
    /// [`SERVER`]:443 (inside [`net::run`]).
    pub async fn start() -> ToolServers {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new(dir.path(), &NAMES);
        let sha = build_wheel(&dir.path().join(WHEEL));
        let mut files = bare_repo(dir.path());
        files.insert(
            "/simple/tinypkg/".into(),
            format!(
                "<!DOCTYPE html><html><body><a href=\"/files/{WHEEL}#sha256={sha}\">{WHEEL}</a></body></html>\n"
            )
            .into_bytes(),
        );
        files.insert(
            format!("/files/{WHEEL}"),
            std::fs::read(dir.path().join(WHEEL)).unwrap(),
        );
        let heads = net::file_server(
            SocketAddr::new(IpAddr::V4(SERVER), 443),
            files,
            Some(ca.acceptor()),
        )
        .await;
        ToolServers { heads, dir }
    }

    /// The names as a resolver table (each at [`SERVER`]).
    pub fn names() -> HashMap<String, Ipv4Addr> {
        NAMES.into_iter().map(|n| (n.to_string(), SERVER)).collect()
    }

    /// Puts the CA into the workspace `ws` (as `ca.pem`) and returns the script that
    /// installs the wheel with pip, imports it, clones the repository with git, and then
    /// tries both ways around the proxy (`CHECK` lines, see [`net::CHECK_PRELUDE`]).
    pub fn script(&self, ws: &Path) -> String {
        std::fs::copy(self.dir.path().join("ca.pem"), ws.join("ca.pem")).unwrap();
        let w = ws.display();
        format!(
            "{prelude}set -e\n\
             export PIP_CERT={w}/ca.pem GIT_SSL_CAINFO={w}/ca.pem\n\
             /usr/bin/python3 -m pip install -q --no-cache-dir --disable-pip-version-check \
               --target {w}/site --index-url https://pypi.test/simple/ tinypkg\n\
             PYTHONPATH={w}/site /usr/bin/python3 -c 'import tinypkg; print(tinypkg.VALUE)'\n\
             git clone -q https://git.test/repo.git {w}/clone\n\
             cat {w}/clone/hello.txt\n\
             set +e\n\
             check git_noproxy env -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY \
               git -c http.lowSpeedLimit=1 -c http.lowSpeedTime=20 \
               clone -q https://git.test/repo.git {w}/direct\n\
             check python_direct /usr/bin/python3 -c \
               'import socket; socket.create_connection((\"{SERVER}\", 443), timeout=20)'\n",
            prelude = net::CHECK_PRELUDE,
        )
    }

    /// What [`Self::script`] printed (`stdout`, `stderr` for messages) shows: the module
    /// pip installed imports, the clone has the file, the server saw each request under
    /// the name the tool asked for, and neither way around the proxy got anywhere.
    pub fn assert_served(&self, stdout: &str, stderr: &str) {
        assert!(
            stdout.contains("served by the test index"),
            "{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("cloned through the proxy"),
            "{stdout}\n{stderr}"
        );
        let checks = net::parse_checks(stdout);
        for around in ["git_noproxy", "python_direct"] {
            let (rc, out) = checks
                .get(around)
                .unwrap_or_else(|| panic!("{around}: {stdout}\n{stderr}"));
            assert_ne!(*rc, 0, "{around} got out around the proxy: {out}");
        }
        let heads = self.heads.lock().unwrap().clone();
        let asked = |p: &str| {
            heads
                .iter()
                .any(|h| h.split(' ').nth(1).is_some_and(|t| t.starts_with(p)))
        };
        assert!(asked("/simple/tinypkg/"), "{heads:?}");
        assert!(asked(&format!("/files/{WHEEL}")), "{heads:?}");
        assert!(asked("/repo.git/info/refs"), "{heads:?}");
        // Each tool reached the server under the name it asked for (the proxy checked
        // the TLS server name against the CONNECT host; the Host header is the name).
        assert!(
            heads
                .iter()
                .all(|h| h.contains("Host: pypi.test") || h.contains("Host: git.test")),
            "{heads:?}"
        );
    }
}

/// git on the host, built as every host git command is (`hostgit::command`: no hooks, no
/// user or system configuration), in `dir`.
fn git(dir: &Path, args: &[&str]) {
    let out = sandbox_agent::hostgit::command(dir)
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=cordon test",
            "-c",
            "user.email=test@cordon.test",
        ])
        .args(args)
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
    // The host's git command refuses every transport (`protocol.allow=never`); this local
    // clone of the test's own repository is the one it needs.
    git(
        dir,
        &[
            "-c",
            "protocol.file.allow=always",
            "clone",
            "-q",
            "--bare",
            "src",
            "repo.git",
        ],
    );
    let bare = dir.join("repo.git");
    git(&bare, &["update-server-info"]);
    net::files_under(&bare)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&bare).unwrap().display().to_string();
            (format!("/repo.git/{rel}"), std::fs::read(&p).unwrap())
        })
        .collect()
}
