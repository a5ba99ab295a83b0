//! The tools the model sees: names, descriptions and input schemas (Claude Code's names and
//! fields, our own words), input validation, and each tool's mapping onto the sandbox
//! agent's RPCs.
//!
//! # Layout
//!
//! - [`Tool`]: one tool: its definition for the Messages API and its `call`.
//! - [`ToolOutput`]: what goes into the `tool_result` block (text plus `is_error`).
//! - [`ToolRegistry`]: the set offered to the model; validates input before every call.
//! - [`context::ToolContext`]: the session's agent client, read-state and interrupt signal.
//! - [`schema`]: the hand-written validator every input passes first.
//! - [`spec`]: [`ToolSpec`] and [`ToolKind`]: a tool's runtime name, schema and the
//!   permission kind the engine routes on.
//! - one file per tool: [`read`], [`write`], [`edit`], [`bash`], [`glob`], [`grep`],
//!   [`todo_write`], [`web_fetch`], [`web_search`]; MCP tools live in [`crate::mcp`].
//! - [`tool_search`]: deferred MCP tools (names only in the prompt) and the ToolSearch
//!   tool that loads their definitions.
//! - [`media`]: Read's images and PDFs as the model's image and document blocks.
//! - [`background`]: Bash's background commands and the TaskOutput and TaskStop tools.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(ctx: cordon::tools::context::ToolContext) {
//! use cordon::tools::ToolRegistry;
//! let tools = ToolRegistry::default_tools();
//! let defs = tools.definitions(); // goes into the request's `tools` array
//! let out = tools
//!     .call("Read", &ctx, serde_json::json!({"file_path": "/work/src/main.rs"}))
//!     .await;
//! println!("{} (error: {})", out.content, out.is_error);
//! # let _ = defs; }
//! ```

pub mod background;
pub mod bash;
pub mod context;
pub mod edit;
pub mod exit_plan_mode;
pub mod glob;
pub mod grep;
pub mod media;
pub mod read;
pub mod schema;
pub mod skill;
pub mod spec;
pub mod todo_write;
pub mod tool_search;
pub mod web_fetch;
pub mod web_search;
pub mod write;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use sandbox_agent::{AgentError, ErrorCode};
use serde_json::{Value, json};

pub use context::{FileStamp, Interrupter, ReadState, ToolContext};
pub use spec::{ToolKind, ToolSpec};

/// The content of one `tool_result` block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// Blocks that follow the text in the result (an image or PDF that Read returns).
    pub attachments: Vec<crate::model::ToolResultBlock>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            ..Self::default()
        }
    }

    /// The same output with `block` after its text.
    pub fn with_attachment(mut self, block: crate::model::ToolResultBlock) -> Self {
        self.attachments.push(block);
        self
    }

    /// The `tool_result.content` the model gets: the text alone, or the text and then the
    /// attachments.
    pub fn result_content(&self) -> crate::model::ToolResultContent {
        use crate::model::{ToolResultBlock, ToolResultContent};
        if self.attachments.is_empty() {
            return ToolResultContent::Text(self.content.clone());
        }
        let text = ToolResultBlock::Text {
            text: self.content.clone(),
        };
        ToolResultContent::Blocks(
            std::iter::once(text)
                .chain(self.attachments.iter().cloned())
                .collect(),
        )
    }
}

/// Which other calls of the same turn a call may run beside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// Alone, in the order the model asked (anything that writes or executes).
    Alone,
    /// Beside other read-only calls.
    ReadOnly,
    /// Beside other sub-agents (each sub-agent's own calls are gated one by one).
    SubAgent,
}

