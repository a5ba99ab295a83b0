//! MCP tool lists end to end, with the real binary, the local sandbox, the scripted model
//! and servers written here with the `mcp` SDK (tests/mcp/): 200 tools deferred behind
//! ToolSearch (`ENABLE_TOOL_SEARCH`), and a server whose list grows while it runs
//! (`notifications/tools/list_changed`), and one whose list never ends.

use std::path::Path;

use cordon_tests::Workspace;
use cordon_tests::agent::tool_results;
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use serde_json::{Value, json};

use super::{run, tool_names};

/// A trusted-to-be workspace whose `.mcp.json` runs each tests/mcp/`script` as its `name`.
fn workspace_with(servers: &[(&str, &str)]) -> Workspace {
    let ws = Workspace::new();
    let mut entries = serde_json::Map::new();
    for (name, script) in servers {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mcp")
            .join(script);
        std::fs::copy(src, ws.join(script)).unwrap();
        let server = json!({"command": cordon_tests::mcp_python(), "args": [ws.join(script)]});
        entries.insert(name.to_string(), server);
    }
    std::fs::write(
        ws.join(".mcp.json"),
        json!({ "mcpServers": entries }).to_string(),
    )
    .unwrap();
    ws
}

fn tool<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
}

/// Bytes of the request's `tools` and `system`, as sent (compact JSON).
fn prompt_bytes(body: &Value) -> usize {
    body["tools"].to_string().len() + body["system"].to_string().len()
}

