//! Deferred MCP tools and the ToolSearch tool that loads them, as Claude Code's
//! `ENABLE_TOOL_SEARCH` sets it up: `auto` (the default) defers MCP tools once their
//! definitions would take more than 10% of the model's context window, `auto:N` past N%,
//! `true` always, `false` never.
//!
//! Claude Code sends every deferred tool with `defer_loading: true` and lets the
//! Messages API expand the `tool_reference` blocks ToolSearch returns, which only
//! Anthropic's own endpoint (with a beta header) understands. Cordon does the same work on
//! its side, so it holds for any endpoint that speaks the Messages API: a deferred tool
//! is left out of the request's `tools` array, its name is listed in ToolSearch's
//! description, and once ToolSearch picked it (or the model called it by name) its full
//! definition is in the `tools` array of every later request of that loop. A deferred
//! tool is still a tool of the registry: a call to it passes the same input check,
//! permission rules and hooks as any other.
//!
//! Each loop (the session's, each sub-agent's) has its own [`Deferred`] state: what one
//! loaded is not in another's prompt.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, str_field, u64_field};
use crate::agent::compact::CHARS_PER_TOKEN;
use crate::model::{ContentBlock, Message, ToolDefinition};

/// The tool's name, as Claude Code calls it.
pub const NAME: &str = "ToolSearch";
/// The environment variable that chooses the mode.
pub const ENV: &str = "ENABLE_TOOL_SEARCH";
/// Matches a keyword search returns unless the call asks for another number.
const DEFAULT_MAX_RESULTS: usize = 5;
/// The most matches one call returns.
const MAX_RESULTS: usize = 50;

/// When MCP tools are deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSearchMode {
    /// Never (`false`): every tool's definition goes in every request.
    Off,
    /// Always (`true`), when there is any MCP tool.
    Always,
    /// When the MCP tools' definitions would take more than `percent` of the window.
    Auto { percent: u8 },
}

impl Default for ToolSearchMode {
    fn default() -> Self {
        Self::Auto { percent: 10 }
    }
}

impl ToolSearchMode {
    /// `auto`, `auto:N` (0 to 100), `true`/`1`, `false`/`0`, in any case.
    pub fn parse(value: &str) -> Result<Self, String> {
        let v = value.trim().to_ascii_lowercase();
        match v.as_str() {
            "auto" => return Ok(Self::default()),
            "true" | "1" => return Ok(Self::Always),
            "false" | "0" => return Ok(Self::Off),
            _ => {}
        }
        v.strip_prefix("auto:")
            .and_then(|n| n.trim().parse::<u8>().ok())
            .filter(|n| *n <= 100)
            .map(|percent| Self::Auto { percent })
            .ok_or_else(|| {
                format!("{ENV}={value:?}: expected auto, auto:N (N from 0 to 100), true or false")
            })
    }

    /// The mode `value` names (the settings' `env`, else Cordon's environment); unset is
    /// `auto`, and a value that names no mode is `auto` with a warning.
    pub fn from_value(value: Option<&str>) -> Self {
        match value.map(Self::parse) {
            None => Self::default(),
            Some(Ok(mode)) => mode,
            Some(Err(why)) => {
                tracing::warn!("{why}; using auto");
                Self::default()
            }
        }
    }

    /// Whether MCP tools whose definitions take `tokens` are deferred in a window of
    /// `window` tokens.
    pub fn defers(self, tokens: u64, window: u64) -> bool {
        match self {
            Self::Off => false,
            Self::Always => true,
            Self::Auto { percent } => tokens * 100 > window * u64::from(percent),
        }
    }
}

/// A deferred tool as ToolSearch finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: String,
    description: String,
}

#[derive(Debug, Default)]
struct State {
    /// Deferral is on for the current request (ToolSearch is offered).
    active: bool,
    /// The deferrable tools the model may load (loaded ones included).
    entries: Vec<Entry>,
    /// Names whose definitions go in the requests from now on.
    loaded: BTreeSet<String>,
}

/// One loop's deferral state, shared with its ToolSearch tool.
#[derive(Debug, Clone)]
pub struct Deferred {
    mode: ToolSearchMode,
    state: Arc<Mutex<State>>,
}

