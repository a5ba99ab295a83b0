//! [`AgentTool`]: Claude Code's Agent tool (`Task` is its older name). Each call runs a
//! child [`AgentLoop`] with its own conversation, its definition's system prompt, model and
//! tool subset, on the session's sandbox, permission gate, hooks and prompter, and returns
//! only its final text as the tool result.
//!
//! Limits: a sub-agent gets no Agent tool (depth one), at most [`MAX_CONCURRENT`] run at
//! once (further calls wait for a slot), and the session's interrupt ends them all.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use super::definition::{AgentDefinition, model_for};
use super::observer::SubagentObserver;
use super::tasks::{TaskStatus, Tasks};
use crate::agent::gate::{LoopObserver, NoObserver, ToolGate};
use crate::agent::{AgentLoop, LoopConfig, LoopEvent, LoopShared, prompt};
use crate::hooks::Hooks;
use crate::model::{CacheControl, ModelClient, SystemBlock};
use crate::session::Transcript;
use crate::tools::{
    Concurrency, ReadState, Tool, ToolContext, ToolOutput, ToolRegistry, str_field,
};

/// The tool's name, and the older one it is also offered under.
pub const NAME: &str = "Agent";
pub const OLD_NAME: &str = "Task";
/// The type a call without `subagent_type` runs.
pub const GENERAL_PURPOSE: &str = "general-purpose";
/// Sub-agents running at once, per session.
pub const MAX_CONCURRENT: usize = 4;

/// What every sub-agent of a session shares with its parent.
pub struct SubagentKit {
    pub model: ModelClient,
    /// The parent's loop settings (model, window, cwd, memory, date).
    pub config: LoopConfig,
    /// The parent's tools; a sub-agent gets these or a subset, never the Agent tool.
    pub tools: ToolRegistry,
    pub gate: Arc<dyn ToolGate>,
    /// SubagentStop hooks (none in sessions without hooks).
    pub hooks: Option<Arc<Hooks>>,
    /// The session's transcript, which the sidechains join.
    pub transcript_path: PathBuf,
    pub session_id: String,
    /// The parent's event channel (sub-agent events arrive wrapped).
    pub events: Option<mpsc::UnboundedSender<LoopEvent>>,
    pub definitions: Vec<AgentDefinition>,
    /// The parent loop's shared state: a model the client chose (`set_model`) is the
    /// parent's model for sub-agents whose definition names none.
    pub parent: Option<LoopShared>,
    /// Where running sub-agents are registered (announced, stoppable by id).
    pub tasks: Tasks,
    /// The session's MCP servers: a sub-agent offers their tools as they are listed
    /// when it runs (a server's list may have changed since the session started).
    pub mcp: Vec<Arc<crate::mcp::McpServer>>,
    /// The session's skills (a definition's `skills` opens its first message with theirs).
    pub skills: Vec<crate::tools::skill::Skill>,
}

/// The Agent tool of one session.
pub struct AgentTool {
    kit: SubagentKit,
    slots: Semaphore,
    description: String,
}

const SUBAGENT_NOTE: &str = "You are a sub-agent: another agent gave you the task in the \
first message and sees nothing of your work but your final message. Do the task with your \
tools, then end with a complete, self-contained report of what you found or did.";

impl AgentTool {
    /// The session's Agent tool (register `Task` as an alias of it).
    pub fn new(kit: SubagentKit) -> Self {
        Self {
            description: describe(&kit.definitions),
            slots: Semaphore::new(MAX_CONCURRENT),
            kit,
        }
    }

    fn definition(&self, kind: &str) -> Option<AgentDefinition> {
        if let Some(def) = self.kit.definitions.iter().find(|d| d.name == kind) {
            return Some(def.clone());
        }
        (kind == GENERAL_PURPOSE).then(|| AgentDefinition {
            name: GENERAL_PURPOSE.into(),
            description: String::new(),
            tools: None,
            disallowed_tools: Vec::new(),
            model: None,
            prompt: String::new(),
            scope: super::definition::Scope::User,
            options: Default::default(),
        })
    }

    /// The parent's model now: the client's choice, else the session's.
    fn parent_model(&self) -> String {
        self.kit
            .parent
            .as_ref()
            .and_then(LoopShared::model)
            .unwrap_or_else(|| self.kit.config.model.clone())
    }

    /// The sub-agent's tools: its definition's list (of the parent's), else all of them,
    /// plus the tools of the MCP servers it names; never the Agent tool.
    fn tools_for(&self, def: &AgentDefinition) -> ToolRegistry {
        let mut tools = ToolRegistry::new();
        for name in self.kit.tools.names() {
            if wanted(def, name)
                && let Some(tool) = self.kit.tools.get(name)
            {
                tools.register(tool.clone());
            }
        }
        tools
    }