/// One tool the model may call.
#[tonic::async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by (Claude Code's for built-ins; chosen at run time for
    /// MCP and sub-agent tools).
    fn name(&self) -> &str;
    /// What it does and its limits, in our own words.
    fn description(&self) -> &str;
    /// JSON Schema of the input; [`schema::validate`] enforces it before `call`.
    fn input_schema(&self) -> Value;
    /// True when the tool never changes anything (may run concurrently with others).
    fn is_read_only(&self) -> bool;
    /// Which calls of the same turn it may overlap with.
    fn concurrency(&self) -> Concurrency {
        if self.is_read_only() {
            Concurrency::ReadOnly
        } else {
            Concurrency::Alone
        }
    }
    /// What it does as far as the permission rules care; the engine routes on it. Tools
    /// that neither read nor edit files nor run commands keep the default.
    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }
    /// Name, description, schema and kind in one value.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: self.description().into(),
            input_schema: self.input_schema(),
            kind: self.kind(),
            read_only: self.is_read_only(),
        }
    }
    /// False for tools that never touch the sandbox (no restart is needed to run them).
    fn uses_sandbox(&self) -> bool {
        true
    }
    /// False while the tool is switched off (an MCP server the client disabled): it is
    /// not in the model's tool list then.
    fn is_offered(&self) -> bool {
        true
    }
    /// The MCP server the tool belongs to (none for Cordon's own tools). MCP tools may be
    /// deferred (see [`tool_search`]) and are rebuilt when their server's list changes.
    fn mcp_server(&self) -> Option<&str> {
        None
    }
    /// Runs the tool on input that already passed validation. Never fails: every problem
    /// becomes an `is_error` output the model can act on.
    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput;
}

/// The tools offered to the model, in a stable order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// Older names a call may still use: (old, current). Not offered to the model.
    aliases: Vec<(&'static str, &'static str)>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in tools: Read, Write, Edit, Bash, Glob, Grep, and TaskOutput and
    /// TaskStop for Bash's background commands (also under their older names BashOutput
    /// and KillShell).
    pub fn default_tools() -> Self {
        let mut reg = Self::new();
        reg.register(Arc::new(read::ReadTool));
        reg.register(Arc::new(write::WriteTool));
        reg.register(Arc::new(edit::EditTool));
        reg.register(Arc::new(bash::BashTool));
        reg.register(Arc::new(glob::GlobTool));
        reg.register(Arc::new(grep::GrepTool));
        reg.register(Arc::new(background::task_output::TaskOutputTool));
        reg.register(Arc::new(background::task_stop::TaskStopTool));
        reg.alias(
            background::task_output::OLD_NAME,
            background::task_output::NAME,
        );
        reg.alias(background::task_stop::OLD_NAME, background::task_stop::NAME);
        reg
    }

    /// Adds ExitPlanMode, which ends plan mode when `prompter` approves the plan (offer it
    /// only in plan mode).
    pub fn with_exit_plan_mode(
        mut self,
        engine: Option<Arc<crate::permissions::Engine>>,
        prompter: Option<Arc<dyn crate::agent::gate::PermissionPrompter>>,
    ) -> Self {
        self.register(Arc::new(exit_plan_mode::ExitPlanModeTool::new(
            engine, prompter,
        )));
        self
    }

    /// Adds `tool`, replacing any tool of the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
    }

    /// Removes the tool called `name` (e.g. for `--disallowedTools`); true if it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.tools.len();
        self.tools.retain(|t| t.name() != name);
        self.tools.len() != before
    }

    /// Keeps only the tools for which `keep` is true.
    pub fn retain(&mut self, keep: impl Fn(&dyn Tool) -> bool) {
        self.tools.retain(|t| keep(t.as_ref()));
    }

    /// Accepts calls to `old` as calls to the tool `current` (Claude Code's `Task` for
    /// `Agent`); the old name is not offered.
    pub fn alias(&mut self, old: &'static str, current: &'static str) {
        self.aliases.retain(|(o, _)| *o != old);
        self.aliases.push((old, current));
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name).or_else(|| {
            let (_, current) = self.aliases.iter().find(|(old, _)| *old == name)?;
            self.tools.iter().find(|t| t.name() == *current)
        })
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// The permission kind of the tool called `name` (by name alone when it is not here).
    pub fn kind_of(&self, name: &str) -> ToolKind {
        self.get(name)
            .map_or_else(|| ToolKind::of_name(name), |t| t.kind())
    }

    /// The `tools` array of a Messages API request: `{name, description, input_schema}`.
    pub fn definitions(&self) -> Vec<Value> {
        self.tools
            .iter()
            .filter(|t| t.is_offered())
            .map(|t| {
                json!({
                    "name": t.name(),
                    "description": t.description(),
                    "input_schema": t.input_schema(),
                })
            })
            .collect()
    }

    /// Validates `input` against the tool's schema, then runs it. An unknown tool or
    /// invalid input comes back as an `is_error` output naming the problem.
    ///
    /// A call that needs the sandbox first has a dead one replaced; a call that failed
    /// because the sandbox died says so, and the next call gets the fresh one.
    pub async fn call(&self, name: &str, ctx: &ToolContext, input: Value) -> ToolOutput {
        let tool = match self.check(name, &input) {
            Ok(tool) => tool,
            Err(out) => return out,
        };
        if !tool.uses_sandbox() {
            return tool.call(ctx, input).await;
        }
        let notice = match ctx.ensure_sandbox().await {
            Ok(notice) => notice,
            Err(why) => return ToolOutput::error(format!("{name}: {why}")),
        };
        let mut out = tool.call(ctx, input).await;
        if out.is_error && ctx.sandbox_died().await {
            out.content.push_str(
                "\n\nThe sandbox stopped during this call (its agent or container died); \
                 the next call starts a fresh sandbox on the same workspace.",
            );
        }
        if let Some(notice) = notice {
            out.content.push_str("\n\n");
            out.content.push_str(&notice);
        }
        out
    }

    /// The tool called `name`, if `input` is valid for it; otherwise the error output.
    pub fn check(&self, name: &str, input: &Value) -> Result<&Arc<dyn Tool>, ToolOutput> {
        let Some(tool) = self.get(name) else {
            return Err(ToolOutput::error(format!(
                "there is no tool named `{name}`; available tools: {}",
                self.names().join(", ")
            )));
        };
        schema::validate(&tool.input_schema(), input)
            .map_err(|problem| ToolOutput::error(format!("{name}: {problem}")))?;
        Ok(tool)
    }
}

