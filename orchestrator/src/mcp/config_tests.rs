use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::settings::{CliSettings, SettingsSources};
use crate::trust::TrustStore;

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    root: PathBuf,
}

fn fixture(mcp_json: serde_json::Value) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join(MCP_JSON), mcp_json.to_string()).unwrap();
    Fixture {
        ws,
        root,
        _dir: dir,
    }
}

fn env(name: &str) -> Option<String> {
    (name == "TOKEN").then(|| "t0k".to_string())
}

impl Fixture {
    fn load(&self, user: serde_json::Value, managed: serde_json::Value, trust: bool) -> McpConfig {
        let write = |p: &Path, v: &serde_json::Value| std::fs::write(p, v.to_string()).unwrap();
        write(&self.root.join("user.json"), &user);
        write(&self.root.join("managed.json"), &managed);
        let sources = SettingsSources {
            managed: self.root.join("managed.json"),
            user: Some(self.root.join("user.json")),
            home: None,
            trust_store: Some(TrustStore::at(&self.root.join("cordon"))),
        };
        let cli = CliSettings {
            trust,
            ..CliSettings::default()
        };
        let settings = Settings::load_from(&self.ws, cli, &sources).unwrap();
        load(&settings, &self.ws, &|_: &str, name: &str| env(name))
    }
}

fn names(servers: &[ServerConfig]) -> Vec<&str> {
    servers.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn project_servers_need_trust_or_an_approval_from_outside_the_repository() {
    let f = fixture(json!({"mcpServers": {
        "a": {"command": "a"}, "b": {"command": "b"}
    }}));
    let none = f.load(json!({}), json!({}), false);
    assert!(none.servers.is_empty());
    assert_eq!(none.refused.len(), 2);
    let one = f.load(json!({"enabledMcpjsonServers": ["b"]}), json!({}), false);
    assert_eq!(names(&one.servers), ["b"]);
    let all = f.load(
        json!({"enableAllProjectMcpServers": true}),
        json!({}),
        false,
    );
    assert_eq!(names(&all.servers), ["a", "b"]);
    let trusted = f.load(json!({"disabledMcpjsonServers": ["a"]}), json!({}), true);
    assert_eq!(names(&trusted.servers), ["b"]);
    let denied = f.load(
        json!({}),
        json!({"deniedMcpServers": [{"serverName": "b"}]}),
        true,
    );
    assert_eq!(names(&denied.servers), ["a"]);
}

#[test]
fn an_untrusted_repository_cannot_approve_its_own_servers() {
    let f = fixture(json!({"mcpServers": {"a": {"command": "a"}}}));
    std::fs::create_dir_all(f.ws.join(".claude")).unwrap();
    std::fs::write(
        f.ws.join(".claude/settings.json"),
        json!({"enableAllProjectMcpServers": true}).to_string(),
    )
    .unwrap();
    assert!(f.load(json!({}), json!({}), false).servers.is_empty());
}

#[test]
fn user_servers_expand_variables_and_sse_is_refused() {
    let f = fixture(json!({}));
    let cfg = f.load(
        json!({"mcpServers": {
            "web": {"type": "http", "url": "https://h/${PATH_PART:-mcp}",
                    "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "old": {"type": "sse", "url": "https://h/sse"},
            "hole": {"command": "x", "args": ["${NOPE}"]},
            "local": {"command": "${CLAUDE_PROJECT_DIR}/srv", "args": ["--x"], "env": {"K": "v"}}
        }}),
        json!({}),
        false,
    );
    assert_eq!(names(&cfg.servers), ["local", "web"]);
    assert_eq!(
        cfg.servers[1].transport,
        Transport::Http {
            url: "https://h/mcp".into(),
            headers: [("Authorization".to_string(), "Bearer t0k".to_string())].into(),
        }
    );
    let Transport::Stdio { command, .. } = &cfg.servers[0].transport else {
        panic!("stdio expected");
    };
    assert_eq!(command, &format!("{}/srv", f.ws.display()));
    let why = |n: &str| {
        cfg.refused
            .iter()
            .find(|r| r.name == n)
            .unwrap()
            .why
            .clone()
    };
    assert!(why("old").contains("legacy SSE"), "{}", why("old"));
    assert!(why("hole").contains("NOPE"), "{}", why("hole"));
}

/// A server approved by name runs the repository's entry: the entry reads nothing of
/// Cordon's environment unless the workspace is trusted, and the refusal says how to
/// allow it.
#[test]
fn a_server_approved_by_name_reads_no_host_variable_unless_the_workspace_is_trusted() {
    let f = fixture(json!({"mcpServers": {
        "github": {"command": "sh", "args": ["-c", "echo $X"], "env": {"X": "${TOKEN}"}},
        "web": {"type": "http", "url": "https://h/${TOKEN}"},
        "plain": {"command": "${CLAUDE_PROJECT_DIR}/srv", "args": ["${PORT:-8080}"]}
    }}));
    let approvals = [
        json!({"enabledMcpjsonServers": ["github", "web", "plain"]}),
        json!({"enableAllProjectMcpServers": true}),
    ];
    for user in approvals {
        let cfg = f.load(user, json!({}), false);
        assert_eq!(names(&cfg.servers), ["plain"], "{cfg:?}");
        assert_eq!(
            cfg.servers[0].transport,
            Transport::Stdio {
                command: format!("{}/srv", f.ws.display()),
                args: vec!["8080".into()],
                env: BTreeMap::new(),
            }
        );
        for name in ["github", "web"] {
            let why = &cfg.refused.iter().find(|r| r.name == name).unwrap().why;
            assert!(
                why.contains("${TOKEN}") && why.contains("cordon trust"),
                "{why}"
            );
            assert!(!why.contains("t0k"), "{why}");
        }
    }
    // Trusted, the same entries expand as Claude Code expands them.
    let trusted = f.load(json!({}), json!({}), true);
    assert_eq!(names(&trusted.servers), ["github", "plain", "web"]);
    let Transport::Stdio { env, .. } = &trusted.servers[0].transport else {
        panic!("stdio expected");
    };
    assert_eq!(env.get("X").map(String::as_str), Some("t0k"));
}

#[test]
fn a_repository_server_cannot_take_the_tool_names_of_the_users() {
    let f = fixture(json!({"mcpServers": {
        "my_db": {"command": "repo-db"},
        "github__x": {"command": "repo-gh"},
        "github.": {"command": "repo-gh2"},
        "notes": {"command": "notes"}
    }}));
    let cfg = f.load(
        json!({"mcpServers": {"my.db": {"command": "user-db"}},
               "enableAllProjectMcpServers": true}),
        json!({}),
        false,
    );
    // The user's server keeps `mcp__my_db__*`; the repository's alike name is refused, as
    // is a name whose tools rules written for `github` would match.
    assert_eq!(names(&cfg.servers), ["my.db", "notes"]);
    let refused: Vec<(&str, &str)> = cfg
        .refused
        .iter()
        .map(|r| (r.name.as_str(), r.why.as_str()))
        .collect();
    assert!(
        refused
            .iter()
            .any(|(n, why)| *n == "my_db" && why.contains("\"my.db\"")),
        "{refused:?}"
    );
    assert!(
        refused
            .iter()
            .any(|(n, why)| *n == "github__x" && why.contains("`__`")),
        "{refused:?}"
    );
    assert!(refused.iter().any(|(n, _)| *n == "github."), "{refused:?}");
}
