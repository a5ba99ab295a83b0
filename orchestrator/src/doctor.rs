//! `cordon doctor`: what this host supports, and whether the chosen backend can confine.
//!
//! Every probe asks the kernel (or the Docker daemon) directly rather than trusting
//! version numbers: a Landlock ruleset version query, the seccomp fields of
//! /proc/self/status, a real user namespace, a real idmapped mount of the workspace's
//! filesystem, the cgroup filesystem type, and the Docker engine's own version, security
//! options and image labels.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sandbox::BackendKind;
use crate::sandbox::local::{self, LocalSupport};

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Missing, but not needed by the chosen backend.
    Warn,
    /// Missing and needed: the chosen backend cannot confine.
    Fail,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
}

/// The whole report.
#[derive(Debug, Clone)]
pub struct Report {
    pub backend: BackendKind,
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether the chosen backend can confine on this host.
    pub fn can_confine(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
    }

    /// A plain-text table.
    pub fn render(&self) -> String {
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        let mut out = format!("{:width$}  {:6}  DETAIL\n", "CHECK", "STATUS");
        for c in &self.checks {
            out.push_str(&format!(
                "{:width$}  {:6}  {}\n",
                c.name,
                c.status.label(),
                c.detail
            ));
        }
        let verdict = if self.can_confine() {
            "can confine"
        } else {
            "CANNOT confine"
        };
        out.push_str(
            &format!("\nbackend {:?}: {verdict} on this host\n", self.backend).to_lowercase(),
        );
        out
    }
}

/// The Landlock ABI version the kernel offers, if any.
pub fn landlock_abi() -> Result<u32, String> {
    sandbox_agent::confine::sys::landlock_abi_checked().map_err(|e| format!("unavailable ({e})"))
}

/// Whether seccomp filters are available (the `Seccomp_filters` field appears with
/// CONFIG_SECCOMP_FILTER; `Seccomp` with CONFIG_SECCOMP).
pub fn seccomp() -> Result<String, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    match (field("Seccomp:"), field("Seccomp_filters:")) {
        (Some(mode), filters) => Ok(format!(
            "available (this process: mode {mode}, {} filters)",
            filters.unwrap_or_else(|| "?".into())
        )),
        (None, _) => Err("the kernel was built without seccomp".into()),
    }
}

/// cgroup layout: v2, v1 or hybrid.
pub fn cgroup_version() -> String {
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    let magic = |p: &str| {
        nix::sys::statfs::statfs(p)
            .ok()
            .map(|s| s.filesystem_type().0)
    };
    match magic("/sys/fs/cgroup") {
        Some(CGROUP2_SUPER_MAGIC) => "v2 (unified)".into(),
        Some(_) if magic("/sys/fs/cgroup/unified") == Some(CGROUP2_SUPER_MAGIC) => {
            "hybrid (v1 controllers, v2 at /sys/fs/cgroup/unified)".into()
        }
        Some(_) => "v1".into(),
        None => "not mounted".into(),
    }
}

/// Pings the Docker daemon on its Unix socket (`DOCKER_HOST=unix://...` honoured).
pub fn docker_ping() -> Result<String, String> {
    let socket = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"));
    let mut s = std::os::unix::net::UnixStream::connect(&socket)
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    let t = Some(Duration::from_secs(1));
    s.set_read_timeout(t).map_err(|e| e.to_string())?;
    s.set_write_timeout(t).map_err(|e| e.to_string())?;
    s.write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let _ = s.take(4096).read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let status_line = text.lines().next().unwrap_or("");
    let api = text
        .lines()
        .find_map(|l| l.strip_prefix("Api-Version:").map(str::trim))
        .unwrap_or("?");
    if status_line.contains(" 200") {
        Ok(format!("reachable at {} (API {api})", socket.display()))
    } else {
        Err(format!("unexpected answer: {status_line:?}"))
    }
}

/// The docker lines: engine and API version, seccomp support, and each Cordon image with
/// whether its agent is the one `cordon images build` would put in it now.
pub fn docker_checks(needed: bool) -> Vec<Check> {
    let report = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(crate::sandbox::docker::probe()),
        Err(e) => {
            return vec![check("docker", Err(format!("runtime: {e}")), needed)];
        }
    };
    docker_lines(&report, needed)
}

