use super::*;

fn check(name: &str, input: Value) -> Result<(), String> {
    ToolRegistry::default_tools()
        .check(name, &input)
        .map(|_| ())
        .map_err(|out| {
            assert!(out.is_error);
            out.content
        })
}

#[test]
fn default_tools_have_claude_code_names() {
    let reg = ToolRegistry::default_tools();
    assert_eq!(
        reg.names(),
        [
            "Read",
            "Write",
            "Edit",
            "Bash",
            "Glob",
            "Grep",
            "TaskOutput",
            "TaskStop"
        ]
    );
    assert_eq!(reg.get("BashOutput").unwrap().name(), "TaskOutput");
    assert_eq!(reg.get("KillShell").unwrap().name(), "TaskStop");
    let read_only: Vec<_> = reg
        .names()
        .into_iter()
        .filter(|n| reg.get(n).is_some_and(|t| t.is_read_only()))
        .collect();
    assert_eq!(
        read_only,
        ["Read", "Glob", "Grep", "TaskOutput", "TaskStop"]
    );
}

#[test]
fn definitions_have_the_messages_api_shape() {
    for def in ToolRegistry::default_tools().definitions() {
        let obj = def.as_object().unwrap();
        assert_eq!(obj.len(), 3, "{def}");
        assert!(obj["name"].is_string());
        let desc = obj["description"].as_str().unwrap();
        assert!(desc.len() > 80 && desc.len() < 2000, "{desc}");
        let schema = &obj["input_schema"];
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert!(schema::unknown_keywords(schema).is_empty(), "{schema}");
        for req in schema["required"].as_array().unwrap() {
            assert!(schema["properties"].get(req.as_str().unwrap()).is_some());
        }
    }
}