const CREATE: &str = "mcp__many__create_invoice";
const EXPORT: &str = "mcp__many__export_invoice";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_mcp_tools_are_deferred_and_loaded_by_toolsearch_on_demand() {
    let ws = workspace_with(&[("many", "many_tools.py")]);
    let model = ScriptedModel::start(vec![
        Turn::tool_use(
            "s1",
            "ToolSearch",
            json!({"query": format!("select:{CREATE},{EXPORT}")}),
        ),
        Turn::tool_use("c1", CREATE, json!({"target": "INV-7", "limit": 2})),
        Turn::tool_use("c2", EXPORT, json!({"target": "INV-7"})),
        Turn::tool_use("s2", "ToolSearch", json!({"query": "+archive ticket"})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    // Only create_invoice is allowed: the other deferred tools stay under the rules
    // (an ask with nobody to ask is a denial). A PreToolUse hook logs the MCP calls.
    let log = ws.join("pre-tool-use.jsonl");
    let hook = format!("cat >> {0}; echo >> {0}", log.display());
    let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "mcp__many__.*",
        "hooks": [{"type": "command", "command": hook}]}]}})
    .to_string();
    let out = run(
        &model,
        &ws,
        &["--trust", "--allowedTools", CREATE, "--settings", &hooks],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    assert_eq!(requests.len(), 5);

    // The first request: no MCP tool's definition, ToolSearch naming all 200 of them.
    let first = &requests[0].body;
    let names = tool_names(first);
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    assert!(names.iter().any(|n| n == "Bash"), "{names:?}");
    let search = tool(first, "ToolSearch").expect("ToolSearch offered");
    let listing = search["description"].as_str().unwrap();
    let listed: Vec<&str> = listing
        .lines()
        .filter(|l| l.starts_with("mcp__many__"))
        .collect();
    assert_eq!(listed.len(), 200, "{listing}");
    assert!(listed.contains(&CREATE) && listed.contains(&"mcp__many__count_build"));
    assert!(
        !listing.contains("audit trail"),
        "names only, no descriptions: {listing}"
    );

    // After ToolSearch: the two chosen tools' full definitions, and no other MCP tool.
    let second = &requests[1].body;
    let (id, text, is_error) = tool_results(second).remove(0);
    assert_eq!(id, "s1");
    assert!(!is_error && text.starts_with("Loaded 2 tools"), "{text}");
    let mcp: Vec<String> = tool_names(second)
        .into_iter()
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(mcp, [CREATE, EXPORT]);
    let create = tool(second, CREATE).unwrap();
    assert!(
        create["description"]
            .as_str()
            .unwrap()
            .starts_with("Create invoice records"),
        "{create}"
    );
    assert_eq!(create["input_schema"]["required"], json!(["target"]));
    assert_eq!(
        create["input_schema"]["properties"]["limit"]["type"],
        "integer"
    );
    let listing = tool(second, "ToolSearch").unwrap()["description"]
        .as_str()
        .unwrap();
    assert!(
        !listing.contains(CREATE) && listing.contains("mcp__many__get_invoice"),
        "a loaded tool leaves the list"
    );

    // The loaded tool runs in the sandboxed server; the other one meets its rules.
    let (_, text, is_error) = tool_results(&requests[2].body).remove(0);
    assert!(!is_error, "{text}");
    assert_eq!(
        text,
        r#"create_invoice ran with {"limit": 2, "note": "", "target": "INV-7"}"#
    );
    let hooked: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        hooked
            .iter()
            .any(|h| h["tool_name"] == CREATE && h["tool_input"]["target"] == "INV-7"),
        "the hook saw the deferred tool's call: {hooked:?}"
    );
    let (_, text, is_error) = tool_results(&requests[3].body).remove(0);
    assert!(
        is_error,
        "a deferred tool is still under the permission rules: {text}"
    );
    assert!(!text.contains("export_invoice ran"), "{text}");

    // A keyword search with a required word loads its best matches.
    let last = &requests[4].body;
    let (_, text, _) = tool_results(last).remove(0);
    assert!(text.contains("mcp__many__archive_ticket"), "{text}");
    assert!(tool(last, "mcp__many__archive_ticket").is_some());
    assert!(tool(last, CREATE).is_some(), "what was loaded stays loaded");

    // The same session without deferral, for the prompt-size figure.
    let full = ScriptedModel::start(vec![Turn::text("done")])
        .await
        .unwrap();
    let out = run(&full, &ws, &["--trust"], &[("ENABLE_TOOL_SEARCH", "false")]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let all = &full.requests()[0].body;
    let mcp_tools = tool_names(all)
        .iter()
        .filter(|n| n.starts_with("mcp__many__"))
        .count();
    assert_eq!(mcp_tools, 200);
    assert!(tool(all, "ToolSearch").is_none());
    let (deferred, eager) = (prompt_bytes(first), prompt_bytes(all));
    // `auto` deferred them because 200 definitions pass 10% of the 200k-token window
    // (at 4 characters a token): the figure below is that case.
    let mcp_bytes: usize = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("mcp__"))
        .map(|t| t.to_string().len())
        .sum();
    assert!(mcp_bytes / 4 > 20_000, "{mcp_bytes}");
    assert!(
        deferred * 4 < eager,
        "deferred {deferred} B, eager {eager} B"
    );
    eprintln!(
        "FIGURE deferred MCP tool loading, 200 tools: first request tools+system {deferred} B \
         (~{} tokens) deferred, {eager} B (~{} tokens) eager; MCP definitions alone {mcp_bytes} B \
         (~{} tokens)",
        deferred / 4,
        eager / 4,
        mcp_bytes / 4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_a_server_adds_while_it_runs_is_offered_in_the_next_request() {
    let ws = workspace_with(&[("growing", "growing_server.py")]);
    let model = ScriptedModel::start(vec![
        Turn::tool_use("g", "mcp__growing__grow", json!({"name": "fresh"})),
        Turn::tool_use("f", "mcp__growing__fresh", json!({})),
        Turn::tool_use("n", "mcp__growing__listings_so_far", json!({})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let out = run(
        &model,
        &ws,
        &["--trust", "--allowedTools", "mcp__growing"],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    let before = tool_names(&requests[0].body);
    assert!(
        before.iter().any(|n| n == "mcp__growing__grow"),
        "{before:?}"
    );
    assert!(
        !before.iter().any(|n| n == "mcp__growing__fresh"),
        "{before:?}"
    );
    let (_, text, is_error) = tool_results(&requests[1].body).remove(0);
    assert!(!is_error && text == "added fresh", "{text}");
    let fresh = tool(&requests[1].body, "mcp__growing__fresh").expect("the new tool offered");
    assert_eq!(fresh["description"], "A tool `grow` added: fresh.");
    assert!(tool(&requests[1].body, "mcp__growing__grow").is_some());
    let (_, text, is_error) = tool_results(&requests[2].body).remove(0);
    assert!(!is_error, "{text}");
    assert_eq!(text, "fresh was added while the server ran");
    // Listed at start and once after the change: the checks before the other requests
    // were answered from the connection's cache.
    let (_, text, _) = tool_results(&requests[3].body).remove(0);
    assert_eq!(text, "tools/list answered 2 times");
}

/// A server whose tool list never ends (every page names a next one) is refused once its
/// list passes Cordon's bounds; the session goes on with the other servers, whose tools
/// work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_tool_list_never_ends_is_refused_and_the_session_goes_on() {
    let ws = workspace_with(&[
        ("endless", "endless_tools.py"),
        ("flaky", "flaky_server.py"),
    ]);
    let model = ScriptedModel::start(vec![
        Turn::tool_use("e0", "mcp__flaky__echo", json!({"text": "e0"})),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let out = run(
        &model,
        &ws,
        &["--trust", "--allowedTools", "mcp__flaky"],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("larger than Cordon takes"),
        "{}",
        out.stderr
    );
    let r = model.requests();
    let offered = tool_names(&r[0].body);
    assert!(
        !offered.iter().any(|n| n.starts_with("mcp__endless")),
        "{offered:?}"
    );
    let (_, text, is_error) = tool_results(&r[1].body).remove(0);
    assert!(!is_error && text.starts_with("e0"), "{text}");
}