impl Deferred {
    pub fn new(mode: ToolSearchMode) -> Self {
        Self {
            mode,
            state: Arc::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This loop's ToolSearch tool.
    pub fn tool(&self) -> ToolSearchTool {
        ToolSearchTool {
            deferred: self.clone(),
        }
    }

    /// The `tools` array of the next request, from the definitions the loop offers:
    /// when the deferrable ones (`deferrable` by name) pass the mode's share of `window`
    /// and ToolSearch may be offered (`search_offered`: no rule removes it), those not
    /// loaded yet are left out and ToolSearch, listing them, is added.
    pub fn select(
        &self,
        defs: Vec<ToolDefinition>,
        deferrable: &dyn Fn(&str) -> bool,
        window: u64,
        search_offered: bool,
    ) -> Vec<ToolDefinition> {
        let tokens: u64 = defs
            .iter()
            .filter(|d| deferrable(&d.name))
            .map(|d| serde_json::to_string(d).map_or(0, |s| s.len() as u64) / CHARS_PER_TOKEN)
            .sum();
        let mut state = self.state();
        state.active = search_offered && tokens > 0 && self.mode.defers(tokens, window);
        state.entries = entries(&defs, deferrable);
        if !state.active {
            return defs;
        }
        let mut kept: Vec<ToolDefinition> = defs
            .into_iter()
            .filter(|d| !deferrable(&d.name) || state.loaded.contains(&d.name))
            .collect();
        kept.push(ToolDefinition {
            name: NAME.into(),
            description: Some(describe(&state)),
            input_schema: input_schema(),
            cache_control: None,
            extra: serde_json::Map::new(),
        });
        kept
    }

    /// Loads the deferrable tools among `names` (tools the model called by name).
    pub fn mark_called<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        let mut state = self.state();
        for name in names {
            if state.entries.iter().any(|e| e.name == name) {
                state.loaded.insert(name.to_string());
            }
        }
    }

    /// Runs one ToolSearch call (`input` already checked): loads what it finds and says
    /// what that was.
    pub fn load(&self, input: &Value) -> String {
        let mut state = self.state();
        if state.entries.is_empty() {
            return "There are no deferred tools in this session: every tool's definition is \
                    already in your tool list."
                .into();
        }
        let found = search(&state.entries, input);
        let mut text = match found.matched.len() {
            0 => format!(
                "No deferred tool matches `{}`. The deferred tools are listed in this tool's \
                 description.",
                str_field(input, "query").trim()
            ),
            n => format!(
                "Loaded {n} tool{}; from your next step on, their full definitions are in your \
                 tool list:\n",
                if n == 1 { "" } else { "s" }
            ),
        };
        for e in &found.matched {
            let summary = e.description.lines().next().unwrap_or_default();
            text.push_str(&format!("- {}: {summary}\n", e.name));
        }
        if !found.unknown.is_empty() {
            text.push_str(&format!(
                "\nNot deferred tools (check the names against the list): {}",
                found.unknown.join(", ")
            ));
        }
        let names: Vec<String> = found.matched.iter().map(|e| e.name.clone()).collect();
        state.loaded.extend(names);
        text.trim_end().to_string()
    }

    /// The names loaded so far, in order.
    pub fn loaded(&self) -> Vec<String> {
        self.state().loaded.iter().cloned().collect()
    }

    /// What a resumed conversation had loaded: the deferrable tools it called and the
    /// matches of its successful ToolSearch calls, run again on today's `defs`.
    pub fn restore(
        &self,
        messages: &[Message],
        defs: &[ToolDefinition],
        deferrable: &dyn Fn(&str) -> bool,
    ) {
        let entries = entries(defs, deferrable);
        let failed: BTreeSet<&str> = messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                ContentBlock::ToolResult {
                    tool_use_id,
                    is_error: true,
                    ..
                } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        let mut loaded = BTreeSet::new();
        for block in messages.iter().flat_map(|m| &m.content) {
            let ContentBlock::ToolUse { id, name, input } = block else {
                continue;
            };
            if name == NAME && !failed.contains(id.as_str()) {
                loaded.extend(
                    search(&entries, input)
                        .matched
                        .into_iter()
                        .map(|e| e.name.clone()),
                );
            } else if entries.iter().any(|e| &e.name == name) {
                loaded.insert(name.clone());
            }
        }
        let mut state = self.state();
        state.entries = entries;
        state.loaded.extend(loaded);
    }
}

/// The deferrable tools among `defs`, as ToolSearch finds them.
fn entries(defs: &[ToolDefinition], deferrable: &dyn Fn(&str) -> bool) -> Vec<Entry> {
    defs.iter()
        .filter(|d| deferrable(&d.name))
        .map(|d| Entry {
            name: d.name.clone(),
            description: d.description.clone().unwrap_or_default(),
        })
        .collect()
}

/// ToolSearch's description: what it does, how to ask, and the deferred tools' names.
fn describe(state: &State) -> String {
    let mut text = String::from(
        "Loads the full definitions of deferred tools. The tools listed below exist but \
         their definitions (description and input schema) were left out of your tool list \
         to save context; you cannot see how to call one until it is loaded. Search by \
         keywords (`query: \"slack message\"`; a word prefixed with `+` must appear in the \
         tool's name or description) or select tools by exact name (`query: \
         \"select:name1,name2\"`). The matching tools are loaded: from your next step on, \
         their full definitions are in your tool list and you call them as usual.\n\n\
         <available-deferred-tools>\n",
    );
    for entry in &state.entries {
        if !state.loaded.contains(&entry.name) {
            text.push_str(&entry.name);
            text.push('\n');
        }
    }
    text.push_str("</available-deferred-tools>");
    text
}

fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "Keywords to search for, or \"select:<name>[,<name>...]\" to load tools by exact name"
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "description": "How many matching tools a keyword search loads at most (default 5)"
            }
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