fn docker_lines(report: &crate::sandbox::docker::DockerReport, needed: bool) -> Vec<Check> {
    use crate::sandbox::docker::images::{DEV, MINIMAL};
    if !report.reachable {
        let why = report.error.clone().unwrap_or_else(|| "unreachable".into());
        return vec![check("docker", Err(why), needed)];
    }
    let mut checks = vec![check(
        "docker",
        Ok(format!(
            "engine {}, API {}",
            report.engine_version.as_deref().unwrap_or("?"),
            report.api_version.as_deref().unwrap_or("?")
        )),
        needed,
    )];
    checks.push(check(
        "docker seccomp",
        if report.seccomp {
            Ok("the engine applies seccomp profiles".into())
        } else {
            Err("the engine has no seccomp support: containers would run unfiltered".into())
        },
        needed,
    ));
    for name in [MINIMAL, DEV] {
        let found = report
            .images
            .iter()
            .find(|i| i.name == name || i.name == format!("{name}:latest"));
        // A missing or stale image is a warning, never a failure: a session builds a
        // missing one itself, and `cordon images build` refreshes a stale one.
        let (status, detail) = match found {
            None => (
                Status::Warn,
                "not built (built on first use, or `cordon images build`)".into(),
            ),
            Some(i) if i.current => (
                Status::Ok,
                format!(
                    "present, agent {} (current)",
                    i.agent_version.as_deref().unwrap_or("?")
                ),
            ),
            Some(i) => (
                Status::Warn,
                format!(
                    "present, agent {} differs from the current build: run `cordon images build`",
                    i.agent_version.as_deref().unwrap_or("?")
                ),
            ),
        };
        checks.push(Check {
            name: if name == MINIMAL {
                "image cordon-minimal"
            } else {
                "image cordon-dev"
            },
            status,
            detail,
        });
    }
    checks.push(match docker_limits(&report.limits) {
        // Older engines say nothing: unknown is a warning, not a failure.
        Err(why) if report.limits.is_empty() => Check {
            name: "limits (docker)",
            status: Status::Warn,
            detail: why,
        },
        result => check("limits (docker)", result, needed),
    });
    checks
}

/// The local backend's limits line: what a session cgroup enforces here, and how commands
/// are killed. Without cgroups a session refuses to start (unless its limits are best
/// effort), so the line fails when the local backend is the one chosen.
fn local_limits(
    probed: Result<sandbox_agent::cgroup::session::Enforced, sandbox_agent::cgroup::CgroupError>,
) -> Result<String, String> {
    let e = probed.map_err(|e| {
        format!(
            "no session cgroups: {e}; run as root or in a delegated cgroup, or set \
             sandbox.limits.bestEffort"
        )
    })?;
    let mut parts = Vec::new();
    parts.push(if e.swap {
        "memory (no swap)"
    } else {
        "memory (swap not capped)"
    });
    if e.pids {
        parts.push("pids");
    }
    if e.cpu {
        parts.push("cpu");
    }
    let kill = match e.exec_kill {
        Some(sandbox_agent::cgroup::KillMethod::CgroupKill) => "per-command cgroup.kill",
        Some(sandbox_agent::cgroup::KillMethod::Freezer) => "per-command freezer kill",
        None => "commands killed by /proc scan only",
    };
    Ok(format!("{}; {kill}", parts.join(", ")))
}