#[test]
fn input_fields_are_exactly_claude_codes() {
    let reg = ToolRegistry::default_tools();
    let fields = |name: &str| -> Vec<String> {
        let schema = reg.get(name).unwrap().input_schema();
        let mut keys: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(fields("Read"), ["file_path", "limit", "offset"]);
    assert_eq!(fields("Write"), ["content", "file_path"]);
    assert_eq!(
        fields("Edit"),
        ["file_path", "new_string", "old_string", "replace_all"]
    );
    assert_eq!(
        fields("Bash"),
        ["command", "description", "run_in_background", "timeout"]
    );
    assert_eq!(fields("Glob"), ["path", "pattern"]);
    assert_eq!(
        fields("Grep"),
        [
            "-A",
            "-B",
            "-C",
            "-i",
            "-n",
            "glob",
            "head_limit",
            "multiline",
            "output_mode",
            "path",
            "pattern",
            "type"
        ]
    );
}

#[test]
fn valid_inputs_pass() {
    check(
        "Read",
        json!({"file_path": "/w/a", "offset": 3, "limit": 10}),
    )
    .unwrap();
    check("Write", json!({"file_path": "/w/a", "content": ""})).unwrap();
    check(
        "Edit",
        json!({"file_path": "/w/a", "old_string": "x", "new_string": "", "replace_all": true}),
    )
    .unwrap();
    check("Bash", json!({"command": "ls", "timeout": 1000, "description": "list", "run_in_background": false})).unwrap();
    check("Glob", json!({"pattern": "**/*.rs", "path": "/w"})).unwrap();
    check("Grep", json!({"pattern": "x", "output_mode": "count", "-i": true, "-n": false,
        "-A": 0, "-B": 1, "-C": 2, "multiline": false, "head_limit": 0, "glob": "*.rs", "type": "rust", "path": "/w"}))
    .unwrap();
}

#[test]
fn missing_required_fields_are_named() {
    assert_eq!(
        check("Edit", json!({"file_path": "/a", "new_string": ""})).unwrap_err(),
        "Edit: missing required field `old_string`"
    );
    assert_eq!(
        check("Read", json!({})).unwrap_err(),
        "Read: missing required field `file_path`"
    );
    assert_eq!(
        check("Write", json!({"file_path": "/a"})).unwrap_err(),
        "Write: missing required field `content`"
    );
    assert_eq!(
        check("Bash", json!({"command": null})).unwrap_err(),
        "Bash: missing required field `command`"
    );
    assert_eq!(
        check("Glob", json!({"path": "/"})).unwrap_err(),
        "Glob: missing required field `pattern`"
    );
    assert_eq!(
        check("Grep", json!({"glob": "*"})).unwrap_err(),
        "Grep: missing required field `pattern`"
    );
}

#[test]
fn unknown_fields_are_refused_with_the_accepted_list() {
    let err = check("Read", json!({"file_path": "/a", "path": "/b"})).unwrap_err();
    assert_eq!(
        err,
        "Read: unknown field `path` (accepted fields: file_path, limit, offset)"
    );
    let err = check("Grep", json!({"pattern": "x", "-r": true})).unwrap_err();
    assert!(err.starts_with("Grep: unknown field `-r`"), "{err}");
    for (tool, input) in [
        (
            "Write",
            json!({"file_path": "/a", "content": "", "mode": 1}),
        ),
        (
            "Edit",
            json!({"file_path": "/a", "old_string": "a", "new_string": "b", "all": true}),
        ),
        ("Bash", json!({"command": "ls", "cwd": "/"})),
        ("Glob", json!({"pattern": "*", "limit": 3})),
    ] {
        let err = check(tool, input).unwrap_err();
        assert!(err.contains("unknown field"), "{err}");
    }
}

#[test]
fn wrongly_typed_fields_are_named_with_what_was_sent() {
    assert_eq!(
        check("Read", json!({"file_path": "/a", "offset": 0})).unwrap_err(),
        "Read: `offset` must be a positive integer, got 0"
    );
    assert_eq!(
        check("Read", json!({"file_path": "/a", "offset": "10"})).unwrap_err(),
        "Read: `offset` must be a positive integer, got a string (\"10\")"
    );
    assert_eq!(
        check("Read", json!({"file_path": 7})).unwrap_err(),
        "Read: `file_path` must be a string, got the number 7"
    );
    assert_eq!(
        check(
            "Edit",
            json!({"file_path": "/a", "old_string": "", "new_string": "b"})
        )
        .unwrap_err(),
        "Edit: `old_string` must not be empty"
    );
    assert_eq!(
        check(
            "Edit",
            json!({"file_path": "/a", "old_string": "a", "new_string": "b", "replace_all": "yes"})
        )
        .unwrap_err(),
        "Edit: `replace_all` must be true or false, got a string (\"yes\")"
    );
    assert_eq!(
        check("Bash", json!({"command": "ls", "timeout": 1.5})).unwrap_err(),
        "Bash: `timeout` must be a positive integer, got the number 1.5"
    );
    assert_eq!(
        check("Bash", json!({"command": ["ls"]})).unwrap_err(),
        "Bash: `command` must be a string, got an array"
    );
    assert_eq!(
        check("Grep", json!({"pattern": "x", "output_mode": "lines"})).unwrap_err(),
        "Grep: `output_mode` must be one of \"content\", \"files_with_matches\", \"count\", got \"lines\""
    );
    assert_eq!(
        check("Grep", json!({"pattern": "x", "-C": -1})).unwrap_err(),
        "Grep: `-C` must be a non-negative integer, got -1"
    );
    assert_eq!(
        check("Glob", json!("**/*")).unwrap_err(),
        "Glob: input must be a JSON object of fields, got a string (\"**/*\")"
    );
}

#[test]
fn integer_valued_floats_count_as_integers() {
    check("Bash", json!({"command": "ls", "timeout": 5000.0})).unwrap();
    assert_eq!(u64_field(&json!({"t": 5000.0}), "t"), Some(5000));
    assert_eq!(u64_field(&json!({"t": 7}), "t"), Some(7));
    assert_eq!(u64_field(&json!({}), "t"), None);
}

#[test]
fn unknown_tools_list_the_available_ones() {
    let err = check("Fetch", json!({})).unwrap_err();
    assert_eq!(
        err,
        "there is no tool named `Fetch`; available tools: Read, Write, Edit, Bash, Glob, Grep, \
         TaskOutput, TaskStop"
    );
}

#[test]
fn relative_paths_are_refused_with_the_absolute_suggestion() {
    let ws = Path::new("/home/u/proj");
    assert_eq!(
        absolute_path("Read", "file_path", "/home/u/proj/./src//a.rs", ws).unwrap(),
        PathBuf::from("/home/u/proj/src/a.rs")
    );
    let err = absolute_path("Read", "file_path", "./src/a.rs", ws).unwrap_err();
    assert!(err.is_error);
    assert_eq!(
        err.content,
        "Read: `file_path` must be an absolute path, not `./src/a.rs`; did you mean `/home/u/proj/src/a.rs`?"
    );
}

#[test]
fn agent_errors_become_error_outputs_and_a_dead_agent_is_named() {
    let gone = AgentError::new(
        ErrorCode::Io,
        "sandbox agent unreachable or failed: broken pipe",
    );
    let out = agent_error_output("Bash", &gone);
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "Bash: the sandbox is not responding: sandbox agent unreachable or failed: broken pipe"
    );
    let file_io = AgentError::new(ErrorCode::Io, "/w/a: disk full").with_path("/w/a");
    assert_eq!(
        agent_error_output("Write", &file_io).content,
        "Write: /w/a: disk full"
    );
    let ambiguous = AgentError::new(ErrorCode::EditAmbiguous, "/w/a: old_string matches 2 times")
        .with_path("/w/a");
    assert_eq!(
        agent_error_output("Edit", &ambiguous),
        ToolOutput::error("Edit: /w/a: old_string matches 2 times")
    );
}

#[test]
fn an_alias_reaches_its_tool_but_is_not_offered() {
    let mut reg = ToolRegistry::default_tools();
    reg.alias("Cat", "Read");
    assert!(reg.check("Cat", &json!({"file_path": "/w/a"})).is_ok());
    assert_eq!(reg.get("Cat").unwrap().name(), "Read");
    assert!(!reg.names().contains(&"Cat"));
    assert!(reg.definitions().iter().all(|d| d["name"] != "Cat"));
    assert_eq!(reg.kind_of("Cat"), ToolKind::Read);
    assert_eq!(
        reg.get("Read").unwrap().concurrency(),
        Concurrency::ReadOnly
    );
    assert_eq!(reg.get("Bash").unwrap().concurrency(), Concurrency::Alone);
}
