use serde_json::json;

use super::*;
use crate::model::ContentBlock;

fn def(name: &str, description: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: Some(description.into()),
        input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}}),
        cache_control: None,
        extra: serde_json::Map::new(),
    }
}

fn is_mcp(name: &str) -> bool {
    name.starts_with("mcp__")
}

fn defs() -> Vec<ToolDefinition> {
    vec![
        def("Read", "Reads a file"),
        def(
            "mcp__slack__send_message",
            "Posts a message to a Slack channel",
        ),
        def("mcp__slack__list_channels", "Lists the channels"),
        def(
            "mcp__github__create_issue",
            "Opens an issue in a repository",
        ),
    ]
}

fn names(defs: &[ToolDefinition]) -> Vec<&str> {
    defs.iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn modes_parse_as_claude_code_names_them() {
    assert_eq!(
        ToolSearchMode::parse("auto"),
        Ok(ToolSearchMode::Auto { percent: 10 })
    );
    assert_eq!(
        ToolSearchMode::parse("auto:25"),
        Ok(ToolSearchMode::Auto { percent: 25 })
    );
    assert_eq!(ToolSearchMode::parse("TRUE"), Ok(ToolSearchMode::Always));
    assert_eq!(ToolSearchMode::parse("false"), Ok(ToolSearchMode::Off));
    assert_eq!(ToolSearchMode::parse("0"), Ok(ToolSearchMode::Off));
    for bad in ["auto:101", "auto:x", "sometimes", ""] {
        assert!(ToolSearchMode::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(ToolSearchMode::from_value(None), ToolSearchMode::default());
    assert_eq!(
        ToolSearchMode::from_value(Some("nonsense")),
        ToolSearchMode::default()
    );
}

#[test]
fn auto_defers_past_its_share_of_the_window() {
    let auto = ToolSearchMode::Auto { percent: 10 };
    assert!(!auto.defers(20_000, 200_000), "exactly 10% stays");
    assert!(auto.defers(20_001, 200_000));
    assert!(ToolSearchMode::Auto { percent: 0 }.defers(1, 200_000));
    assert!(ToolSearchMode::Always.defers(1, 200_000));
    assert!(!ToolSearchMode::Off.defers(u64::MAX / 200, 1));
}

#[test]
fn deferred_tools_leave_the_request_and_toolsearch_lists_their_names() {
    let deferred = Deferred::new(ToolSearchMode::Always);
    let out = deferred.select(defs(), &is_mcp, 200_000, true);
    assert_eq!(names(&out), ["Read", NAME]);
    let listing = out[1].description.as_deref().unwrap();
    for name in [
        "mcp__slack__send_message",
        "mcp__slack__list_channels",
        "mcp__github__create_issue",
    ] {
        assert!(listing.contains(&format!("\n{name}\n")), "{listing}");
    }
    assert!(
        !listing.contains("Posts a message"),
        "names only: {listing}"
    );
    // Under the share, or with ToolSearch removed by a rule: everything goes as it is.
    let small = Deferred::new(ToolSearchMode::default());
    assert_eq!(small.select(defs(), &is_mcp, 200_000, true).len(), 4);
    assert_eq!(deferred.select(defs(), &is_mcp, 200_000, false).len(), 4);
    assert_eq!(
        Deferred::new(ToolSearchMode::Off)
            .select(defs(), &is_mcp, 1, true)
            .len(),
        4
    );
}

fn search_call(deferred: &Deferred, input: Value) -> String {
    deferred.load(&input)
}

#[test]
fn select_loads_named_tools_into_later_requests() {
    let deferred = Deferred::new(ToolSearchMode::Always);
    deferred.select(defs(), &is_mcp, 200_000, true);
    let text = search_call(
        &deferred,
        json!({"query": "select:mcp__slack__send_message, MCP__GITHUB__CREATE_ISSUE,nope"}),
    );
    assert!(text.starts_with("Loaded 2 tools"), "{text}");
    assert!(
        text.contains("- mcp__slack__send_message: Posts a message"),
        "{text}"
    );
    assert!(
        text.contains("Not deferred tools") && text.contains("nope"),
        "{text}"
    );
    let out = deferred.select(defs(), &is_mcp, 200_000, true);
    assert_eq!(
        names(&out),
        [
            "Read",
            "mcp__slack__send_message",
            "mcp__github__create_issue",
            NAME
        ]
    );
    let listing = out[3].description.as_deref().unwrap();
    assert!(listing.contains("mcp__slack__list_channels"), "{listing}");
    assert!(!listing.contains("mcp__slack__send_message"), "{listing}");
}

#[test]
fn keywords_rank_name_parts_first_and_plus_words_are_required() {
    let deferred = Deferred::new(ToolSearchMode::Always);
    deferred.select(defs(), &is_mcp, 200_000, true);
    let text = search_call(&deferred, json!({"query": "slack", "max_results": 1}));
    assert!(text.starts_with("Loaded 1 tool;"), "{text}");
    assert!(text.contains("mcp__slack__send_message"), "{text}");
    let text = search_call(&deferred, json!({"query": "+repository issue"}));
    assert!(
        text.contains("mcp__github__create_issue") && !text.contains("slack"),
        "{text}"
    );
    let text = search_call(&deferred, json!({"query": "weather"}));
    assert!(text.starts_with("No deferred tool matches"), "{text}");
    assert_eq!(
        deferred.loaded(),
        ["mcp__github__create_issue", "mcp__slack__send_message"]
    );
}

#[test]
fn a_resumed_conversation_gets_back_what_it_loaded() {
    let deferred = Deferred::new(ToolSearchMode::Always);
    let call = |id: &str, name: &str, input: Value| ContentBlock::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
    };
    let result = |id: &str, is_error: bool| ContentBlock::ToolResult {
        tool_use_id: id.into(),
        content: crate::model::ToolResultContent::Text("x".into()),
        is_error,
        cache_control: None,
    };
    let messages = vec![
        Message {
            role: crate::model::Role::Assistant,
            content: vec![
                call(
                    "a",
                    NAME,
                    json!({"query": "select:mcp__slack__list_channels"}),
                ),
                call(
                    "b",
                    NAME,
                    json!({"query": "select:mcp__github__create_issue"}),
                ),
                call("c", "mcp__slack__send_message", json!({})),
            ],
        },
        Message::user(vec![
            result("a", false),
            result("b", true),
            result("c", false),
        ]),
    ];
    deferred.restore(&messages, &defs(), &is_mcp);
    assert_eq!(
        deferred.loaded(),
        ["mcp__slack__list_channels", "mcp__slack__send_message"],
        "a refused ToolSearch call loaded nothing"
    );
}