/// The Docker limits line, from what the engine reports.
fn docker_limits(limits: &[(&'static str, bool)]) -> Result<String, String> {
    let missing: Vec<&str> = limits
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(n, _)| *n)
        .collect();
    if limits.is_empty() {
        return Err("the engine did not say which limits it enforces".into());
    }
    if missing.is_empty() {
        Ok("memory (no swap), pids, cpu".into())
    } else {
        Err(format!("the engine cannot enforce: {}", missing.join(", ")))
    }
}

fn check(name: &'static str, result: Result<String, String>, needed: bool) -> Check {
    match result {
        Ok(detail) => Check {
            name,
            status: Status::Ok,
            detail,
        },
        Err(detail) => Check {
            name,
            status: if needed { Status::Fail } else { Status::Warn },
            detail,
        },
    }
}

/// Runs every probe; `workspace` is where idmapped mounts are tried (its filesystem is
/// the one that matters).
pub fn run(backend: BackendKind, workspace: &Path) -> Report {
    let local_needed = backend == BackendKind::Local;
    let support: LocalSupport = local::probe(workspace);
    let mut checks = vec![
        check(
            "landlock",
            landlock_abi().map(|v| format!("ABI {v}")),
            local_needed,
        ),
        check("seccomp", seccomp(), local_needed),
        check(
            "user namespaces",
            support
                .user_namespaces
                .clone()
                .map(|()| "can create one".into()),
            local_needed,
        ),
    ];
    checks.push(match &support.idmapped_mounts {
        Some(r) => check(
            "idmapped mounts",
            r.clone()
                .map(|()| format!("supported on {}", workspace.display())),
            local_needed,
        ),
        None => Check {
            name: "idmapped mounts",
            status: Status::Ok,
            detail: "not needed (not running as root)".into(),
        },
    });
    checks.push(Check {
        name: "cgroups",
        status: Status::Ok,
        detail: cgroup_version(),
    });
    checks.push(check(
        "limits (local)",
        local_limits(sandbox_agent::cgroup::probe()),
        local_needed,
    ));
    checks.push(check(
        "agent binary",
        support
            .agent_binary
            .clone()
            .map(|p| p.display().to_string()),
        true,
    ));
    checks.extend(docker_checks(backend == BackendKind::Docker));
    checks.push(Check {
        name: "protected paths",
        status: if local::protected_paths().is_ok() {
            Status::Ok
        } else {
            Status::Fail
        },
        detail: "policies/protected-paths.json (compiled in)".into(),
    });
    checks.push(Check {
        name: "git policy",
        status: if sandbox_agent::launch::gitguard::policy().is_ok() {
            Status::Ok
        } else {
            Status::Fail
        },
        detail:
            "policies/git.json (compiled in); git dirs made in a session are vetted at teardown"
                .into(),
    });
    checks.extend(toolchain_lines(workspace));
    checks.push(network_line(workspace));
    Report { backend, checks }
}

/// The network policy a session of `workspace` would get from its settings (user,
/// managed, and the repository's as its trust allows): no network, or which domains.
fn network_line(workspace: &Path) -> Check {
    let resolved = crate::settings::Settings::load(workspace, Default::default())
        .map_err(|e| e.to_string())
        .and_then(|s| crate::network::layers::from_settings(&s).map_err(|e| e.to_string()));
    match resolved {
        Ok(network) => Check {
            name: "network",
            status: Status::Ok,
            detail: network.describe(),
        },
        Err(e) => Check {
            name: "network",
            status: Status::Warn,
            detail: format!("the settings do not resolve: {e}"),
        },
    }
}

/// What a local session of `workspace` would show of the user's toolchains and hide of
/// their secrets (before any settings adjust it).
fn toolchain_lines(workspace: &Path) -> Vec<Check> {
    let facts = crate::paths::cordon_home()
        .ok()
        .and_then(|home| crate::toolchains::HostFacts::from_env(&home, workspace));
    let Some(facts) = facts else {
        return vec![Check {
            name: "toolchains (local)",
            status: Status::Ok,
            detail: "none shown: no home directory".into(),
        }];
    };
    let policy = match crate::toolchains::policy() {
        Ok(p) => p,
        Err(e) => {
            return vec![Check {
                name: "toolchains (local)",
                status: Status::Warn,
                detail: format!("none shown: {e}"),
            }];
        }
    };
    let e = crate::toolchains::resolve(policy, &facts, &Default::default());
    let list = |paths: &mut dyn Iterator<Item = &PathBuf>| {
        let v: Vec<String> = paths.map(|p| p.display().to_string()).collect();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let mut secrets: Vec<&PathBuf> = e.toolchains.view.hidden.iter().collect();
    let home = &facts.home;
    let policy_secrets: Vec<PathBuf> = policy
        .secrets
        .iter()
        .map(|s| home.join(s.path.trim_start_matches("~/")))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    secrets.extend(
        policy_secrets
            .iter()
            .filter(|p| !e.toolchains.view.hidden.contains(p)),
    );
    let mut lines = vec![
        Check {
            name: "toolchains (local)",
            status: Status::Ok,
            detail: format!(
                "shown read-only: {}",
                list(&mut e.shown.iter().map(|(p, _)| p))
            ),
        },
        Check {
            name: "secrets (local)",
            status: Status::Ok,
            detail: format!(
                "never shown: {} (policies/toolchains.json)",
                list(&mut secrets.into_iter())
            ),
        },
        Check {
            name: "tool caches (local)",
            status: Status::Ok,
            detail: format!(
                "Cordon's own, seeded read-only from: {}; a layer of each session's own over: {}",
                list(&mut e.toolchains.view.seeded.iter().map(|s| &s.lower)),
                list(&mut e.toolchains.view.scratch.iter())
            ),
        },
    ];
    for r in &e.refused {
        lines.push(Check {
            name: "toolchains (local)",
            status: Status::Warn,
            detail: format!("not shown: {}: {}", r.path.display(), r.why),
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_fails_when_a_needed_check_fails() {
        let mut report = Report {
            backend: BackendKind::Local,
            checks: vec![check("a", Ok("fine".into()), true)],
        };
        assert!(report.can_confine());
        report.checks.push(check("b", Err("gone".into()), false));
        assert!(report.can_confine(), "a warning does not fail");
        report.checks.push(check("c", Err("gone".into()), true));
        assert!(!report.can_confine());
        assert!(report.render().contains("cannot confine"));
    }

    #[test]
    fn docker_lines_fail_only_when_docker_is_needed_and_unreachable() {
        use crate::sandbox::docker::{DockerReport, ImageReport};
        let down = DockerReport {
            error: Some("no socket".into()),
            ..DockerReport::default()
        };
        assert_eq!(docker_lines(&down, true)[0].status, Status::Fail);
        assert_eq!(docker_lines(&down, false)[0].status, Status::Warn);
        let up = DockerReport {
            reachable: true,
            engine_version: Some("20.10.24".into()),
            api_version: Some("1.41".into()),
            seccomp: true,
            images: vec![ImageReport {
                name: "cordon-minimal:latest".into(),
                agent_version: Some("1".into()),
                agent_sha256: Some("x".into()),
                current: false,
            }],
            ..DockerReport::default()
        };
        let lines = docker_lines(&up, true);
        assert!(lines[0].detail.contains("20.10.24") && lines[0].detail.contains("1.41"));
        assert_eq!(lines[1].status, Status::Ok, "seccomp");
        assert_eq!(lines[2].status, Status::Warn, "stale minimal image");
        assert!(lines[2].detail.contains("cordon images build"));
        assert_eq!(lines[3].status, Status::Warn, "dev image missing");
        assert_eq!(lines[4].status, Status::Warn, "limits not reported");
        assert!(lines.iter().all(|c| c.status != Status::Fail));
    }

    #[test]
    fn limits_lines_name_what_is_missing() {
        use sandbox_agent::cgroup::session::Enforced;
        let all = Enforced {
            memory: true,
            swap: true,
            pids: true,
            cpu: true,
            exec_kill: Some(sandbox_agent::cgroup::KillMethod::CgroupKill),
        };
        assert_eq!(
            local_limits(Ok(all)).unwrap(),
            "memory (no swap), pids, cpu; per-command cgroup.kill"
        );
        let err = local_limits(Err(sandbox_agent::cgroup::CgroupError::Unavailable {
            what: "the memory limit".into(),
            why: "nothing mounted".into(),
        }))
        .unwrap_err();
        assert!(
            err.contains("memory") && err.contains("bestEffort"),
            "{err}"
        );
        assert!(
            docker_limits(&[("memory", true), ("swap", false)])
                .unwrap_err()
                .contains("swap")
        );
        assert!(docker_limits(&[("memory", true)]).is_ok());
    }

    #[test]
    fn probes_answer_on_this_host() {
        // Whatever the host, the probes return rather than panic.
        let _ = landlock_abi();
        let _ = seccomp();
        assert!(!cgroup_version().is_empty());
        let _ = docker_ping();
    }
}
