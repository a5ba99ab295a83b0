//! The offline demo: a tiny project with a bug, and a scripted model session that finds
//! and fixes it through the real tools in the real sandbox — and shows the sandbox holding
//! when the "model" reaches outside. Runs with no API key and no network.

use std::path::Path;

use serde_json::json;

use crate::scripted::{Reply, Turn};

/// The task the demo's session is given.
pub const PROMPT: &str =
    "The greeting test fails. Find the bug, fix it, and check that the test passes.";

/// Writes the demo project into `dir` (which must exist).
pub fn write_project(dir: &Path) -> std::io::Result<()> {
    std::fs::write(
        dir.join("greet.py"),
        "def greet(name):\n    \"\"\"Greets someone by name.\"\"\"\n    return \"Hello, \" + nme + \"!\"\n",
    )?;
    std::fs::write(
        dir.join("test_greet.py"),
        "from greet import greet\n\nassert greet(\"Ada\") == \"Hello, Ada!\", greet(\"Ada\")\nprint(\"all tests passed\")\n",
    )?;
    std::fs::write(
        dir.join("README.md"),
        "# greet\n\nA one-function project for the Cordon demo.\n",
    )
}

/// The scripted model's side of the session.
pub fn turns(dir: &Path) -> Vec<Turn> {
    let file = |name: &str| dir.join(name).display().to_string();
    vec![
        Turn::Reply(Reply::text("I'll look at the project first.").with_tool_use("t1", "Glob", json!({"pattern": "*.py"}))),
        Turn::Reply(
            Reply::text("Two Python files. Reading both.")
                .with_tool_use("t2", "Read", json!({"file_path": file("greet.py")}))
                .with_tool_use("t3", "Read", json!({"file_path": file("test_greet.py")})),
        ),
        Turn::Reply(Reply::text("Running the test to see the failure.").with_tool_use("t4", "Bash", json!({"command": "python3 test_greet.py"}))),
        Turn::Reply(
            Reply::text("`nme` is a typo for `name`. Fixing it.")
                .with_tool_use("t5", "Edit", json!({"file_path": file("greet.py"), "old_string": "+ nme +", "new_string": "+ name +"})),
        ),
        Turn::Reply(Reply::text("Running the test again.").with_tool_use("t6", "Bash", json!({"command": "python3 test_greet.py"}))),
        Turn::Reply(Reply::text("Now a look outside the project, which the sandbox must refuse.").with_tool_use(
            "t7",
            "Bash",
            json!({"command": "id; ls /root; cat /etc/shadow; touch /etc/cordon-demo; curl -sS --max-time 3 https://example.com >/dev/null || echo no network"}),
        )),
        Turn::text(
            "Fixed: greet.py used the undefined name `nme`; it now uses `name`, and test_greet.py \
             passes. The last step tried to read /root and /etc/shadow, write /etc and reach the \
             network: the sandbox refused each one.",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_has_the_bug_the_script_fixes() {
        let dir = tempfile::tempdir().unwrap();
        write_project(dir.path()).unwrap();
        let code = std::fs::read_to_string(dir.path().join("greet.py")).unwrap();
        assert!(code.contains("+ nme +"));
        assert_eq!(turns(dir.path()).len(), 7);
    }
}