/// The one place an agent error becomes `tool_result` text. The agent's messages are
/// already written for the model; only transport failures get our own wording.
pub fn agent_error_output(tool: &str, err: &AgentError) -> ToolOutput {
    let text = match err.code {
        // Io without a path is the transport (the agent is gone or wedged), not a file.
        ErrorCode::Io if err.path.is_none() => {
            format!("the sandbox is not responding: {}", err.message)
        }
        ErrorCode::TimedOut if err.path.is_none() => {
            format!("the sandbox did not answer in time: {}", err.message)
        }
        ErrorCode::ShuttingDown => format!("the sandbox is shutting down: {}", err.message),
        _ => err.message.clone(),
    };
    ToolOutput::error(format!("{tool}: {text}"))
}

/// Checks that `path` is absolute; otherwise an error suggesting the absolute form under
/// `workspace`. Returns the path lexically cleaned (`.` segments and doubled slashes go;
/// `..` stays: the agent resolves it under its own rules).
pub fn absolute_path(
    tool: &str,
    field: &str,
    path: &str,
    workspace: &Path,
) -> Result<PathBuf, ToolOutput> {
    let p = Path::new(path);
    if p.is_absolute() {
        return Ok(p.components().collect());
    }
    let suggestion: PathBuf = workspace
        .join(p)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    Err(ToolOutput::error(format!(
        "{tool}: `{field}` must be an absolute path, not `{path}`; did you mean `{}`?",
        suggestion.display()
    )))
}

/// The string field `key` of a validated input ("" when absent).
pub(crate) fn str_field<'a>(input: &'a Value, key: &str) -> &'a str {
    input.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The non-negative integer field `key` of a validated input.
/// An integer-valued float (`5.0`, which JSON Schema counts as an integer) is accepted.
pub(crate) fn u64_field(input: &Value, key: &str) -> Option<u64> {
    let value = input.get(key)?;
    value.as_u64().or_else(|| {
        let f = value.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0)?;
        // Saturating float-to-int conversion; huge values clamp, which every caller caps.
        #[allow(clippy::cast_possible_truncation)]
        Some(f as u64)
    })
}

/// The boolean field `key` of a validated input.
pub(crate) fn bool_field(input: &Value, key: &str) -> Option<bool> {
    input.get(key).and_then(Value::as_bool)
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
