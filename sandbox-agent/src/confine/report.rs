//! Measuring what is enforced, for the handshake's [`ConfinementReport`].

use crate::proto::ConfinementReport;

use super::sys;

/// Namespace kinds, as named under /proc/<pid>/ns.
const KINDS: [&str; 8] = ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time"];

/// Environment variable a launcher may set (comma-separated kinds) to say which
/// namespaces it created, for when the parent's namespaces cannot be read.
pub const NAMESPACES_ENV: &str = "CORDON_NAMESPACES";

/// The namespaces this process runs in that differ from its parent's, with a note when
/// some of the answer comes from the launcher rather than a measurement.
///
/// Call before confining: afterwards Landlock forbids reading another domain's /proc
/// entries. When the parent is outside our pid namespace (ppid 0) its links cannot be
/// read; then a new pid namespace is certain, and the launcher's `CORDON_NAMESPACES` is
/// reported for the rest, marked as such.
pub fn namespaces() -> (Vec<String>, Option<String>) {
    let ppid = std::os::unix::process::parent_id();
    let mut found = Vec::new();
    let mut unknown = Vec::new();
    for kind in KINDS {
        let own = std::fs::read_link(format!("/proc/self/ns/{kind}"));
        let parent = std::fs::read_link(format!("/proc/{ppid}/ns/{kind}"));
        match (own, parent) {
            (Ok(own), Ok(parent)) if ppid != 0 => {
                if own != parent {
                    found.push(kind.to_string());
                }
            }
            (Ok(_), _) => unknown.push(kind),
            (Err(_), _) => {}
        }
    }
    if unknown.is_empty() {
        return (found, None);
    }
    if ppid == 0 && !found.iter().any(|k| k == "pid") {
        found.push("pid".into());
    }
    let claimed: Vec<String> = std::env::var(NAMESPACES_ENV)
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|k| unknown.contains(&k.as_str()) && !found.contains(k))
        .collect();
    let note = format!(
        "namespaces not measured (parent not visible): {}; {}",
        unknown.join(","),
        if claimed.is_empty() {
            "the launcher claimed none".to_string()
        } else {
            format!("reported as the launcher claims: {}", claimed.join(","))
        }
    );
    found.extend(claimed);
    (found, Some(note))
}

/// Fills the measured, process-wide fields (uid, gid, no_new_privs, seccomp mode).
pub fn measure(report: &mut ConfinementReport) {
    let (uid, gid) = sys::uid_gid();
    report.uid = uid;
    report.gid = gid;
    report.no_new_privs = sys::no_new_privs();
    report.seccomp_mode = if super::seccomp::filter_active() {
        "filter".into()
    } else {
        "disabled".into()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_process_reports_consistent_namespaces() {
        // The test runs in its parent's namespaces (cargo's), so nothing should differ
        // unless cargo itself was started differently; at least the call must not fail
        // and must only name known kinds.
        let (found, _) = namespaces();
        assert!(found.iter().all(|k| KINDS.contains(&k.as_str())));
    }

    #[test]
    fn measure_reports_uid_and_no_filter_in_the_test_process() {
        let mut r = ConfinementReport::default();
        measure(&mut r);
        let (uid, _) = sys::uid_gid();
        assert_eq!(r.uid, uid);
    }
}
