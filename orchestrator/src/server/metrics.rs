//! The server's Prometheus metrics: one registry, a typed method per thing measured, and
//! [`Metrics::render`] for `GET /metrics` (text exposition format 0.0.4).
//!
//! | metric | labels |
//! |---|---|
//! | `cordon_sessions` (gauge) | `tenant`, `state` |
//! | `cordon_sandbox_start_seconds` (histogram) | `start` = cold \| warm |
//! | `cordon_tool_call_seconds` (histogram) | `tool`, `outcome` |
//! | `cordon_exec_seconds` (histogram) | `outcome` |
//! | `cordon_permission_decisions_total` | `source`, `decision` |
//! | `cordon_model_request_seconds` (histogram) | `result` = ok \| error |
//! | `cordon_model_retries_total`, `cordon_model_errors_total` (failed attempts) | `kind` (errors: `http_529`...) |
//! | `cordon_tokens_total` | `tenant`, `kind` = input \| output \| cache_read \| cache_creation |
//! | `cordon_warm_pool_size` (gauge) | |

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use super::audit::{AuditDecision, DecisionSource, Outcome};
use crate::model::types::Usage;

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("registering metric: {0}")]
    Register(#[from] prometheus::Error),
}

/// How a sandbox came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartKind {
    /// Created for the session.
    Cold,
    /// Taken from the warm pool.
    Warm,
}

/// Latency buckets from a millisecond to a minute: tool calls and sandbox starts span it.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Model requests: a tenth of a second to five minutes.
const MODEL_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Every metric the server exports.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    sessions: IntGaugeVec,
    sandbox_start: HistogramVec,
    tool_call: HistogramVec,
    exec: HistogramVec,
    permission_decisions: IntCounterVec,
    model_request: HistogramVec,
    model_retries: IntCounter,
    model_errors: IntCounterVec,
    tokens: IntCounterVec,
    warm_pool: IntGauge,
}