/// What one query found.
struct Found<'a> {
    matched: Vec<&'a Entry>,
    /// `select:` names that are no deferred tool.
    unknown: Vec<String>,
}

/// The entries `input` (ToolSearch's validated input) asks for: `select:` names exactly
/// (a name in another case still matches), else the best keyword matches.
fn search<'a>(entries: &'a [Entry], input: &Value) -> Found<'a> {
    let query = str_field(input, "query").trim();
    let max = u64_field(input, "max_results")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(DEFAULT_MAX_RESULTS)
        .clamp(1, MAX_RESULTS);
    if let Some(names) = query.strip_prefix("select:") {
        let mut found = Found {
            matched: Vec::new(),
            unknown: Vec::new(),
        };
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let entry = entries
                .iter()
                .find(|e| e.name == name)
                .or_else(|| entries.iter().find(|e| e.name.eq_ignore_ascii_case(name)));
            match entry {
                Some(e) if !found.matched.contains(&e) => found.matched.push(e),
                Some(_) => {}
                None => found.unknown.push(name.to_string()),
            }
        }
        return found;
    }
    if let Some(e) = entries.iter().find(|e| e.name.eq_ignore_ascii_case(query)) {
        return Found {
            matched: vec![e],
            unknown: Vec::new(),
        };
    }
    Found {
        matched: keyword_matches(entries, query, max),
        unknown: Vec::new(),
    }
}

/// Entries scored by the query's words (a word among the name's parts counts most, then
/// a part containing it, the name, the description); `+word`s must all appear in the
/// name or description. Ties keep the entries' order.
fn keyword_matches<'a>(entries: &'a [Entry], query: &str, max: usize) -> Vec<&'a Entry> {
    let words: Vec<(bool, String)> = query
        .split_whitespace()
        .map(|w| match w.strip_prefix('+') {
            Some(rest) => (true, rest.to_lowercase()),
            None => (false, w.to_lowercase()),
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let mut scored: Vec<(u32, usize, &Entry)> = Vec::new();
    for (at, entry) in entries.iter().enumerate() {
        let name = entry.name.to_lowercase();
        let description = entry.description.to_lowercase();
        let parts: Vec<&str> = name
            .split(['_', '-', '.'])
            .filter(|p| !p.is_empty())
            .collect();
        let required_missing = words.iter().any(|(req, w)| {
            *req && !name.contains(w.as_str()) && !description.contains(w.as_str())
        });
        if required_missing {
            continue;
        }
        let score: u32 = words
            .iter()
            .map(|(_, w)| {
                if parts.contains(&w.as_str()) {
                    10
                } else if parts.iter().any(|p| p.contains(w.as_str())) {
                    5
                } else if name.contains(w.as_str()) {
                    3
                } else if description.contains(w.as_str()) {
                    2
                } else {
                    0
                }
            })
            .sum();
        if score > 0 {
            scored.push((score, at, entry));
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(max).map(|(_, _, e)| e).collect()
}

/// The ToolSearch tool of one loop.
pub struct ToolSearchTool {
    deferred: Deferred,
}

#[tonic::async_trait]
impl Tool for ToolSearchTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Loads the full definitions of deferred tools."
    }

    fn input_schema(&self) -> Value {
        input_schema()
    }

    /// It loads definitions into the prompt and changes nothing else.
    fn is_read_only(&self) -> bool {
        true
    }

    fn uses_sandbox(&self) -> bool {
        false
    }

    /// Offered by [`Deferred::select`], with the deferred tools in its description, only
    /// while deferral is on.
    fn is_offered(&self) -> bool {
        false
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> ToolOutput {
        ToolOutput::ok(self.deferred.load(&input))
    }
}

#[cfg(test)]
#[path = "tool_search_tests.rs"]
mod tests;