    /// The session's MCP servers, their tools filtered as [`AgentTool::tools_for`] does.
    fn mcp_for(&self, def: &AgentDefinition) -> crate::mcp::sync::ToolSync {
        let def = def.clone();
        crate::mcp::sync::ToolSync::new(
            self.kit.mcp.clone(),
            Arc::new(move |name| wanted(&def, name)),
        )
    }

    fn system_for(&self, def: &AgentDefinition) -> Vec<SystemBlock> {
        let own = if def.prompt.is_empty() {
            prompt::SYSTEM_PROMPT
        } else {
            &def.prompt
        };
        let config = &self.kit.config;
        let mut blocks = vec![
            SystemBlock::text(own),
            SystemBlock::text(format!(
                "{SUBAGENT_NOTE}\n\n{}",
                prompt::environment(&config.cwd, &config.today)
            )),
        ];
        if let Some(memory) = &config.memory {
            blocks.push(SystemBlock::text(memory.clone()));
        }
        if let Some(SystemBlock::Text { cache_control, .. }) = blocks.last_mut() {
            *cache_control = Some(CacheControl::ephemeral());
        }
        blocks
    }

    /// The task, then the instructions of the skills the definition preloads.
    fn first_message(&self, def: &AgentDefinition, task: &str) -> String {
        let mut text = task.to_string();
        for name in &def.options.skills {
            if let Some(skill) = self.kit.skills.iter().find(|s| &s.name == name) {
                text.push_str(&format!(
                    "\n\nSkill `{}` (base directory: {})\n\n{}",
                    skill.name,
                    skill.dir.display(),
                    skill.body
                ));
            }
        }
        text
    }
}

/// The tool's description: what it does, and the sub-agent types there are.
fn describe(definitions: &[AgentDefinition]) -> String {
    let mut text = String::from(
        "Starts a sub-agent: a separate agent with its own context that works on a task \
         with its own tools and returns one final report as this call's result. Use it for \
         searches and investigations that would fill your context, or for independent tasks \
         (several calls in one turn run in parallel). The sub-agent sees only `prompt`: make \
         it a complete, self-contained task, and say what the report must contain. \
         `description` is a short (3-5 word) summary. `subagent_type` picks the kind of \
         agent. Available agent types:\n",
    );
    text.push_str(&format!(
        "- {GENERAL_PURPOSE}: a general agent with all of your tools, for research and multi-step tasks\n"
    ));
    for d in definitions {
        let tools = d
            .tools
            .as_ref()
            .map_or_else(|| "all tools".to_string(), |t| t.join(", "));
        text.push_str(&format!(
            "- {}: {} (Tools: {tools})\n",
            d.name, d.description
        ));
    }
    text
}