impl Metrics {
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new_custom(Some("cordon".into()), None)?;
        let m = Self {
            sessions: IntGaugeVec::new(
                Opts::new("sessions", "Sessions by tenant and lifecycle state"),
                &["tenant", "state"],
            )?,
            sandbox_start: histogram(
                "sandbox_start_seconds",
                "Time from asking for a sandbox to its agent answering",
                LATENCY_BUCKETS,
                &["start"],
            )?,
            tool_call: histogram(
                "tool_call_seconds",
                "Tool call latency, permission decision to result",
                LATENCY_BUCKETS,
                &["tool", "outcome"],
            )?,
            exec: histogram(
                "exec_seconds",
                "Exec route latency, request to exit status",
                LATENCY_BUCKETS,
                &["outcome"],
            )?,
            permission_decisions: IntCounterVec::new(
                Opts::new(
                    "permission_decisions_total",
                    "Permission decisions by source",
                ),
                &["source", "decision"],
            )?,
            model_request: histogram(
                "model_request_seconds",
                "Model request latency, request to end of stream",
                MODEL_BUCKETS,
                &["result"],
            )?,
            model_retries: IntCounter::new("model_retries_total", "Model requests retried")?,
            model_errors: IntCounterVec::new(
                Opts::new("model_errors_total", "Model requests that failed, by kind"),
                &["kind"],
            )?,
            tokens: IntCounterVec::new(
                Opts::new("tokens_total", "Model tokens by tenant and kind"),
                &["tenant", "kind"],
            )?,
            warm_pool: IntGauge::new("warm_pool_size", "Sandboxes started and waiting")?,
            registry,
        };
        m.register_all()?;
        Ok(m)
    }

    fn register_all(&self) -> Result<(), MetricsError> {
        let r = &self.registry;
        r.register(Box::new(self.sessions.clone()))?;
        r.register(Box::new(self.sandbox_start.clone()))?;
        r.register(Box::new(self.tool_call.clone()))?;
        r.register(Box::new(self.exec.clone()))?;
        r.register(Box::new(self.permission_decisions.clone()))?;
        r.register(Box::new(self.model_request.clone()))?;
        r.register(Box::new(self.model_retries.clone()))?;
        r.register(Box::new(self.model_errors.clone()))?;
        r.register(Box::new(self.tokens.clone()))?;
        r.register(Box::new(self.warm_pool.clone()))?;
        Ok(())
    }

    /// A session of `tenant` moved from `from` (none when new) to `to` (none when gone).
    pub fn session_moved(&self, tenant: &str, from: Option<&str>, to: Option<&str>) {
        if let Some(from) = from {
            self.sessions.with_label_values(&[tenant, from]).dec();
        }
        if let Some(to) = to {
            self.sessions.with_label_values(&[tenant, to]).inc();
        }
    }

    /// Sets a count outright (after a restart, from the store).
    pub fn set_sessions(&self, tenant: &str, state: &str, count: i64) {
        self.sessions.with_label_values(&[tenant, state]).set(count);
    }

    /// Replaces every session count with `counts` ((tenant, state) to count): what the
    /// registry holds now, taken at each scrape, so a count can never drift.
    pub fn set_session_counts(&self, counts: impl IntoIterator<Item = ((String, String), i64)>) {
        self.sessions.reset();
        for ((tenant, state), n) in counts {
            self.sessions.with_label_values(&[&tenant, &state]).set(n);
        }
    }

    pub fn sandbox_started(&self, kind: StartKind, seconds: f64) {
        let label = match kind {
            StartKind::Cold => "cold",
            StartKind::Warm => "warm",
        };
        self.sandbox_start
            .with_label_values(&[label])
            .observe(seconds);
    }

    pub fn tool_call(&self, tool: &str, outcome: Outcome, seconds: f64) {
        self.tool_call
            .with_label_values(&[tool, outcome_label(outcome)])
            .observe(seconds);
    }

    pub fn exec(&self, outcome: Outcome, seconds: f64) {
        self.exec
            .with_label_values(&[outcome_label(outcome)])
            .observe(seconds);
    }

    pub fn permission_decision(&self, source: DecisionSource, decision: AuditDecision) {
        let decision = match decision {
            AuditDecision::Allow => "allow",
            AuditDecision::Deny => "deny",
        };
        self.permission_decisions
            .with_label_values(&[source_label(source), decision])
            .inc();
    }

    /// One model call ended, retries included: its message complete, or failed for good.
    pub fn model_request(&self, seconds: f64, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.model_request
            .with_label_values(&[result])
            .observe(seconds);
    }

    /// One model request attempt failed (`kind`: `http_529`, `read_stream`...), retried
    /// or not.
    pub fn model_error(&self, kind: &str) {
        self.model_errors.with_label_values(&[kind]).inc();
    }

    pub fn model_retry(&self) {
        self.model_retries.inc();
    }

    pub fn tokens(&self, tenant: &str, usage: &Usage) {
        for (kind, n) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_input_tokens),
            ("cache_creation", usage.cache_creation_input_tokens),
        ] {
            self.tokens.with_label_values(&[tenant, kind]).inc_by(n);
        }
    }

    pub fn set_warm_pool(&self, size: i64) {
        self.warm_pool.set(size);
    }

    /// The exposition text for `GET /metrics`.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec fails only for metric families the registry would not have
        // accepted; an empty page is then better than a 500 from the scrape.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::warn!("encoding metrics: {e}");
        }
        String::from_utf8(buf).unwrap_or_default()
    }

    /// The `Content-Type` of [`Metrics::render`].
    pub fn content_type() -> &'static str {
        "text/plain; version=0.0.4; charset=utf-8"
    }
}

/// The model client's requests, as they happen (set on the server's model configuration).
impl crate::model::RequestObserver for Metrics {
    fn attempt_failed(&self, error: &crate::model::ModelError) {
        self.model_error(&error.kind());
    }

    fn retried(&self) {
        self.model_retry();
    }

    fn finished(&self, elapsed: std::time::Duration, ok: bool) {
        self.model_request(elapsed.as_secs_f64(), ok);
    }
}

fn histogram(
    name: &str,
    help: &str,
    buckets: &[f64],
    labels: &[&str],
) -> Result<HistogramVec, prometheus::Error> {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
}

fn outcome_label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Ok => "ok",
        Outcome::Error => "error",
        Outcome::Denied => "denied",
        Outcome::Interrupted => "interrupted",
        Outcome::TimedOut => "timed_out",
    }
}

fn source_label(source: DecisionSource) -> &'static str {
    match source {
        DecisionSource::Rule => "rule",
        DecisionSource::Mode => "mode",
        DecisionSource::Hook => "hook",
        DecisionSource::User => "user",
        DecisionSource::Sandbox => "sandbox",
        DecisionSource::ApiKey => "api_key",
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
