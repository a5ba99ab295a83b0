//! One turn's tool calls: decide each (permission, input), run them — consecutive read-only
//! calls concurrently, consecutive sub-agents concurrently, anything that writes or
//! executes alone and in order — and build the
//! user turn of results, exactly one per tool_use, in the order the model asked.

use std::time::Instant;

use serde_json::Value;
use tokio::sync::watch;

use crate::agent::gate::{GateVerdict, ToolCallInfo, ToolGate};
use crate::model::{AssistantMessage, ContentBlock};
use crate::session::RecordBody;
use crate::tools::{Concurrency, ToolContext, ToolOutput, ToolRegistry};

/// One tool call and what will happen to it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    info: ToolCallInfo,
    /// The input the tool runs with (a gate may have rewritten it).
    input: Value,
    /// Set when the call will not run: the result to send instead.
    refused: Option<ToolOutput>,
    /// Which neighbours it may overlap with.
    concurrency: Concurrency,
}

/// The calls of one turn, decided.
#[derive(Debug)]
pub(crate) struct Plan {
    calls: Vec<Call>,
    /// Decision records for the transcript.
    pub(crate) decisions: Vec<RecordBody>,
}

pub(crate) async fn plan(
    reply: &AssistantMessage,
    tools: &ToolRegistry,
    gate: &dyn ToolGate,
) -> Plan {
    let mut calls = Vec::new();
    let mut decisions = Vec::new();
    for block in &reply.content {
        let ContentBlock::ToolUse { id, name, input } = block else {
            continue;
        };
        let read_only = tools.get(name).is_some_and(|t| t.is_read_only());
        let concurrency = tools
            .get(name)
            .map_or(Concurrency::Alone, |t| t.concurrency());
        let info = ToolCallInfo {
            tool_use_id: id.clone(),
            name: name.clone(),
            input: input.clone(),
            read_only,
            kind: tools.kind_of(name),
        };
        let mut run_input = input.clone();
        let mut refused = None;
        if let Some(err) = reply.tool_input_error(id) {
            refused = Some(ToolOutput::error(format!(
                "the input for {name} was not valid JSON ({err}); send the call again with complete, valid input"
            )));
        } else if let Err(out) = tools.check(name, input) {
            refused = Some(out);
        } else {
            let (decision, reason) = match gate.before(&info).await {
                GateVerdict::Allow { input, reason } => {
                    // A rewritten input must still be valid for the tool.
                    if let Err(out) = tools.check(name, &input) {
                        refused = Some(out);
                    }
                    run_input = input;
                    ("allow", reason)
                }
                GateVerdict::Deny { message, reason } => {
                    refused = Some(ToolOutput::error(message));
                    ("deny", reason)
                }
            };
            decisions.push(RecordBody::Decision {
                tool_use_id: id.clone(),
                tool: name.clone(),
                decision: decision.into(),
                reason,
            });
        }
        calls.push(Call {
            info,
            input: run_input,
            refused,
            concurrency,
        });
    }
    Plan { calls, decisions }
}

/// Runs the plan. Returns the result blocks (in call order), the ToolCall records, and
/// whether the user interrupted (calls not started by then get an "interrupted" result).
pub(crate) async fn execute(
    plan: Plan,
    tools: &ToolRegistry,
    gate: &dyn ToolGate,
    ctx: &ToolContext,
    interrupts: &mut watch::Receiver<u64>,
) -> (Vec<ContentBlock>, Vec<RecordBody>, bool) {
    let mut outputs: Vec<Option<(ToolOutput, u64)>> = vec![None; plan.calls.len()];
    let mut interrupted = false;
    let mut i = 0;
    while i < plan.calls.len() {
        if interrupted || interrupts.has_changed().unwrap_or(false) {
            interrupted = true;
            outputs[i] = Some((
                ToolOutput::error("interrupted by the user before this tool call ran"),
                0,
            ));
            i += 1;
            continue;
        }
        // A batch: one call, or a run of consecutive calls that may overlap (read-only
        // ones, or sub-agents).
        let mut end = i + 1;
        let group = plan.calls[i].concurrency;
        if group != Concurrency::Alone {
            while end < plan.calls.len() && plan.calls[end].concurrency == group {
                end += 1;
            }
        }
        let batch = &plan.calls[i..end];
        let results =
            futures::future::join_all(batch.iter().map(|call| run_one(call, tools, gate, ctx)))
                .await;
        for (k, result) in results.into_iter().enumerate() {
            outputs[i + k] = Some(result);
        }
        i = end;
    }
    if interrupts.has_changed().unwrap_or(false) {
        interrupted = true;
    }
    let mut blocks = Vec::with_capacity(plan.calls.len());
    let mut records = Vec::with_capacity(plan.calls.len());
    for (call, out) in plan.calls.into_iter().zip(outputs) {
        let (out, ms) = out.unwrap_or_else(|| (ToolOutput::error("the tool call did not run"), 0));
        records.push(RecordBody::ToolCall {
            tool_use_id: call.info.tool_use_id.clone(),
            name: call.info.name,
            input: call.input,
            is_error: out.is_error,
            duration_ms: ms,
        });
        blocks.push(ContentBlock::ToolResult {
            tool_use_id: call.info.tool_use_id,
            content: out.result_content(),
            is_error: out.is_error,
            cache_control: None,
        });
    }
    (blocks, records, interrupted)
}

async fn run_one(
    call: &Call,
    tools: &ToolRegistry,
    gate: &dyn ToolGate,
    ctx: &ToolContext,
) -> (ToolOutput, u64) {
    if let Some(refused) = &call.refused {
        return (refused.clone(), 0);
    }
    let start = Instant::now();
    let ctx = ctx.for_call(&call.info.tool_use_id);
    let out = tools.call(&call.info.name, &ctx, call.input.clone()).await;
    let out = gate.after(&call.info, out).await;
    (
        out,
        u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    )
}