#[tonic::async_trait]
impl Tool for AgentTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A short (3-5 word) description of the task"},
                "prompt": {"type": "string", "minLength": 1, "description": "The task for the sub-agent"},
                "subagent_type": {"type": "string", "description": "The type of agent to run"}
            },
            "required": ["description", "prompt"],
            "additionalProperties": false
        })
    }

    /// The call itself changes nothing: each of the sub-agent's own calls passes the
    /// session's permission gate, so starting one needs no approval (plan mode too).
    fn is_read_only(&self) -> bool {
        true
    }

    /// Sub-agents run beside each other, never beside the parent's other calls.
    fn concurrency(&self) -> Concurrency {
        Concurrency::SubAgent
    }

    /// Its tools reach the sandbox themselves.
    fn uses_sandbox(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let kind = match str_field(&input, "subagent_type") {
            "" => GENERAL_PURPOSE,
            kind => kind,
        };
        let Some(def) = self.definition(kind) else {
            let mut names = vec![GENERAL_PURPOSE];
            names.extend(self.kit.definitions.iter().map(|d| d.name.as_str()));
            return ToolOutput::error(format!(
                "{}: there is no agent type `{kind}`; available: {}",
                NAME,
                names.join(", ")
            ));
        };
        let id = ctx
            .tool_use_id()
            .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_string);
        // Its own stop signal: the session's interrupts, and `stop_task` for it alone.
        let task = self.kit.tasks.start(
            &id,
            str_field(&input, "description"),
            &def.name,
            ctx.interrupt_signal(),
        );
        let mut interrupts = task.stop_signal();
        let _slot = tokio::select! {
            slot = self.slots.acquire() => match slot {
                Ok(slot) => slot,
                Err(_) => return ToolOutput::error(format!("{NAME}: the session is ending")),
            },
            _ = interrupts.changed() => {
                return ToolOutput::error("interrupted by the user before the sub-agent started");
            }
        };
        let transcript = match Transcript::open_sidechain(
            &self.kit.transcript_path,
            &self.kit.session_id,
            &id,
        ) {
            Ok(t) => t,
            Err(e) => {
                let message = format!("{NAME}: {e}");
                task.end(TaskStatus::Failed, &message, "");
                return ToolOutput::error(message);
            }
        };
        let output_file = transcript.path().display().to_string();
        let mut config = self.kit.config.clone();
        config.model = model_for(def.model.as_deref(), &self.parent_model());
        config.commands.clear();
        // The answer's schema is the main loop's: a sub-agent reports in prose.
        config.options.json_schema = None;
        if let Some(turns) = def.options.max_turns {
            config.max_turns = Some(turns);
        }
        if let Some(effort) = &def.options.effort {
            config.options.effort = Some(effort.clone());
        }
        let gate = match def.options.permission_mode {
            None => self.kit.gate.clone(),
            Some(mode) => match self.kit.gate.in_mode(mode) {
                Ok(gate) => gate,
                Err(why) => {
                    let message = format!(
                        "{NAME}: the agent type {} asks for permission mode {}: {why}",
                        def.name,
                        mode.as_str()
                    );
                    task.end(TaskStatus::Failed, &message, "");
                    return ToolOutput::error(message);
                }
            },
        };
        let observer: Arc<dyn LoopObserver> = match &self.kit.hooks {
            Some(hooks) => Arc::new(SubagentObserver::new(hooks.clone(), &def.name, &id)),
            None => Arc::new(NoObserver),
        };
        // Its own read-state: Edit and Write need the sub-agent itself to have read a file.
        let sub_ctx = ctx
            .clone()
            .with_read_state(Arc::new(ReadState::new()))
            .with_interrupts(task.stop_signal());
        let mut child = AgentLoop::new(
            self.kit.model.clone(),
            self.tools_for(&def),
            gate,
            sub_ctx,
            transcript,
            config,
        )
        .with_system(self.system_for(&def))
        .with_observer(observer)
        .with_mcp(self.mcp_for(&def))
        .as_subagent_of(id);
        if let Some(events) = &self.kit.events {
            child = child.with_events(events.clone());
        }
        let first = self.first_message(&def, str_field(&input, "prompt"));
        let outcome = child.run(&first, &mut interrupts).await;
        let (status, output) = match outcome.subtype.as_str() {
            "success" if outcome.text.trim().is_empty() => (
                TaskStatus::Completed,
                ToolOutput::ok("(the sub-agent ended without a report)"),
            ),
            "success" => (TaskStatus::Completed, ToolOutput::ok(outcome.text)),
            "interrupted" => (
                TaskStatus::Stopped,
                ToolOutput::error(
                    "the sub-agent was stopped (interrupted by the user or stopped by the client)",
                ),
            ),
            _ => (
                TaskStatus::Failed,
                ToolOutput::error(format!(
                    "the sub-agent ({}) did not finish: {}",
                    def.name, outcome.text
                )),
            ),
        };
        task.end(status, &summary(&output.content), &output_file);
        output
    }
}

/// Whether a sub-agent of `def` gets the parent's tool `name`: on its definition's list
/// (all tools without one) or a tool of an MCP server it names, and not disallowed by it;
/// never the Agent tool.
fn wanted(def: &AgentDefinition, name: &str) -> bool {
    let listed = def
        .tools
        .as_ref()
        .is_none_or(|list| list.iter().any(|t| t == name));
    let named_server = def
        .options
        .mcp_servers
        .iter()
        .any(|s| name.starts_with(&crate::mcp::tool::full_name(s, "")));
    (listed || named_server)
        && !def.disallowed_tools.iter().any(|t| t == name)
        && name != NAME
        && name != OLD_NAME
}

/// The first line of a report, short, for the task's end notice.
fn summary(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_lists_the_agent_types() {
        let defs = vec![AgentDefinition {
            name: "reviewer".into(),
            description: "Reviews code".into(),
            tools: Some(vec!["Read".into(), "Grep".into()]),
            disallowed_tools: Vec::new(),
            model: None,
            prompt: "Review.".into(),
            scope: super::super::definition::Scope::Project,
            options: Default::default(),
        }];
        let text = describe(&defs);
        assert!(text.contains("- general-purpose: "), "{text}");
        assert!(
            text.contains("- reviewer: Reviews code (Tools: Read, Grep)"),
            "{text}"
        );
    }
}
